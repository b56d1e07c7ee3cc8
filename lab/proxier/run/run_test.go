//go:build linux

package run

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/svclab/svclab/lab/proxier/config"
	"github.com/svclab/svclab/lab/proxier/daemon"
	"github.com/svclab/svclab/lab/proxier/nftables"
)

func TestRunCommandErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
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

// ipvs mode as kube-proxy v1.37 runs it on a kernel without IPVS: the
// nftables mode's tables are cleaned up first (ipvs mode is iptables-based),
// then the proxier cannot be created and the daemon exits.
func TestRefuseIPVS(t *testing.T) {
	for _, tc := range []struct {
		name      string
		available func() error
		wantErr   string
	}{
		{name: "kernel without IPVS", available: daemon.IPVSAvailableIn(func(string) error { return errors.New("no such family") }),
			wantErr: "can't use the IPVS proxier: ipvs not supported"},
		{name: "kernel with IPVS", available: daemon.IPVSAvailableIn(func(string) error { return nil }),
			wantErr: "can't use the IPVS proxier: svclab's proxier implements the nftables and iptables modes only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var nfts []knftables.Interface
			for _, fam := range []knftables.Family{knftables.IPv4Family, knftables.IPv6Family} {
				fake := knftables.NewFake(fam, nftables.Table)
				tx := fake.NewTransaction()
				tx.Add(&knftables.Table{})
				tx.Add(&knftables.Chain{Name: "services"})
				if err := fake.Run(context.Background(), tx); err != nil {
					t.Fatal(err)
				}
				nfts = append(nfts, fake)
			}
			err := refuseIPVS(context.Background(), slog.New(slog.DiscardHandler), nfts, tc.available)
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
			for _, nft := range nfts {
				if fake := nft.(*knftables.Fake); fake.Table != nil {
					t.Errorf("the %s kube-proxy table is still there:\n%s", fake.Table.Family, fake.Dump())
				}
			}
		})
	}
}
