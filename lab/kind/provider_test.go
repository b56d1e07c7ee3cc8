package kind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/lab/cluster"
)

func TestCreateUseDelete(t *testing.T) {
	p, eng, imgs, api := testProvider(t)
	ctx := context.Background()
	progress := &stepRecorder{}
	c, err := p.Create(ctx, cluster.CreateOptions{Name: "lab", Workers: 2, ProxyMode: "iptables", Progress: progress,
		NodeLabels: map[string]map[string]string{"lab-worker2": {"topology.kubernetes.io/zone": "zone-b"}}})
	if err != nil {
		t.Fatalf("Create: %v\n%s", err, strings.Join(progress.lines, "\n"))
	}

	// kind got the iptables shape, with the bundled proxier in place of
	// kube-proxy and the label, and its progress came through as steps.
	config := string(eng.configs["lab"])
	for _, want := range []string{"shape iptables; kube-proxy: svclab's bundled proxier, iptables mode", "kubeProxyMode: none", "topology.kubernetes.io/zone: zone-b"} {
		if !strings.Contains(config, want) {
			t.Errorf("kind config lacks %q:\n%s", want, config)
		}
	}
	if strings.Contains(config, "failCgroupV1") {
		t.Error("cgroup v1 patch on a cgroup v2 host")
	}
	for _, want := range []string{"start Preparing the lab's images", "start Ensuring node image (kindest/node:v1.37.0) 🖼", "done Preparing nodes 📦 📦 📦",
		"done Starting control-plane 🕹️", "done Loading the lab's images into the nodes", "done Installing kube-proxy (the bundled proxier, iptables mode)",
		"done Waiting for the nodes, kube-proxy and CoreDNS to be ready", "info kubeconfig: "} {
		if !progress.has(want) {
			t.Errorf("progress lacks %q:\n%s", want, strings.Join(progress.lines, "\n"))
		}
	}
	if progress.has("info debug line") {
		t.Error("kind's debug lines reached the progress")
	}

	// Every node has the archive.
	for _, n := range []string{"lab-control-plane", "lab-worker", "lab-worker2"} {
		if got := eng.node("lab", n).loaded; len(got) != 1 || got[0] != "archive "+imgs.ref {
			t.Errorf("node %s loaded %q", n, got)
		}
	}

	// The bundled proxier: lab/proxier/deploy's objects, the loaded image,
	// never pulled, talking to the control plane by its kind name.
	cs := api.clients["lab"]
	ds, err := cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctr := ds.Spec.Template.Spec.Containers[0]
	if ctr.Image != imgs.ref || ctr.ImagePullPolicy != corev1.PullNever || ctr.Command[0] != "/usr/local/bin/kube-proxy" {
		t.Errorf("kube-proxy container: image %q pull %q command %q", ctr.Image, ctr.ImagePullPolicy, ctr.Command)
	}
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data["kubeconfig.conf"], "server: https://lab-control-plane:6443") || !strings.Contains(cm.Data["config.conf"], "mode: iptables") {
		t.Errorf("kube-proxy ConfigMap:\n%s\n%s", cm.Data["kubeconfig.conf"], cm.Data["config.conf"])
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, "kubeadm:node-proxier", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}

	// The kubeconfig is the cluster's own file.
	kp := c.(*Cluster).KubeconfigPath()
	if kp != filepath.Join(p.StateDir, "kind", "lab", "kubeconfig") {
		t.Errorf("kubeconfig at %s", kp)
	}
	if kc, err := c.Kubeconfig(); err != nil || !strings.Contains(string(kc), "kind-lab") {
		t.Errorf("Kubeconfig: %v", err)
	}
	if rc, err := c.RESTConfig(); err != nil || rc.Host != "https://127.0.0.1:40123" {
		t.Errorf("RESTConfig: %+v, %v", rc, err)
	}

	// Get, Nodes, NodeExec.
	got, err := p.Get(ctx, "lab")
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := got.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []cluster.Node{
		{Name: "lab-control-plane", Role: cluster.RoleControlPlane, IP: "172.18.0.2"},
		{Name: "lab-worker", Role: cluster.RoleWorker, IP: "172.18.0.3"},
		{Name: "lab-worker2", Role: cluster.RoleWorker, IP: "172.18.0.4", Labels: map[string]string{"topology.kubernetes.io/zone": "zone-b"}},
	}
	if diff := cmp.Diff(want, nodes); diff != "" {
		t.Errorf("Nodes (-want +got):\n%s", diff)
	}
	var out bytes.Buffer
	if err := got.NodeExec(ctx, "lab-worker", []string{"nft", "list", "ruleset"}, cluster.Stdio{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "lab-worker: nft list ruleset\n" {
		t.Errorf("NodeExec output %q", out.String())
	}
	if last := eng.node("lab", "lab-worker").execs; !strings.HasPrefix(strings.Join(last[len(last)-1], " "), "ctr -n k8s.io task exec --exec-id svclab-") {
		t.Errorf("NodeExec ran %q, not in the node's tools container", last[len(last)-1])
	}
	var ee *exec.ExitError
	if err := got.NodeExec(ctx, "lab-worker", []string{"false"}, cluster.Stdio{}); !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("NodeExec(false) = %v, want an exit status the CLI can pass on", err)
	}
	if err := got.NodeExec(ctx, "lab-worker9", []string{"true"}, cluster.Stdio{}); err == nil || !strings.Contains(err.Error(), `no node "lab-worker9"; its nodes are lab-control-plane, lab-worker, lab-worker2`) {
		t.Errorf("NodeExec on a missing node: %v", err)
	}

	list, err := p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantList := []cluster.Summary{{Name: "lab", Backend: "kind", State: "running", Server: "https://127.0.0.1:40123", Detail: "3 nodes, shape iptables, bundled proxier (iptables)"}}
	if diff := cmp.Diff(wantList, list); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}

	// A restarted node has lost its tools container: NodeExec says so,
	// and images load starts it again.
	eng.node("lab", "lab-worker").tools = false
	var stderr bytes.Buffer
	if err := got.NodeExec(ctx, "lab-worker", []string{"nft", "list", "ruleset"}, cluster.Stdio{Stderr: &stderr}); err == nil || !strings.Contains(stderr.String(), "no running task") {
		t.Errorf("NodeExec without the tools container: %v, %q", err, stderr.String())
	}

	// Loading images again with a new proxier image moves the DaemonSet.
	imgs.ref = "svclab/proxier:fedcba987654"
	if err := p.LoadImages(ctx, "lab", []string{"nginx:1.25"}, nil); err != nil {
		t.Fatal(err)
	}
	if imgs.extra[0] != "nginx:1.25" {
		t.Errorf("extra images %q", imgs.extra)
	}
	ds, _ = cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if img := ds.Spec.Template.Spec.Containers[0].Image; img != imgs.ref {
		t.Errorf("after images load kube-proxy runs %s, want %s", img, imgs.ref)
	}
	if n := eng.node("lab", "lab-worker"); len(n.loaded) != 2 || !n.tools {
		t.Errorf("worker loaded %d archives, want 2; tools container running: %v", len(n.loaded), n.tools)
	}

	if err := p.Delete(ctx, "lab"); err != nil {
		t.Fatal(err)
	}
	if len(eng.clusters) != 0 {
		t.Errorf("kind clusters left: %v", eng.clusters)
	}
	if !slices.Contains(eng.calls, "delete lab kubeconfig") {
		t.Errorf("kind delete not given the cluster's kubeconfig: %q", eng.calls)
	}
	if _, err := os.Stat(filepath.Join(p.StateDir, "kind", "lab")); !os.IsNotExist(err) {
		t.Errorf("state left: %v", err)
	}
	if _, err := p.Get(ctx, "lab"); !errors.Is(err, cluster.ErrNotFound) {
		t.Errorf("Get after Delete: %v", err)
	}
	if err := p.Delete(ctx, "lab"); !errors.Is(err, cluster.ErrNotFound) {
		t.Errorf("Delete twice: %v", err)
	}
}

