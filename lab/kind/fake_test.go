package kind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	kindlog "sigs.k8s.io/kind/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/svclab/svclab/lab/cluster"
)

// fakeEngine is a Docker with kind in memory: clusters are lists of nodes.
type fakeEngine struct {
	mu       sync.Mutex
	info     DockerInfo
	checkErr error
	clusters map[string][]*fakeNode
	// createErr makes Create fail at "Starting control-plane"; kind then
	// deletes the nodes unless leaveNodes is set.
	createErr  error
	leaveNodes bool
	// onCreate runs inside Create, after the nodes exist (to cancel a
	// context, say).
	onCreate  func()
	deleteErr error
	listErr   error
	configs   map[string][]byte
	calls     []string
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{info: DockerInfo{ServerVersion: "28.0.1", CgroupVersion: "2"}, clusters: map[string][]*fakeNode{}, configs: map[string][]byte{}}
}

func (f *fakeEngine) call(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeEngine) Release(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("release")
	return nil
}

// fakeNodeImages is a NodeImageSource recording the images it was asked
// for.
type fakeNodeImages struct {
	mu     sync.Mutex
	err    error
	images []string
}

func (f *fakeNodeImages) EnsureNodeImage(_ context.Context, _ cluster.Progress, image string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images = append(f.images, image)
	return f.err
}

func (f *fakeEngine) Check(context.Context) (DockerInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("check")
	return f.info, f.checkErr
}

func (f *fakeEngine) Clusters(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []string
	for name := range f.clusters {
		out = append(out, name)
	}
	sort.Strings(out)
	return out, nil
}

func (f *fakeEngine) Create(ctx context.Context, name string, config []byte, kubeconfig string, log kindlog.Logger) error {
	f.mu.Lock()
	f.call("create %s", name)
	f.configs[name] = config
	if _, ok := f.clusters[name]; ok {
		f.mu.Unlock()
		return fmt.Errorf("node(s) already exist for a cluster with the name %q", name)
	}
	var c v1alpha4.Cluster
	if err := yaml.UnmarshalStrict(config, &c); err != nil {
		f.mu.Unlock()
		return err
	}
	if c.Name != name {
		f.mu.Unlock()
		return fmt.Errorf("config names %q, create %q", c.Name, name)
	}
	var nodes []*fakeNode
	names := cluster.NodeNames(name, len(c.Nodes)-1)
	for i, n := range c.Nodes {
		nodes = append(nodes, &fakeNode{name: names[i], role: string(n.Role), ip: fmt.Sprintf("172.18.0.%d", i+2)})
	}
	f.clusters[name] = nodes
	createErr, leave, onCreate := f.createErr, f.leaveNodes, f.onCreate
	f.mu.Unlock()

	log.V(0).Infof("Creating cluster %q ...\n", name)
	for _, step := range []string{"Ensuring node image (kindest/node:v1.37.0) 🖼", "Preparing nodes 📦 📦 📦", "Writing configuration 📜", "Starting control-plane 🕹️"} {
		log.V(0).Infof(" • %s  ...\n", step)
		if createErr != nil && strings.HasPrefix(step, "Starting") {
			log.V(0).Infof(" ✗ %s\n", step)
			if !leave {
				f.mu.Lock()
				delete(f.clusters, name)
				f.mu.Unlock()
			}
			return createErr
		}
		log.V(0).Infof(" ✓ %s\n", step)
	}
	log.V(1).Info("debug line")
	if onCreate != nil {
		onCreate()
	}
	if err := os.WriteFile(kubeconfig, []byte(testKubeconfig(name)), 0o600); err != nil {
		return err
	}
	return ctx.Err()
}

func testKubeconfig(name string) string {
	return `apiVersion: v1
kind: Config
clusters:
- cluster:
    server: https://127.0.0.1:40123
  name: kind-` + name + `
contexts:
- context:
    cluster: kind-` + name + `
    user: kind-` + name + `
  name: kind-` + name + `
current-context: kind-` + name + `
users:
- name: kind-` + name + `
  user:
    token: test
`
}

func (f *fakeEngine) Delete(_ context.Context, name, kubeconfig string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.call("delete %s %s", name, filepath.Base(kubeconfig))
	if kubeconfig == "" {
		return errors.New("no kubeconfig path")
	}
	if f.deleteErr != nil {
		return f.deleteErr
	}
	delete(f.clusters, name)
	return nil
}

func (f *fakeEngine) Nodes(_ context.Context, name string) ([]Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Node
	for _, n := range f.clusters[name] {
		out = append(out, n)
	}
	// kind lists in no particular order.
	slices.Reverse(out)
	return out, nil
}

func (f *fakeEngine) node(cluster, name string) *fakeNode {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.clusters[cluster] {
		if n.name == name {
			return n
		}
	}
	return nil
}

type fakeNode struct {
	name, role, ip string
	mu             sync.Mutex
	execs          [][]string
	loaded         []string
	loadErr        error
	// tools says whether the tools container runs; toolsErr makes
	// starting it fail.
	tools    bool
	toolsErr error
}

func (n *fakeNode) Name() string          { return n.name }
func (n *fakeNode) Role() (string, error) { return n.role, nil }
func (n *fakeNode) IP() (string, error)   { return n.ip, nil }

