//go:build linux

package embedded

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded/userns"
	"github.com/svclab/svclab/lab/kubebin"
)

// requireLab skips end-to-end tests in -short mode and where the host
// cannot run embedded clusters.
func requireLab(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	if err := Preflight(); err != nil {
		t.Skipf("end-to-end test: %v", err)
	}
}

func uniqueName(prefix string) string {
	b := make([]byte, 3)
	rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// stepRecorder is a cluster.Progress that records step names.
type stepRecorder struct {
	mu      sync.Mutex
	steps   []string
	onStart func(step string)
}

func (r *stepRecorder) Start(step string) func(error) {
	r.mu.Lock()
	r.steps = append(r.steps, step)
	f := r.onStart
	r.mu.Unlock()
	if f != nil {
		f(step)
	}
	return func(error) {}
}
func (r *stepRecorder) Infof(string, ...any) {}

func newTestProvider(t testing.TB) *Provider {
	return New(t.TempDir(), slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

// assertNoLeaks checks that nothing of the cluster in dir is left on the
// host.
func assertNoLeaks(t testing.TB, dir string, st *State) {
	t.Helper()
	// The index's links may be another cluster's by now (one of another
	// test, made once this one's were gone).
	if fabricHeldByOther(st.Index, st.Name) {
		st = st.withoutFabricLinks()
	}
	for _, ns := range []string{st.API.Netns, st.LB.Netns, st.FabricNetns()} {
		if _, err := os.Stat(filepath.Join("/run/netns", ns)); err == nil {
			t.Errorf("network namespace %s left behind", ns)
		}
	}
	if pids := markedProcesses(func(d string) bool { return d == dir }); len(pids) > 0 {
		t.Errorf("processes left running: %v", pids)
	}
	for _, n := range st.Nodes {
		if _, err := os.Stat(filepath.Join("/run/netns", n.Netns)); err == nil {
			t.Errorf("network namespace %s left behind", n.Netns)
		}
	}
	if st.Bridge != "" && exec.Command("ip", "link", "show", st.Bridge).Run() == nil {
		t.Errorf("the host's link %s left behind", st.Bridge)
	}
	for _, ns := range listNetns() {
		if strings.HasPrefix(ns, podNetnsPrefix(st.Name)) {
			t.Errorf("pod network namespace %s left behind", ns)
		}
	}
	if exec.Command("nft", "list", "table", "inet", st.FirewallTable()).Run() == nil {
		t.Errorf("nft table %s left behind", st.FirewallTable())
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("state directory %s left behind", dir)
	}
	if left := clusterCgroups(st.Name); len(left) > 0 {
		t.Errorf("cgroups left behind: %v", left)
	}
	if _, err := os.Stat(runDir(st.Name)); err == nil {
		t.Errorf("runtime directory %s left behind", runDir(st.Name))
	}
	if claims, _ := userns.DefaultAllocator().Claims(); len(claims) > 0 {
		for _, c := range claims {
			if c.Owner == dir {
				t.Errorf("the lab's id range %d is still claimed", c.Range.Base)
			}
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, d := range []string{dir, runDir(st.Name)} {
		if bytes.Contains(mounts, []byte(d+"/")) {
			t.Errorf("mounts under %s left behind", d)
		}
	}
	for _, n := range st.Nodes {
		if bytes.Contains(mounts, []byte("/run/netns/"+n.Netns+" ")) {
			t.Errorf("mount of %s left behind", n.Netns)
		}
	}
}

func kubectl(t *testing.T, c *Cluster, args ...string) string {
	t.Helper()
	bin, err := kubebin.Locate(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"kubectl"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestClusterLifecycle(t *testing.T) {
	requireLab(t)
	ctx := context.Background()
	p := newTestProvider(t)
	name := uniqueName("e2e")
	rec := &stepRecorder{}
	cc, err := p.Create(ctx, cluster.CreateOptions{Name: name, Workers: 2, Progress: rec})
	if err != nil {
		t.Fatal(err)
	}
	c := cc.(*Cluster)
	st, dir := c.State(), c.dir
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			p.Delete(context.Background(), name)
		}
	})
	wantSteps := []string{"Finding svclab-kube v1.37.2", "Preparing images", "Creating the network fabric", "Setting the lab's limits", "Generating certificates and kubeconfigs", "Making the lab's disk",
		"Preparing the nodes' filesystems", "Starting the control-plane supervisor", "Starting etcd", "Starting kube-apiserver", "Starting kube-controller-manager", "Starting kube-scheduler",
		"Starting the node agents", "Waiting for the nodes to be Ready", "Installing kube-proxy (the bundled proxier) and CoreDNS"}
	var got []string
	for _, s := range rec.steps {
		if !strings.HasPrefix(s, "Building ") { // image layers built on first use
			got = append(got, s)
		}
	}
	rec.steps = got
	if strings.Join(rec.steps, "|") != strings.Join(wantSteps, "|") {
		t.Errorf("progress steps:\n%v\nwant\n%v", rec.steps, wantSteps)
	}

	t.Run("api", func(t *testing.T) {
		if got := kubectl(t, c, "get", "--raw", "/readyz"); got != "ok" {
			t.Errorf("/readyz = %q", got)
		}
		if got := kubectl(t, c, "version", "-o", "json"); !strings.Contains(got, `"gitVersion": "v1.37.2"`) || strings.Count(got, "v1.37.2") < 2 {
			t.Errorf("kubectl version does not report v1.37.2 for client and server:\n%s", got)
		}
		kubectl(t, c, "create", "deployment", "web", "--image=nginx", "--replicas=2")
		kubectl(t, c, "expose", "deployment", "web", "--port=80", "--target-port=8080")
		client, err := c.Client()
		if err != nil {
			t.Fatal(err)
		}
		svc, err := client.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(svc.Spec.ClusterIP, "10.96.") {
			t.Errorf("ClusterIP %s is not in 10.96.0.0/16", svc.Spec.ClusterIP)
		}
		// The controllers work: the deployment gets a replica set and
		// pods (Pending: there are no node agents yet), the default
		// service account appears, and a NodePort lands in range.
		waitFor(t, 30*time.Second, "two pods of deployment web", func() (bool, error) {
			pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			return err == nil && len(pods.Items) == 2, err
		})
		waitFor(t, 30*time.Second, "the default service account", func() (bool, error) {
			_, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
		np, err := client.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "np"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "web"},
				Ports: []corev1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n := np.Spec.Ports[0].NodePort; n < 30000 || n > 32767 {
			t.Errorf("NodePort %d outside 30000-32767", n)
		}
		// The kubernetes Service's EndpointSlice points at the API
		// server, in the control plane's own namespace.
		slices, err := client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=kubernetes"})
		if err != nil || len(slices.Items) != 1 || slices.Items[0].Endpoints[0].Addresses[0] != st.API.IP {
			t.Errorf("kubernetes EndpointSlice: %v %+v", err, slices)
		}
	})

	t.Run("duplicate name is refused and changes nothing", func(t *testing.T) {
		_, err := p.Create(ctx, cluster.CreateOptions{Name: name})
		if !errors.Is(err, cluster.ErrExists) || !strings.Contains(err.Error(), "exists already") {
			t.Fatalf("second create: %v", err)
		}
		// The same name from another state directory: its namespaces
		// are in use.
		_, err = newTestProvider(t).Create(ctx, cluster.CreateOptions{Name: name})
		if !errors.Is(err, cluster.ErrExists) || !strings.Contains(err.Error(), "in use") {
			t.Fatalf("create from another state directory: %v", err)
		}
		if got := kubectl(t, c, "get", "--raw", "/readyz"); got != "ok" {
			t.Errorf("cluster hurt by the refused create: /readyz = %q", got)
		}
	})

	t.Run("isolation", func(t *testing.T) {
		// No route out of the cluster: the kernel refuses before sending.
		var out bytes.Buffer
		err := c.NodeExec(ctx, name+"-worker", []string{"ip", "route", "get", "192.0.2.77"}, cluster.Stdio{Stdout: &out, Stderr: &out})
		if err == nil {
			t.Errorf("a node has a route out of the cluster: %s", out.String())
		}
		// Nodes reach each other and the API server.
		if err := c.NodeExec(ctx, name+"-worker", []string{"bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/6443", st.API.IP)}, cluster.Stdio{}); err != nil {
			t.Errorf("worker cannot reach the API server: %v", err)
		}
	})

	t.Run("crashed component is restarted and reported", func(t *testing.T) {
		var s Status
		if err := readJSON(paths{dir}.status(), &s); err != nil {
			t.Fatal(err)
		}
		cs, _ := s.Component("kube-scheduler")
		if err := syscall.Kill(-cs.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "kube-scheduler restarted and healthy", func() (bool, error) {
			var s Status
			if err := readJSON(paths{dir}.status(), &s); err != nil {
				return false, nil
			}
			now, _ := s.Component("kube-scheduler")
			return now.Restarts == 1 && now.State == StateHealthy && now.PID != cs.PID, nil
		})
		sums, err := p.List(ctx)
		if err != nil || len(sums) != 1 || sums[0].State != "running" || !strings.Contains(sums[0].Detail, "kube-scheduler restarted 1 times") {
			t.Errorf("list: %v %+v", err, sums)
		}
		if !strings.Contains(logTail(filepath.Join(dir, "logs", "supervisor.log"), 20), "component exited; restarting") {
			t.Error("the crash is not in the supervisor's log")
		}
	})

	t.Run("delete leaves nothing behind", func(t *testing.T) {
		if err := p.Delete(ctx, name); err != nil {
			t.Fatal(err)
		}
		deleted = true
		assertNoLeaks(t, dir, st)
		if err := p.Delete(ctx, name); !errors.Is(err, cluster.ErrNotFound) {
			t.Errorf("deleting again: %v, want not found", err)
		}
	})
}

func TestTwoClustersAreIsolated(t *testing.T) {
	requireLab(t)
	ctx := context.Background()
	p := newTestProvider(t)
	var cs [2]*Cluster
	for i := range cs {
		name := uniqueName("iso")
		c, err := p.Create(ctx, cluster.CreateOptions{Name: name, Workers: 0})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Delete(context.Background(), name) })
		cs[i] = c.(*Cluster)
	}
	a, b := cs[0], cs[1]
	if a.State().Subnet == b.State().Subnet {
		t.Fatalf("both clusters on %s", a.State().Subnet)
	}
	// a's node reaches its own API server but not b's (b's subnet is
	// not even routable from a).
	node := a.State().ControlPlane().Name
	probe := func(ip string) error {
		return a.NodeExec(ctx, node, []string{"timeout", "2", "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/6443", ip)}, cluster.Stdio{})
	}
	if err := probe(a.State().API.IP); err != nil {
		t.Errorf("cluster a cannot reach its own API server: %v", err)
	}
	if err := probe(b.State().API.IP); err == nil {
		t.Error("cluster a reaches cluster b's API server")
	}
	// The host reaches both.
	for _, c := range cs {
		cl, err := c.Client()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Discovery().ServerVersion(); err != nil {
			t.Errorf("host cannot reach %s: %v", c.Name(), err)
		}
	}
}

func TestCreateInterruptedRollsBack(t *testing.T) {
	requireLab(t)
	p := newTestProvider(t)
	name := uniqueName("int")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Cancel, as Ctrl-C does, once the API server is starting.
	rec := &stepRecorder{onStart: func(step string) {
		if step == "Starting kube-apiserver" {
			cancel()
		}
	}}
	linksBefore := svclabLinks(t)
	_, err := p.Create(ctx, cluster.CreateOptions{Name: name, Workers: 1, Progress: rec})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("create: %v, want context.Canceled", err)
	}
	st, err := NewState(cluster.CreateOptions{Name: name, Workers: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The fabric index is unknown here: check its links by difference.
	st.Bridge = ""
	for i := range st.Nodes {
		st.Nodes[i].HostVeth = ""
	}
	assertNoLeaks(t, p.dir(name), st)
	for l := range svclabLinks(t) {
		if !linksBefore[l] {
			t.Errorf("link %s left behind", l)
		}
	}
	if got := rec.steps[len(rec.steps)-1]; got != "Removing the half-created cluster" {
		t.Errorf("last step %q", got)
	}
	if sums, _ := p.List(context.Background()); len(sums) != 0 {
		t.Errorf("clusters listed after a rolled-back create: %+v", sums)
	}
}

func TestSupervisorCrashIsCleanedUp(t *testing.T) {
	requireLab(t)
	ctx := context.Background()
	p := newTestProvider(t)
	name := uniqueName("crash")
	cc, err := p.Create(ctx, cluster.CreateOptions{Name: name, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := cc.(*Cluster)
	st, dir := c.State(), c.dir
	pid, ok := supervisorPID(dir)
	if !ok {
		t.Fatal("no supervisor")
	}
	var status Status
	if err := readJSON(paths{dir}.status(), &status); err != nil {
		t.Fatal(err)
	}
	// The containers' cgroups are the cluster's, so that they go with it.
	for _, cg := range []string{nodeCgroup(name, name+"-worker"), nodeCgroup(name, name+"-control-plane")} {
		if m, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", cg, "*")); len(m) == 0 {
			t.Errorf("no container has a cgroup under %s", cg)
		}
	}
	// A crash of svclab's supervisor takes its components (control
	// plane, node agents, node containers) with it; pods' containers
	// outlive it, as containers outlive a crashed kubelet, until the
	// cluster is deleted.
	syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, 10*time.Second, "every component gone", func() (bool, error) {
		for _, cs := range status.Components {
			if cs.PID != 0 && alive(cs.PID) {
				return false, fmt.Errorf("%s (pid %d) still runs", cs.Name, cs.PID)
			}
		}
		return true, nil
	})
	sums, err := p.List(ctx)
	if err != nil || len(sums) != 1 || sums[0].State != "stopped" {
		t.Errorf("list after crash: %v %+v", err, sums)
	}
	// Any new cluster, made from another state directory, removes what
	// the crashed one left on the host (its state directory aside: it is
	// not this one's).
	crashedNetns := clusterNetns(name)
	if len(crashedNetns) < 3 {
		t.Fatalf("the crashed cluster left %d network namespaces, want its nodes' and Pods'", len(crashedNetns))
	}
	q := newTestProvider(t)
	other, err := q.Create(ctx, cluster.CreateOptions{Name: uniqueName("after"), Workers: 1})
	if err != nil {
		t.Fatalf("creating a cluster after a crash: %v", err)
	}
	for _, ns := range crashedNetns {
		if _, err := os.Stat(filepath.Join("/run/netns", ns)); err == nil {
			t.Errorf("network namespace %s of the crashed cluster left behind", ns)
		}
	}
	// The new cluster takes the lowest free index, which may be the
	// crashed one's.
	if other.(*Cluster).State().Bridge != st.Bridge && !fabricHeldByOther(st.Index, name) && exec.Command("ip", "link", "show", st.Bridge).Run() == nil {
		t.Errorf("the host's link %s of the crashed cluster left behind", st.Bridge)
	}
	if exec.Command("nft", "list", "table", "inet", st.FirewallTable()).Run() == nil {
		t.Errorf("nft table %s of the crashed cluster left behind", st.FirewallTable())
	}
	if left := clusterCgroups(name); len(left) > 0 {
		t.Errorf("cgroups of the crashed cluster left behind: %v", left)
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); bytes.Contains(mounts, []byte(dir+"/")) || bytes.Contains(mounts, []byte(runDir(name)+"/")) {
		t.Errorf("mounts under the crashed cluster's %s or %s left behind", dir, runDir(name))
	}
	// Nothing of the crashed lab runs: its ids may go to another lab.
	if !claimFree(*st.IDs) {
		t.Errorf("the crashed lab's id range %d is not free after its reclaim", st.IDs.Range.Base)
	}
	if err := q.Delete(ctx, other.Name()); err != nil {
		t.Fatal(err)
	}
	// The state directory is lost too (a test's temporary directory, a
	// wiped disk): a new cluster of the same name, made from another
	// state directory, can be created.
	cc2, err := q.Create(ctx, cluster.CreateOptions{Name: name, Workers: 1})
	if err != nil {
		t.Fatalf("creating %s over a crashed cluster's leftovers: %v", name, err)
	}
	st2, dir2 := cc2.(*Cluster).State(), cc2.(*Cluster).dir
	if st2.Bridge != st.Bridge {
		t.Logf("the new cluster has fabric %s (the crashed one had %s)", st2.Bridge, st.Bridge)
	}
	if err := q.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	assertNoLeaks(t, dir2, st2)
	if err := p.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	assertNoLeaks(t, dir, st)
	if out, _ := exec.Command("ip", "-o", "link", "show", st.Bridge).CombinedOutput(); !fabricHeldByOther(st.Index, name) && !bytes.Contains(out, []byte("does not exist")) {
		t.Errorf("the host's link %s of the crashed cluster left behind: %s", st.Bridge, out)
	}
}

func TestBadInput(t *testing.T) {
	requireLab(t)
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	for _, tc := range []struct {
		name     string
		stateDir string
		opts     cluster.CreateOptions
		want     string
	}{
		{"bad name", t.TempDir(), cluster.CreateOptions{Name: "Bad_Name"}, "is not valid"},
		{"empty name", t.TempDir(), cluster.CreateOptions{}, "cluster name is empty"},
		{"long name", t.TempDir(), cluster.CreateOptions{Name: strings.Repeat("a", 30)}, "use at most 24"},
		{"unwritable state dir", filepath.Join(file, "state"), cluster.CreateOptions{Name: uniqueName("bad")}, "is not writable"},
		{"unknown node label", t.TempDir(), cluster.CreateOptions{Name: uniqueName("bad"), NodeLabels: map[string]map[string]string{"nope": {"a": "b"}}}, `labels given for node "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(tc.stateDir, nil)
			_, err := p.Create(ctx, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if sums, _ := p.List(ctx); len(sums) != 0 {
				t.Errorf("left a cluster behind: %+v", sums)
			}
			if tc.opts.Name != "" {
				for _, ns := range clusterNetns(tc.opts.Name) {
					t.Errorf("left namespace %s", ns)
				}
			}
		})
	}
}

// svclabLinks lists the host's svclab bridges and veths.
func svclabLinks(t testing.TB) map[string]bool {
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]bool{}
	for _, l := range leftoverLinks(string(out)) {
		m[l] = true
	}
	return m
}

func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, lastErr)
}

// TestSweepSparesLiveClusters: 'cluster delete --all' of one state
// directory deletes its clusters and sweeps what crashed clusters left,
// but a live cluster of another state directory goes on answering; once
// that one crashes, the next sweep takes what it left.
func TestSweepSparesLiveClusters(t *testing.T) {
	requireLab(t)
	ctx := context.Background()
	a, b := newTestProvider(t), newTestProvider(t)
	nameA, nameB := uniqueName("keep"), uniqueName("sweep")
	ca, err := a.Create(ctx, cluster.CreateOptions{Name: nameA, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Delete(context.Background(), nameA) })
	cb, err := b.Create(ctx, cluster.CreateOptions{Name: nameB, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	stB, dirB := cb.(*Cluster).State(), cb.(*Cluster).dir
	if err := b.DeleteAll(ctx, nil); err != nil {
		t.Fatalf("delete --all of the second state directory: %v", err)
	}
	assertNoLeaks(t, dirB, stB)
	// The first state directory's cluster is untouched.
	client, err := ca.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("the other state directory's cluster stopped answering: %v", err)
	}
	for _, n := range ca.(*Cluster).State().Nodes {
		if _, err := os.Stat(filepath.Join("/run/netns", n.Netns)); err != nil {
			t.Errorf("node %s of the live cluster lost its network namespace", n.Name)
		}
	}
	sums, _ := a.List(ctx)
	if len(sums) != 1 || sums[0].State != "running" {
		t.Errorf("the live cluster after another directory's sweep: %+v", sums)
	}
	// Crashed, it is swept by anybody.
	st := ca.(*Cluster).State()
	pid, _ := supervisorPID(ca.(*Cluster).dir)
	syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, 10*time.Second, "the supervisor gone", func() (bool, error) { return !alive(pid), nil })
	time.Sleep(time.Second)
	if err := b.DeleteAll(ctx, nil); err != nil {
		t.Fatalf("sweeping a crashed cluster: %v", err)
	}
	for _, n := range st.Nodes {
		if _, err := os.Stat(filepath.Join("/run/netns", n.Netns)); err == nil {
			t.Errorf("node %s of the crashed cluster kept its network namespace", n.Name)
		}
	}
	if err := a.Delete(ctx, nameA); err != nil {
		t.Fatal(err)
	}
	assertNoLeaks(t, ca.(*Cluster).dir, st)
}

// TestBesideDocker: with br_netfilter, frames bridged on the host pass
// the host's iptables FORWARD chain, whose policy Docker sets to DROP. A
// lab's bridge is in a namespace of its own, where br_netfilter is off:
// with the host dropping every packet of the lab's subnet, its nodes
// still talk, and the host's rule counts none of their packets.
func TestBesideDocker(t *testing.T) {
	requireLab(t)
	if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err != nil {
		t.Skip("no br_netfilter on this host")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("no iptables on this host")
	}
	ctx := context.Background()
	p := newTestProvider(t)
	name := uniqueName("docker")
	cc, err := p.Create(ctx, cluster.CreateOptions{Name: name, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := cc.(*Cluster)
	st := c.State()
	t.Cleanup(func() { p.Delete(context.Background(), name) })
	// What Docker's policy does, for this lab's addresses only (the
	// machine's other labs and tests are not touched).
	drop := []string{"FORWARD", "-s", st.Subnet, "-m", "comment", "--comment", "svclab-test-docker-policy", "-j", "DROP"}
	if out, err := exec.Command("iptables", append([]string{"-w", "-I"}, drop...)...).CombinedOutput(); err != nil {
		t.Fatalf("iptables: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("iptables", append([]string{"-w", "-D"}, drop...)...).Run() })
	if _, err := nodeExec(t, c, st.Nodes[0].Name, "ping", "-c", "3", "-W", "2", st.Nodes[1].IP); err != nil {
		t.Errorf("with the host dropping the lab's packets, the nodes no longer reach each other: %v", err)
	}
	out, _ := exec.Command("iptables", "-w", "-v", "-x", "-n", "-L", "FORWARD").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); strings.Contains(line, "svclab-test-docker-policy") && len(f) > 0 && f[0] != "0" {
			t.Errorf("the host's FORWARD chain saw the lab's bridged packets:\n%s", line)
		}
	}
	if err := p.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
}
