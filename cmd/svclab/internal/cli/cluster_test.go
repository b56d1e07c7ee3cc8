package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/cluster/owner"
	"github.com/svclab/svclab/lab/embedded"
)

func TestClusterCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	if err := embedded.Preflight(); err != nil {
		t.Skipf("end-to-end test: %v", err)
	}
	state := t.TempDir()
	b := make([]byte, 3)
	rand.Read(b)
	name := "cli-" + hex.EncodeToString(b)
	out, err := runCLI(t, "cluster", "create", "--name", name, "--nodes", "2", "--state-dir", state)
	t.Cleanup(func() { runCLI(t, "cluster", "delete", "--name", name, "--state-dir", state) })
	if err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	for _, want := range []string{"✓ Starting kube-apiserver", "is ready", "export KUBECONFIG="} {
		if !strings.Contains(out, want) {
			t.Errorf("create output lacks %q:\n%s", want, out)
		}
	}
	out, err = runCLI(t, "cluster", "list", "--state-dir", state)
	if err != nil || !strings.Contains(out, name) || !strings.Contains(out, "running") {
		t.Errorf("list: %v\n%s", err, out)
	}
	out, err = runCLI(t, "cluster", "kubeconfig", "--name", name, "--state-dir", state)
	if err != nil || !strings.Contains(out, "certificate-authority-data") || !strings.Contains(out, "client-certificate-data") {
		t.Errorf("kubeconfig: %v\n%s", err, out)
	}
	out, err = runCLI(t, "cluster", "create", "--name", name, "--state-dir", state)
	if err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("duplicate create: %v\n%s", err, out)
	}
	// Another process holds the cluster (as an exercise run does while it
	// runs): delete refuses it, --all keeps it, list says who holds it.
	owners, err := owner.New(owner.Options{Command: "svclab exercise run"})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := owners.Acquire(context.Background(), owner.Claim{Backend: "embedded", Cluster: name}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	holder := fmt.Sprintf("svclab exercise run (pid %d)", os.Getpid())
	out, err = runCLI(t, "cluster", "delete", "--name", name, "--state-dir", state)
	if err == nil || !strings.Contains(err.Error(), "cluster "+name+" is in use by "+holder) || !strings.Contains(err.Error(), "--force") {
		t.Errorf("delete of a cluster in use: %v\n%s", err, out)
	}
	out, err = runCLI(t, "cluster", "list", "--state-dir", state)
	if err != nil || !strings.Contains(out, "IN USE BY") || !strings.Contains(out, holder) {
		t.Errorf("list of a cluster in use: %v\n%s", err, out)
	}
	out, err = runCLI(t, "cluster", "delete", "--all", "--state-dir", state)
	if err != nil || !strings.Contains(out, "Kept (--force deletes them too):") || !strings.Contains(out, name) {
		t.Errorf("delete --all beside a cluster in use: %v\n%s", err, out)
	}
	out, _ = runCLI(t, "cluster", "list", "--state-dir", state)
	if !strings.Contains(out, "running") {
		t.Errorf("the cluster in use after delete --all:\n%s", out)
	}
	out, err = runCLI(t, "cluster", "delete", "--name", name, "--force", "--state-dir", state)
	if err != nil || !strings.Contains(out, "Deleted cluster") {
		t.Errorf("delete --force: %v\n%s", err, out)
	}
	out, _ = runCLI(t, "cluster", "list", "--state-dir", state)
	if !strings.Contains(out, "No clusters.") {
		t.Errorf("list after delete:\n%s", out)
	}
}

func TestParseNodeLabels(t *testing.T) {
	got, err := parseNodeLabels([]string{"lab-worker:topology.kubernetes.io/zone=a", "lab-worker:x=", "lab-worker2:k=v=w"})
	if err != nil {
		t.Fatal(err)
	}
	if got["lab-worker"]["topology.kubernetes.io/zone"] != "a" || got["lab-worker"]["x"] != "" || got["lab-worker2"]["k"] != "v=w" {
		t.Errorf("got %v", got)
	}
	for _, bad := range []string{"", "a", ":k=v", "n:=v", "n:k"} {
		if _, err := parseNodeLabels([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
