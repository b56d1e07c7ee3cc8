//go:build linux

package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/embedded/cgroups"
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
			procs, err := cgroups.ProcsFiles(os.Getpid())
			if err != nil {
				t.Fatal(err)
			}
			want := append(append([]string{"/bin/sh", "-c", joinCgroups, "sh"}, procs...), "--",
				"nsenter", "--target", fmt.Sprint(os.Getpid()), "--user", "--mount", "--uts", "--ipc", "--net", "--pid", "--root", "--wd", "--", "nft", "list", "ruleset")
			if !slices.Equal(cmd.Args, want) {
				t.Errorf("args %q, want %q", cmd.Args, want)
			}
			if !slices.Equal(cmd.Env, []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}) {
				t.Errorf("env %q", cmd.Env)
			}
		})
	}
}

// TestJoinCgroups runs the script that moves a node command into its
// node's cgroups, with plain files standing in for cgroup.procs: each
// gets the PID the command then runs as, and a file it cannot write stops
// the command before it runs.
func TestJoinCgroups(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	out, err := exec.Command("/bin/sh", "-c", joinCgroups, "sh", a, b, "--", "sh", "-c", `echo "$$ $1"`, "x", "arg").Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, rest, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if rest != "arg" {
		t.Errorf("the command's arguments: %q", out)
	}
	for _, f := range []string{a, b} {
		if got, _ := os.ReadFile(f); strings.TrimSpace(string(got)) != pid {
			t.Errorf("%s holds %q, want the command's PID %s", f, got, pid)
		}
	}
	ran := filepath.Join(dir, "ran")
	err = exec.Command("/bin/sh", "-c", joinCgroups, "sh", filepath.Join(dir, "missing", "cgroup.procs"), "--", "touch", ran).Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 125 {
		t.Errorf("a cgroup it cannot join: %v, want exit 125", err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran outside its cgroups")
	}
}