// Upstream kube-proxy: kind installs it; svclab installs no proxier and
// waits for kind's.
func TestCreateUpstreamKubeProxy(t *testing.T) {
	p, eng, _, api := testProvider(t)
	p.Shape = "upstream-kube-proxy"
	ctx := context.Background()
	// kind's kube-proxy DaemonSet, as kubeadm makes it.
	eng.onCreate = func() {
		cs, _ := api.client([]byte(testKubeconfig("up")))
		cs.AppsV1().DaemonSets("kube-system").Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"}}, metav1.CreateOptions{})
	}
	progress := &stepRecorder{}
	if _, err := p.Create(ctx, cluster.CreateOptions{Name: "up", Workers: -1, Progress: progress}); err != nil {
		t.Fatal(err)
	}
	if progress.has("start Installing kube-proxy") {
		t.Error("installed the bundled proxier on the upstream shape")
	}
	if !strings.Contains(string(eng.configs["up"]), "kubeProxyMode: nftables") {
		t.Errorf("config:\n%s", eng.configs["up"])
	}
	ds, _ := api.clients["up"].AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if ds.Spec.Template.Spec.Containers != nil {
		t.Error("kind's kube-proxy DaemonSet was replaced")
	}
}

func TestCreateCgroupV1(t *testing.T) {
	p, eng, _, _ := testProvider(t)
	eng.info.CgroupVersion = "1"
	progress := &stepRecorder{}
	if _, err := p.Create(context.Background(), cluster.CreateOptions{Name: "lab", Workers: 1, Progress: progress}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(eng.configs["lab"]), "failCgroupV1: false") {
		t.Errorf("no kubelet patch:\n%s", eng.configs["lab"])
	}
	if !progress.has("info warning: this host runs cgroup v1") {
		t.Errorf("no warning:\n%s", strings.Join(progress.lines, "\n"))
	}
}

func TestCreateErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, p *Provider, eng *fakeEngine, imgs *fakeImages, api *fakeAPI) context.Context
		opts  cluster.CreateOptions
		want  string
		is    error
		// kind clusters that must be there afterwards.
		left []string
		// creates says whether kind's create may have been called.
		creates bool
	}{
		{name: "no docker", setup: func(_ *testing.T, _ *Provider, eng *fakeEngine, _ *fakeImages, _ *fakeAPI) context.Context {
			eng.checkErr = ErrNoDocker
			return context.Background()
		}, want: "the kind backend needs Docker, which is not installed here (Docker is not installed): install Docker (Debian and Ubuntu: sudo apt-get install docker.io; elsewhere Docker Engine or Docker Desktop), or use the embedded backend, which needs no Docker: svclab cluster create --backend embedded", is: ErrNoDocker},
		{name: "docker not running", setup: func(_ *testing.T, _ *Provider, eng *fakeEngine, _ *fakeImages, _ *fakeAPI) context.Context {
			eng.checkErr = ErrDockerDown
			return context.Background()
		}, want: "Docker is installed but its daemon is not running (the Docker daemon is not running): start it (sudo systemctl start docker", is: ErrDockerDown},
		{name: "docker denied", setup: func(_ *testing.T, _ *Provider, eng *fakeEngine, _ *fakeImages, _ *fakeAPI) context.Context {
			eng.checkErr = ErrDockerDenied
			return context.Background()
		}, want: "add the user to the docker group", is: ErrDockerDenied},
		{name: "bad name", opts: cluster.CreateOptions{Name: "Lab_1"}, want: `cluster name "Lab_1" is not valid`},
		{name: "ipvs", opts: cluster.CreateOptions{Name: "lab", ProxyMode: "ipvs"}, want: "proxy mode ipvs is not available"},
		{name: "unknown shape", setup: func(_ *testing.T, p *Provider, _ *fakeEngine, _ *fakeImages, _ *fakeAPI) context.Context {
			p.Shape = "four-zones"
			return context.Background()
		}, want: `no kind cluster shape "four-zones"`},
		{name: "label for a missing node", opts: cluster.CreateOptions{Name: "lab", Workers: 1, NodeLabels: map[string]map[string]string{"lab-worker2": {"a": "b"}}},
			want: "node label for lab-worker2: the cluster's nodes are lab-control-plane, lab-worker"},
		{name: "kind cluster of the user's with that name", setup: func(_ *testing.T, _ *Provider, eng *fakeEngine, _ *fakeImages, _ *fakeAPI) context.Context {
			eng.clusters["lab"] = []*fakeNode{{name: "lab-control-plane", role: "control-plane"}}
			return context.Background()
		}, want: `kind has a cluster named "lab" already, which svclab did not make`, is: cluster.ErrExists, left: []string{"lab"}},
		{name: "svclab cluster with that name", setup: func(t *testing.T, p *Provider, _ *fakeEngine, _ *fakeImages, _ *fakeAPI) context.Context {
			if _, err := p.Create(context.Background(), cluster.CreateOptions{Name: "lab", Workers: 1}); err != nil {
				t.Fatal(err)
			}
			return context.Background()
		}, want: `a kind cluster named "lab" exists already`, is: cluster.ErrExists, left: []string{"lab"}, creates: true},
		{name: "images fail", setup: func(_ *testing.T, _ *Provider, _ *fakeEngine, imgs *fakeImages, _ *fakeAPI) context.Context {
			imgs.err = errors.New("building the tools image needs root")
			return context.Background()
		}, want: "preparing the lab's images: building the tools image needs root"},
		{name: "node start fails, kind cleans up", setup: func(_ *testing.T, _ *Provider, eng *fakeEngine, _ *fakeImages, _ *fakeAPI) context.Context {
			eng.createErr = errors.New("failed to init node with kubeadm")
			return context.Background()
		}, want: "kind could not create the cluster: failed to init node with kubeadm", creates: true},
		{name: "node start fails, nodes left", setup: func(_ *testing.T, _ *Provider, eng *fakeEngine, _ *fakeImages, _ *fakeAPI) context.Context {
			eng.createErr, eng.leaveNodes = errors.New("failed to init node with kubeadm"), true
			return context.Background()
		}, want: "kind could not create the cluster", creates: true},
		{name: "image load fails", setup: func(_ *testing.T, _ *Provider, eng *fakeEngine, _ *fakeImages, _ *fakeAPI) context.Context {
			eng.onCreate = func() { eng.clusters["lab"][1].loadErr = errors.New("ctr: content digest not found") }
			return context.Background()
		}, want: "loading images into node lab-worker: ctr: content digest not found", creates: true},
		{name: "tools container fails", setup: func(_ *testing.T, _ *Provider, eng *fakeEngine, _ *fakeImages, _ *fakeAPI) context.Context {
			eng.onCreate = func() {
				eng.clusters["lab"][0].toolsErr = errors.New("ctr: image \"docker.io/svclab/tools:latest\": not found")
			}
			return context.Background()
		}, want: `starting the tools container on node lab-control-plane: sh on lab-control-plane: exit status 1: ctr: image "docker.io/svclab/tools:latest": not found`, creates: true},
		{name: "nodes never Ready", setup: func(_ *testing.T, p *Provider, _ *fakeEngine, _ *fakeImages, api *fakeAPI) context.Context {
			api.notReady, p.ReadyTimeout = true, 600e6
			return context.Background()
		}, want: "not ready in time: nodes not Ready: lab-control-plane, lab-worker", creates: true},
		{name: "interrupted", setup: func(_ *testing.T, _ *Provider, eng *fakeEngine, _ *fakeImages, _ *fakeAPI) context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			eng.onCreate = cancel
			return ctx
		}, want: "context canceled", is: context.Canceled, creates: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, eng, imgs, api := testProvider(t)
			ctx := context.Background()
			if tc.setup != nil {
				ctx = tc.setup(t, p, eng, imgs, api)
			}
			opts := tc.opts
			if opts.Name == "" {
				opts = cluster.CreateOptions{Name: "lab", Workers: 1}
			}
			progress := &stepRecorder{}
			opts.Progress = progress
			c, err := p.Create(ctx, opts)
			if err == nil {
				t.Fatalf("Create succeeded: %v", c.Name())
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("a multi-line error: %q", err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err = %v, want errors.Is %v", err, tc.is)
			}
			// Nothing half-created: the kind clusters are what was there
			// before, and the state only that of a complete cluster.
			got, _ := eng.Clusters(context.Background())
			if !slices.Equal(got, tc.left) {
				t.Errorf("kind clusters afterwards %q, want %q (calls %q)", got, tc.left, eng.calls)
			}
			entries, _ := os.ReadDir(filepath.Join(p.StateDir, "kind"))
			if len(entries) > len(tc.left) || (len(tc.left) == 0 && len(entries) > 0) {
				t.Errorf("state left: %v", entries)
			}
			if !tc.creates && slices.ContainsFunc(eng.calls, func(c string) bool { return strings.HasPrefix(c, "create") }) {
				t.Errorf("kind create was called: %q", eng.calls)
			}
			if tc.creates && len(tc.left) == 0 && !progress.has("done Removing the half-created cluster") {
				t.Errorf("no rollback step:\n%s", strings.Join(progress.lines, "\n"))
			}
		})
	}
}

