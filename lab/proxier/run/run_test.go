package run

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/proxier/config"
)

func TestRunCommandErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "ipvs is refused", args: []string{"--proxy-mode=ipvs", "--objects=x.yaml"}, wantErr: "ipvs is not supported"},
		{name: "unknown mode", args: []string{"--proxy-mode=userspace"}, wantErr: `unknown proxy mode "userspace"`},
		{name: "missing objects file", args: []string{"--objects=" + filepath.Join(dir, "none.yaml")}, wantErr: "--objects"},
		{name: "bad config file", args: []string{"--config=" + filepath.Join(dir, "none.conf")}, wantErr: "no such file"},
		{name: "arguments", args: []string{"extra"}, wantErr: "unknown command"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := NewRunCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(tc.args)
			err := cmd.ExecuteContext(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestWriteConfigTo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.conf")
	cmd := NewRunCommand()
	cmd.SetArgs([]string{"--write-config-to=" + path, "--proxy-mode=iptables", "--cluster-cidr=10.244.0.0/16"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	kpc, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := config.Resolve(kpc)
	if err != nil {
		t.Fatal(err)
	}
	if r.Mode != "iptables" || r.ClusterCIDRs[0] != "10.244.0.0/16" || r.HealthzBindAddress != "0.0.0.0:10256" {
		t.Errorf("%+v", r)
	}
}