// Exec plays containerd's ctr for the tools container (run, task exec)
// and echoes other commands; "false" fails with exit status 1 as a real
// command would.
func (n *fakeNode) Exec(ctx context.Context, argv []string, stdio cluster.Stdio) error {
	n.mu.Lock()
	n.execs = append(n.execs, argv)
	n.mu.Unlock()
	if len(argv) == 3 && argv[0] == "sh" && strings.Contains(argv[2], "ctr -n k8s.io run -d --privileged --net-host") {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.toolsErr != nil {
			fmt.Fprintln(stdio.Stderr, n.toolsErr)
			return fmt.Errorf("sh on %s: %w", n.name, exec.CommandContext(ctx, "false").Run())
		}
		n.tools = true
		return nil
	}
	if len(argv) > 7 && strings.Join(argv[:5], " ") == "ctr -n k8s.io task exec" && argv[5] == "--exec-id" && argv[7] == NodeToolsContainer {
		n.mu.Lock()
		running := n.tools
		n.mu.Unlock()
		if !running {
			if stdio.Stderr != nil {
				fmt.Fprintln(stdio.Stderr, "ctr: no running task found: task svclab-node not found: not found")
			}
			return fmt.Errorf("ctr on %s: %w", n.name, exec.CommandContext(ctx, "false").Run())
		}
		argv = argv[8:]
	}
	if stdio.Stdout != nil {
		fmt.Fprintf(stdio.Stdout, "%s: %s\n", n.name, strings.Join(argv, " "))
	}
	if argv[0] == "false" {
		return fmt.Errorf("false on %s: %w", n.name, exec.CommandContext(ctx, "false").Run())
	}
	return nil
}

func (n *fakeNode) LoadImageArchive(_ context.Context, r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.loadErr != nil {
		return n.loadErr
	}
	n.loaded = append(n.loaded, string(data))
	return nil
}

// fakeImages is an ImageSource writing a small archive.
type fakeImages struct {
	dir   string
	err   error
	ref   string
	calls int
	extra []string
}

func (f *fakeImages) Archive(_ context.Context, p cluster.Progress, extra []string) (string, string, error) {
	f.calls++
	f.extra = extra
	if f.err != nil {
		return "", "", f.err
	}
	path := filepath.Join(f.dir, "images.tar")
	if err := os.WriteFile(path, []byte("archive "+f.ref), 0o644); err != nil {
		return "", "", err
	}
	return path, f.ref, nil
}

// fakeAPI is the cluster's API server: nodes register Ready (unless
// notReady), DaemonSets become ready on every node, CoreDNS is available.
type fakeAPI struct {
	mu       sync.Mutex
	clients  map[string]*fake.Clientset
	engine   *fakeEngine
	notReady bool
}

func (a *fakeAPI) client(kubeconfig []byte) (kubernetes.Interface, error) {
	server, err := serverOf(kubeconfig)
	if err != nil {
		return nil, err
	}
	var name string
	for _, line := range strings.Split(string(kubeconfig), "\n") {
		if strings.HasPrefix(line, "current-context: kind-") {
			name = strings.TrimPrefix(line, "current-context: kind-")
		}
	}
	_ = server
	a.mu.Lock()
	defer a.mu.Unlock()
	if cs, ok := a.clients[name]; ok {
		return cs, nil
	}
	var objs []runtime.Object
	nodes, _ := a.engine.Nodes(context.Background(), name)
	status := corev1.ConditionTrue
	if a.notReady {
		status = corev1.ConditionFalse
	}
	for _, n := range nodes {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name()},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}})
	}
	objs = append(objs, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system"}, Status: appsv1.DeploymentStatus{AvailableReplicas: 2}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system"}, Data: map[string]string{"Corefile": kubeadmCorefile}})
	cs := fake.NewClientset(objs...)
	count := int32(len(nodes))
	cs.PrependReactor("create", "daemonsets", func(action k8stesting.Action) (bool, runtime.Object, error) {
		ds := action.(k8stesting.CreateAction).GetObject().(*appsv1.DaemonSet)
		ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: count, NumberReady: count}
		return false, nil, nil
	})
	if a.clients == nil {
		a.clients = map[string]*fake.Clientset{}
	}
	a.clients[name] = cs
	return cs, nil
}

// stepRecorder is a cluster.Progress that records steps and details.
type stepRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *stepRecorder) Start(step string) func(error) {
	r.add("start " + step)
	return func(err error) {
		if err != nil {
			r.add("fail " + step + ": " + err.Error())
			return
		}
		r.add("done " + step)
	}
}
func (r *stepRecorder) Infof(format string, args ...any) {
	r.add("info " + fmt.Sprintf(format, args...))
}
func (r *stepRecorder) add(s string) {
	r.mu.Lock()
	r.lines = append(r.lines, s)
	r.mu.Unlock()
}
func (r *stepRecorder) has(prefix string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// kubeadmCorefile is kubeadm v1.37's CoreDNS configuration.
const kubeadmCorefile = `.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30 {
       disable success cluster.local
       disable denial cluster.local
    }
    loop
    reload
    loadbalance
}
`

// testProvider returns a Provider on fakes with its state in a temporary
// directory, and HOME pointed at an empty directory so that a test fails
// if anything writes ~/.kube/config.
func testProvider(t *testing.T) (*Provider, *fakeEngine, *fakeImages, *fakeAPI) {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(home, ".kube")); err == nil {
			t.Error("something wrote ~/.kube")
		}
	})
	eng := newFakeEngine()
	imgs := &fakeImages{dir: t.TempDir(), ref: "svclab/proxier:0123456789ab"}
	api := &fakeAPI{engine: eng}
	p := New(t.TempDir(), nil)
	p.Engine, p.Images, p.NodeImages, p.Client, p.ReadyTimeout = eng, imgs, &fakeNodeImages{}, api.client, 2*1e9
	return p, eng, imgs, api
}
