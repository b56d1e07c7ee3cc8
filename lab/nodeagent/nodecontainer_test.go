package nodeagent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A node command is entered with nsenter from the node container's first
// process, with the container's environment; a container whose process
// has ended (or whose PID now names another process) is refused.
func TestNodeContainerCommand(t *testing.T) {
	start, err := processStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, state string
		wantErr     string
	}{
		{"running", fmt.Sprintf(`{"id":"node-lab-worker","init_process_pid":%d,"init_process_start":%d}`, os.Getpid(), start), ""},
		{"pid recycled", fmt.Sprintf(`{"id":"node-lab-worker","init_process_pid":%d,"init_process_start":%d}`, os.Getpid(), start+1), "has ended"},
		{"no state", "", "not running"},
		{"garbage", "{", "reading the state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			nc := NodeContainer{RuncRoot: filepath.Join(dir, "runc"), Bundle: filepath.Join(dir, "bundle"), ID: "node-lab-worker"}
			for _, d := range []string{filepath.Join(nc.RuncRoot, nc.ID), nc.Bundle} {
				if err := os.MkdirAll(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if tc.state != "" {
				if err := os.WriteFile(filepath.Join(nc.RuncRoot, nc.ID, "state.json"), []byte(tc.state), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			spec := `{"process":{"env":["PATH=/usr/sbin:/usr/bin:/sbin:/bin","HOME=/root"],"cwd":"/root"}}`
			if err := os.WriteFile(filepath.Join(nc.Bundle, "config.json"), []byte(spec), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd, err := nc.Command(context.Background(), []string{"nft", "list", "ruleset"})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"nsenter", "--target", fmt.Sprint(os.Getpid()), "--user", "--mount", "--uts", "--ipc", "--net", "--pid", "--root", "--wd", "--", "nft", "list", "ruleset"}
			if !slices.Equal(cmd.Args, want) {
				t.Errorf("args %q, want %q", cmd.Args, want)
			}
			if !slices.Equal(cmd.Env, []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}) {
				t.Errorf("env %q", cmd.Env)
			}
		})
	}
}
