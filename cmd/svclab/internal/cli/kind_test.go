package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Docker installed, its daemon not running: one line saying so.
func TestKindDockerDown(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("no docker command here")
	}
	t.Setenv("DOCKER_HOST", "unix://"+t.TempDir()+"/docker.sock")
	out, err := runCLI(t, "--state-dir", t.TempDir(), "cluster", "create", "--backend", "kind", "--name", "lab")
	if out != "" || err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "Docker is installed but its daemon is not running") {
		t.Errorf("output %q, err %v", out, err)
	}
	t.Logf("svclab: %v", err)
}

// Without Docker, creating a kind cluster prints one line: what is
// missing, how to install it, and the embedded backend.
func TestKindWithoutDocker(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no docker command
	state := t.TempDir()
	out, err := runCLI(t, "--state-dir", state, "cluster", "create", "--backend", "kind", "--name", "lab")
	if out != "" {
		t.Errorf("printed %q before the error", out)
	}
	if err == nil || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %q, want one line", err)
	}
	for _, want := range []string{"needs Docker", "apt-get install docker.io", "--backend embedded"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %q, want it to contain %q", err, want)
		}
	}
	t.Logf("svclab: %v", err)
	if _, err := runCLI(t, "--state-dir", state, "images", "load", "--cluster", "lab"); err == nil || !strings.Contains(err.Error(), "needs Docker") {
		t.Errorf("images load without Docker: %v", err)
	}
	// Listing needs no Docker while svclab has no kind clusters.
	if out, err := runCLI(t, "--state-dir", state, "cluster", "list"); err != nil || out != "No clusters.\n" {
		t.Errorf("cluster list = %q, %v", out, err)
	}
}

func TestKindBadInvocations(t *testing.T) {
	state := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cluster", "create", "--kind-config", "nftables"}, "--kind-config and --node-image are for --backend kind"},
		{[]string{"cluster", "create", "--backend", "kind", "--kind-config", "five-zones"}, `no kind cluster shape "five-zones"`},
		{[]string{"cluster", "list", "--backend", "vagrant"}, `unknown backend "vagrant"`},
		{[]string{"node", "exec", "--name", "nope", "nope-worker", "--", "true"}, `no cluster named "nope"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := runCLI(t, append([]string{"--state-dir", state}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v (output %q), want %q", err, out, tc.want)
			}
		})
	}
}

// A name one backend has is refused on the other, before anything else.
func TestKindNameTakenOnOtherBackend(t *testing.T) {
	state := t.TempDir()
	dir := filepath.Join(state, "kind", "lab")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cluster.json"), []byte(`{"name":"lab","shape":"nftables","complete":true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "--state-dir", state, "cluster", "create", "--name", "lab")
	if err == nil || !strings.Contains(err.Error(), `a cluster named "lab" exists already on the kind backend`) || out != "" {
		t.Errorf("create on embedded = %v (output %q)", err, out)
	}
}