// Orphans (a create svclab did not finish) go at the next create or
// delete --all; clusters being created, complete ones and kind clusters
// that are not svclab's stay.
func TestCollectAndDeleteAll(t *testing.T) {
	p, eng, _, _ := testProvider(t)
	ctx := context.Background()
	if _, err := p.Create(ctx, cluster.CreateOptions{Name: "done", Workers: 1}); err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	orphan := func(name string, pid int, withNodes bool) {
		t.Helper()
		dir := p.dir(name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := (&State{Name: name, Creator: pid}).save(paths{dir}); err != nil {
			t.Fatal(err)
		}
		if withNodes {
			eng.clusters[name] = []*fakeNode{{name: name + "-control-plane", role: "control-plane"}}
		}
	}
	orphan("crashed", dead.Process.Pid, true)
	orphan("early", dead.Process.Pid, false)
	orphan("busy", os.Getpid(), true)
	eng.clusters["mine"] = []*fakeNode{{name: "mine-control-plane", role: "control-plane"}}
	// A directory without state: a create that stopped before writing it.
	os.MkdirAll(p.dir("nostate"), 0o700)

	list, err := p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, s := range list {
		states[s.Name] = s.State
	}
	wantStates := map[string]string{"busy": "creating", "crashed": "orphaned", "done": "running", "early": "orphaned", "nostate": "orphaned"}
	if diff := cmp.Diff(wantStates, states); diff != "" {
		t.Errorf("List states (-want +got):\n%s", diff)
	}
	if _, err := p.Get(ctx, "crashed"); err == nil || !strings.Contains(err.Error(), "was not created completely") {
		t.Errorf("Get(crashed) = %v", err)
	}
	if _, err := p.Get(ctx, "busy"); err == nil || !strings.Contains(err.Error(), "is still being created") {
		t.Errorf("Get(busy) = %v", err)
	}
	if err := p.Delete(ctx, "mine"); err == nil || !strings.Contains(err.Error(), "was not made by svclab") {
		t.Errorf("Delete(mine) = %v", err)
	}

	if err := p.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := eng.Clusters(ctx)
	if want := []string{"busy", "done", "mine"}; !slices.Equal(got, want) {
		t.Errorf("after Collect kind has %q, want %q", got, want)
	}
	for _, gone := range []string{"crashed", "early", "nostate"} {
		if _, err := os.Stat(p.dir(gone)); !os.IsNotExist(err) {
			t.Errorf("state of %s left: %v", gone, err)
		}
	}

	// A cluster deleted behind svclab's back shows as missing.
	delete(eng.clusters, "done")
	list, _ = p.List(ctx)
	if list[1].Name != "done" || list[1].State != "missing" {
		t.Errorf("List: %+v", list)
	}

	if err := p.DeleteAll(ctx, nil); err != nil {
		t.Fatal(err)
	}
	got, _ = eng.Clusters(ctx)
	if want := []string{"busy", "mine"}; !slices.Equal(got, want) {
		t.Errorf("after DeleteAll kind has %q, want %q (the one being created and the user's stay)", got, want)
	}
}

func TestDeleteErrors(t *testing.T) {
	p, eng, _, _ := testProvider(t)
	ctx := context.Background()
	if _, err := p.Create(ctx, cluster.CreateOptions{Name: "lab", Workers: 1}); err != nil {
		t.Fatal(err)
	}
	eng.deleteErr = errors.New("docker: permission denied")
	if err := p.Delete(ctx, "lab"); err == nil || !strings.Contains(err.Error(), "deleting kind cluster lab: docker: permission denied") {
		t.Errorf("Delete = %v", err)
	}
	// The state stays, so the cluster can still be deleted later.
	if _, err := p.Get(ctx, "lab"); err != nil {
		t.Errorf("Get after a failed Delete: %v", err)
	}
	eng.deleteErr = nil
	if err := p.Delete(ctx, "Lab!"); err == nil || !strings.Contains(err.Error(), "not valid") {
		t.Errorf("Delete(Lab!) = %v", err)
	}
	if err := p.LoadImages(ctx, "nope", nil, nil); !errors.Is(err, cluster.ErrNotFound) {
		t.Errorf("LoadImages(nope) = %v", err)
	}
}

// With Docker down, List still answers (so that "svclab cluster list"
// shows the embedded clusters) and says what is wrong.
func TestListDockerDown(t *testing.T) {
	p, eng, _, _ := testProvider(t)
	ctx := context.Background()
	if _, err := p.Create(ctx, cluster.CreateOptions{Name: "lab", Workers: 1}); err != nil {
		t.Fatal(err)
	}
	eng.listErr = errors.New("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?")
	list, err := p.List(ctx)
	if err != nil || len(list) != 1 || list[0].State != "unknown" || !strings.Contains(list[0].Detail, "Docker does not answer: Cannot connect") {
		t.Errorf("List = %+v, %v", list, err)
	}
}

func TestDeleteDockerDown(t *testing.T) {
	p, eng, _, _ := testProvider(t)
	ctx := context.Background()
	if _, err := p.Create(ctx, cluster.CreateOptions{Name: "lab", Workers: 1}); err != nil {
		t.Fatal(err)
	}
	eng.checkErr = fmt.Errorf("%w: Cannot connect to the Docker daemon", ErrDockerDown)
	for name, del := range map[string]func() error{
		"Delete":    func() error { return p.Delete(ctx, "lab") },
		"DeleteAll": func() error { return p.DeleteAll(ctx, nil) },
	} {
		if err := del(); !errors.Is(err, ErrDockerDown) || !strings.Contains(err.Error(), "start it (sudo systemctl start docker") {
			t.Errorf("%s with Docker down = %v", name, err)
		}
	}
	if _, err := p.Get(ctx, "lab"); err != nil {
		t.Errorf("the cluster's state went: %v", err)
	}
}

// With no node image given, the cluster runs svclab's own: built or loaded
// first, named in kind's configuration; CoreDNS's configuration loses its
// forwarding; deleting the last cluster releases the engine.
func TestSvclabNodeImage(t *testing.T) {
	p, eng, _, api := testProvider(t)
	ni := p.NodeImages.(*fakeNodeImages)
	ctx := context.Background()
	progress := &stepRecorder{}
	if _, err := p.Create(ctx, cluster.CreateOptions{Name: "lab", Workers: 1, Progress: progress}); err != nil {
		t.Fatalf("Create: %v\n%s", err, strings.Join(progress.lines, "\n"))
	}
	if !slices.Equal(ni.images, []string{"svclab/kind-node:v1.37.2"}) {
		t.Errorf("node images ensured: %q", ni.images)
	}
	if config := string(eng.configs["lab"]); strings.Count(config, "image: svclab/kind-node:v1.37.2") != 2 {
		t.Errorf("kind config does not name the node image on both nodes:\n%s", config)
	}
	cs, _ := api.clients["lab"]
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["Corefile"]; strings.Contains(got, "forward") || !strings.Contains(got, "kubernetes cluster.local") || !strings.Contains(got, "cache 30 {") {
		t.Errorf("Corefile:\n%s", got)
	}
	if !progress.has("done Preparing the node image svclab/kind-node:v1.37.2") || !progress.has("done Keeping CoreDNS's answers inside the lab") {
		t.Errorf("progress:\n%s", strings.Join(progress.lines, "\n"))
	}
	if err := p.Delete(ctx, "lab"); err != nil {
		t.Fatal(err)
	}
	if got := eng.calls[len(eng.calls)-1]; got != "release" {
		t.Errorf("last engine call %q, want release", got)
	}

	// A failing node image fails the create and leaves nothing.
	ni.err = errors.New("debootstrap failed")
	if _, err := p.Create(ctx, cluster.CreateOptions{Name: "lab2", Workers: 1}); err == nil || !strings.Contains(err.Error(), "debootstrap failed") {
		t.Errorf("Create = %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(p.StateDir, "kind")); len(entries) != 0 {
		t.Errorf("left %v", entries)
	}

	// A node image of the user's is used as given.
	ni.err, ni.images = nil, nil
	p.NodeImage = "kindest/node:v1.37.0"
	if _, err := p.Create(ctx, cluster.CreateOptions{Name: "lab3", Workers: 1}); err != nil {
		t.Fatal(err)
	}
	if len(ni.images) != 0 || !strings.Contains(string(eng.configs["lab3"]), "image: kindest/node:v1.37.0") {
		t.Errorf("ensured %q; config:\n%s", ni.images, eng.configs["lab3"])
	}
}

func TestConfineCorefile(t *testing.T) {
	got := ConfineCorefile(kubeadmCorefile)
	want := strings.Replace(kubeadmCorefile, "    forward . /etc/resolv.conf {\n       max_concurrent 1000\n    }\n", "", 1)
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if one := ConfineCorefile(".:53 {\n    forward . 8.8.8.8\n    cache\n}\n"); one != ".:53 {\n    cache\n}\n" {
		t.Errorf("one-line forward: %q", one)
	}
}
