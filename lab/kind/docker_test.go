package kind

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/cluster"
)

// standInDocker puts testdata/docker/docker first on PATH with two kind
// clusters: svclab's "lab" (a control plane and a worker) and "mine".
func standInDocker(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs("testdata/docker")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	containers := "lab-control-plane lab control-plane 172.18.0.2\nlab-worker lab worker 172.18.0.3\nmine-control-plane mine control-plane 172.18.0.9\n"
	if err := os.WriteFile(filepath.Join(dir, "containers"), []byte(containers), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_DOCKER", dir)
	t.Setenv("PATH", abs+":"+os.Getenv("PATH"))
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(home, ".kube")); err == nil {
			t.Error("kind wrote ~/.kube")
		}
	})
	return dir
}

// The real engine drives kind's library, which drives docker: clusters by
// kind's labels, nodes, commands with their exit codes, kind's loader, and
// delete with the cluster's own kubeconfig.
func TestDockerEngine(t *testing.T) {
	dir := standInDocker(t)
	ctx := context.Background()
	d := Docker{}

	clusters, err := d.Clusters(ctx)
	if err != nil || !slices.Equal(clusters, []string{"lab", "mine"}) {
		t.Fatalf("Clusters = %q, %v", clusters, err)
	}
	nodes, err := d.Nodes(ctx, "lab")
	if err != nil || len(nodes) != 2 {
		t.Fatalf("Nodes = %v, %v", nodes, err)
	}
	var worker Node
	for _, n := range nodes {
		if n.Name() == "lab-worker" {
			worker = n
		}
	}
	if worker == nil {
		t.Fatalf("no lab-worker among %v", nodes)
	}
	if role, err := worker.Role(); err != nil || role != "worker" {
		t.Errorf("Role = %q, %v", role, err)
	}
	if ip, err := worker.IP(); err != nil || ip != "172.18.0.3" {
		t.Errorf("IP = %q, %v", ip, err)
	}

	var stdout, stderr bytes.Buffer
	err = worker.Exec(ctx, []string{"sh", "-c", "cat; echo out; echo err >&2; exit 3"}, cluster.Stdio{Stdin: strings.NewReader("in\n"), Stdout: &stdout, Stderr: &stderr})
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("Exec = %v, want exit status 3", err)
	}
	if stdout.String() != "in\nout\n" || stderr.String() != "err\n" {
		t.Errorf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
	if err := worker.Exec(ctx, []string{"true"}, cluster.Stdio{}); err != nil {
		t.Errorf("Exec(true) = %v", err)
	}

	if err := worker.LoadImageArchive(ctx, strings.NewReader("ARCHIVE")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "imported-lab-worker")); string(got) != "ARCHIVE" {
		t.Errorf("imported %q", got)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "log"))
	if !strings.Contains(string(log), "exec --privileged -i lab-worker ctr --namespace=k8s.io images import --all-platforms --digests --snapshotter=overlayfs -") {
		t.Errorf("kind's loader did not run ctr import:\n%s", log)
	}

	// Through the provider: a svclab cluster's node commands run in the
	// node's tools container, exit codes and all.
	p := New(t.TempDir(), nil)
	// The stand-in is the docker command: no daemon to find or start, and
	// kind's own node image.
	p.Engine, p.NodeImage = Docker{}, "kindest/node:v1.37.0"
	st := &State{Name: "lab", Shape: "nftables", Proxier: "nftables", Complete: true}
	if err := os.MkdirAll(p.dir("lab"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := st.save(paths{p.dir("lab")}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := paths{p.dir("lab")}.kubeconfig()
	if err := os.WriteFile(kubeconfig, []byte(testKubeconfig("lab")), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := p.Get(ctx, "lab")
	if err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if err := c.NodeExec(ctx, "lab-control-plane", []string{"echo", "hello"}, cluster.Stdio{Stdout: &stdout}); err != nil || stdout.String() != "hello\n" {
		t.Errorf("NodeExec = %q, %v", stdout.String(), err)
	}
	if err := c.NodeExec(ctx, "lab-control-plane", []string{"sh", "-c", "exit 7"}, cluster.Stdio{}); !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Errorf("NodeExec(exit 7) = %v", err)
	}
	log, _ = os.ReadFile(filepath.Join(dir, "log"))
	if !strings.Contains(string(log), "exec --privileged lab-control-plane ctr -n k8s.io task exec --exec-id svclab-") {
		t.Errorf("NodeExec did not go through the tools container:\n%s", log)
	}

	// Delete removes lab's nodes, and only from the cluster's kubeconfig;
	// the user's kind cluster stays.
	if err := p.Delete(ctx, "lab"); err != nil {
		t.Fatal(err)
	}
	clusters, _ = d.Clusters(ctx)
	if !slices.Equal(clusters, []string{"mine"}) {
		t.Errorf("after Delete kind has %q", clusters)
	}
	if err := p.Delete(ctx, "mine"); err == nil || !strings.Contains(err.Error(), "not made by svclab") {
		t.Errorf("Delete(mine) = %v", err)
	}
}

// kind's real create, failing in Docker before any node exists (the
// stand-in has no networks): the error says why, kind's steps came through
// as progress, nothing is left; a name kind has already is refused before
// kind is asked.
func TestDockerEngineCreateFails(t *testing.T) {
	dir := standInDocker(t)
	ctx := context.Background()
	p := New(t.TempDir(), nil)
	// The stand-in is the docker command: no daemon to find or start, and
	// kind's own node image.
	p.Engine, p.NodeImage = Docker{}, "kindest/node:v1.37.0"
	p.Images = &fakeImages{dir: t.TempDir(), ref: "svclab/proxier:0"}
	progress := &stepRecorder{}
	_, err := p.Create(ctx, cluster.CreateOptions{Name: "fresh", Workers: 1, Progress: progress})
	if err == nil || !strings.Contains(err.Error(), "kind could not create the cluster: failed to ensure docker network") {
		t.Fatalf("Create = %v", err)
	}
	if !progress.has("start Ensuring node image (kindest/node:v1.37.0") || !progress.has("done Removing the half-created cluster") {
		t.Errorf("progress:\n%s", strings.Join(progress.lines, "\n"))
	}
	if entries, _ := os.ReadDir(filepath.Join(p.StateDir, "kind")); len(entries) != 0 {
		t.Errorf("state left: %v", entries)
	}
	if clusters, _ := (Docker{}).Clusters(ctx); !slices.Equal(clusters, []string{"lab", "mine"}) {
		t.Errorf("kind clusters afterwards: %q", clusters)
	}

	before, _ := os.ReadFile(filepath.Join(dir, "log"))
	_, err = p.Create(ctx, cluster.CreateOptions{Name: "mine", Workers: 1})
	if !errors.Is(err, cluster.ErrExists) || !strings.Contains(err.Error(), `kind has a cluster named "mine" already, which svclab did not make`) {
		t.Errorf("Create(mine) = %v", err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "log"))
	if strings.Contains(string(after[len(before):]), "rm ") || strings.Contains(string(after[len(before):]), "run ") {
		t.Errorf("Create(mine) touched containers:\n%s", after[len(before):])
	}
}

func TestWithoutStacks(t *testing.T) {
	out := "[wait-control-plane] Waiting for the kubelet\n" +
		"error: could not check the kubelet: context deadline exceeded\n" +
		"k8s.io/kubernetes/cmd/kubeadm/app/cmd/phases/init.runWaitControlPlanePhase\n" +
		"\tk8s.io/kubernetes@v1.37.2/cmd/kubeadm/app/cmd/phases/init/waitcontrolplane.go:114\n" +
		"main.main\n" +
		"\tgithub.com/svclab/svclab/lab/kube/main.go:110\n"
	want := "[wait-control-plane] Waiting for the kubelet\nerror: could not check the kubelet: context deadline exceeded\n"
	if got := withoutStacks(out); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
