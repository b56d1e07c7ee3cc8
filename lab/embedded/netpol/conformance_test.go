//go:build linux

package netpol_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded"
	"github.com/svclab/svclab/lab/roles"
)

func TestMain(m *testing.M) {
	roles.Dispatch()
	os.Exit(m.Run())
}

// The e2e matrix: pods a, b, c in namespaces x, y, z, each serving TCP and
// UDP on ports 80 and 81 (agnhost serve-hostname, one container per
// port, ports named serve-<port>-<proto> as upstream names them).
var (
	matrixNamespaces = []string{"x", "y", "z"}
	matrixPodNames   = []string{"a", "b", "c"}
	probes           = []probeKind{{corev1.ProtocolTCP, 80}, {corev1.ProtocolTCP, 81}, {corev1.ProtocolUDP, 80}, {corev1.ProtocolUDP, 81}}
)

type probeKind struct {
	proto corev1.Protocol
	port  int32
}

func (p probeKind) String() string { return fmt.Sprintf("%s/%d", p.proto, p.port) }

// env is the suite's cluster and the matrix on it.
type env struct {
	t      testing.TB
	client kubernetes.Interface
	pods   map[string]*corev1.Pod // by ns/name
	netns  map[string]string      // pod key → its network namespace
	names  []string               // pod keys, sorted
	nodes  []cluster.Node
	// nodeNetns maps node names to their network namespaces.
	nodeNetns map[string]string
}

// newEnv creates one embedded cluster and the matrix for the whole suite.
func newEnv(t testing.TB) *env {
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	if err := embedded.Preflight(); err != nil {
		t.Skipf("end-to-end test: %v", err)
	}
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p := embedded.New(t.TempDir(), log)
	b := make([]byte, 3)
	rand.Read(b)
	name := "np-" + hex.EncodeToString(b)
	c, err := p.Create(ctx, cluster.CreateOptions{Name: name, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			// Why the cluster stopped answering, if it did.
			for _, comp := range []string{"supervisor", "kube-apiserver", "etcd"} {
				t.Logf("%s's log ends:\n%s", comp, c.(*embedded.Cluster).LogTail(comp, 15))
			}
		}
		if err := p.Delete(context.Background(), name); err != nil {
			t.Errorf("deleting cluster %s: %v", name, err)
		}
	})
	client, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, client: client, pods: map[string]*corev1.Pod{}, netns: map[string]string{}, nodes: nodes, nodeNetns: map[string]string{}}
	for _, n := range c.(*embedded.Cluster).State().Nodes {
		e.nodeNetns[n.Name] = n.Netns
	}
	e.createMatrix(ctx, name)
	return e
}

func (e *env) createMatrix(ctx context.Context, clusterName string) {
	t := e.t
	var workers []string
	for _, n := range e.nodes {
		if strings.Contains(n.Name, "worker") {
			workers = append(workers, n.Name)
		}
	}
	sort.Strings(workers)
	for _, ns := range matrixNamespaces {
		_, err := e.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"ns": ns}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, pn := range matrixPodNames {
			// a and c share a node, b is on the other: same-node and
			// cross-node pairs both.
			node := workers[0]
			if i == 1 {
				node = workers[1]
			}
			var containers []corev1.Container
			for _, port := range []int32{80, 81} {
				containers = append(containers, corev1.Container{
					Name:  fmt.Sprintf("cont-%d", port),
					Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
					Args:  []string{"serve-hostname", "--tcp", "--udp", "--http=false", fmt.Sprintf("--port=%d", port)},
					Ports: []corev1.ContainerPort{
						{Name: fmt.Sprintf("serve-%d-tcp", port), ContainerPort: port, Protocol: corev1.ProtocolTCP},
						{Name: fmt.Sprintf("serve-%d-udp", port), ContainerPort: port, Protocol: corev1.ProtocolUDP},
					},
				})
			}
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: pn, Namespace: ns, Labels: map[string]string{"pod": pn}},
				Spec:       corev1.PodSpec{NodeName: node, Containers: containers, TerminationGracePeriodSeconds: new(int64)},
			}
			if _, err := e.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ready := 0
		for _, ns := range matrixNamespaces {
			pods, err := e.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
					e.pods[ns+"/"+p.Name] = p
					ready++
				}
			}
		}
		if ready == len(matrixNamespaces)*len(matrixPodNames) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of the matrix's 9 pods are running after 3 minutes", ready)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for k := range e.pods {
		e.names = append(e.names, k)
	}
	sort.Strings(e.names)
	// Each pod's network namespace, found by its address.
	byIP := map[string]string{}
	prefix := "svclab-" + clusterName + "-pod-"
	entries, _ := os.ReadDir("/run/netns")
	for _, en := range entries {
		if !strings.HasPrefix(en.Name(), prefix) {
			continue
		}
		out, err := exec.Command("ip", "-n", en.Name(), "-4", "-o", "addr", "show", "dev", "eth0").Output()
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(out)) {
			if ip, _, err := net.ParseCIDR(f); err == nil {
				byIP[ip.String()] = en.Name()
			}
		}
	}
	for k, p := range e.pods {
		ns, ok := byIP[p.Status.PodIP]
		if !ok {
			t.Fatalf("no network namespace holds %s's address %s", k, p.Status.PodIP)
		}
		e.netns[k] = ns
	}
	// The servers listen once their containers run; wait until every pod
	// answers every probe with no policy in place.
	want := e.expected(ctx)
	if got, ok := e.probeUntil(ctx, want, time.Minute); !ok {
		t.Fatalf("with no NetworkPolicy, the matrix is not fully connected:\n%s", e.render(got, want))
	}
}

// result is a probed (or expected) matrix per probe kind.
type result map[probeKind]matrix

// world reads the current objects of the matrix's namespaces.
func (e *env) world(ctx context.Context) world {
	w := world{nsLabels: map[string]map[string]string{}}
	inMatrix := func(ns string) bool { return slices.Contains(matrixNamespaces, ns) }
	nss, err := e.client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, n := range nss.Items {
		if inMatrix(n.Name) {
			w.nsLabels[n.Name] = n.Labels
		}
	}
	pods, err := e.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for i := range pods.Items {
		if inMatrix(pods.Items[i].Namespace) {
			w.pods = append(w.pods, &pods.Items[i])
		}
	}
	nps, err := e.client.NetworkingV1().NetworkPolicies("").List(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for i := range nps.Items {
		if inMatrix(nps.Items[i].Namespace) {
			w.policies = append(w.policies, &nps.Items[i])
		}
	}
	return w
}

// expected is the oracle's matrix for the current objects.
func (e *env) expected(ctx context.Context) result {
	w := e.world(ctx)
	byKey := map[string]*corev1.Pod{}
	for _, p := range w.pods {
		byKey[p.Namespace+"/"+p.Name] = p
	}
	r := result{}
	for _, pk := range probes {
		m := matrix{}
		for _, from := range e.names {
			m[from] = map[string]bool{}
			for _, to := range e.names {
				m[from][to] = w.allowed(byKey[from], byKey[to], pk.proto, pk.port)
			}
		}
		r[pk] = m
	}
	return r
}

// probeUntil probes the whole matrix in parallel, then again the cells
// that differ from want, until none do or the time is up.
func (e *env) probeUntil(ctx context.Context, want result, within time.Duration) (result, bool) {
	got := result{}
	for _, pk := range probes {
		got[pk] = matrix{}
		for _, from := range e.names {
			got[pk][from] = map[string]bool{}
		}
	}
	type cell struct {
		pk       probeKind
		from, to string
	}
	var todo []cell
	for _, pk := range probes {
		for _, from := range e.names {
			for _, to := range e.names {
				todo = append(todo, cell{pk, from, to})
			}
		}
	}
	deadline := time.Now().Add(within)
	for {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, c := range todo {
			wg.Go(func() {
				ok := probe(e.netns[c.from], c.pk, e.pods[c.to].Status.PodIP)
				mu.Lock()
				got[c.pk][c.from][c.to] = ok
				mu.Unlock()
			})
		}
		wg.Wait()
		var wrong []cell
		for _, c := range todo {
			if got[c.pk][c.from][c.to] != want[c.pk][c.from][c.to] {
				wrong = append(wrong, c)
			}
		}
		if len(wrong) == 0 {
			return got, true
		}
		if time.Now().After(deadline) {
			return got, false
		}
		todo = wrong
		time.Sleep(300 * time.Millisecond)
	}
}

// probeTimeout is how long a probe waits for an answer: a blocked
// connection is dropped, so it always waits this long.
const probeTimeout = time.Second

// probe connects from inside a pod's network namespace, as agnhost connect
// does in upstream's e2e: TCP must connect; UDP must get an answer.
func probe(nsName string, pk probeKind, ip string) bool {
	return probeWithin(nsName, pk, ip, probeTimeout)
}

func probeWithin(nsName string, pk probeKind, ip string, timeout time.Duration) bool {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return false
	}
	defer orig.Close()
	target, err := netns.GetFromName(nsName)
	if err != nil {
		runtime.UnlockOSThread()
		return false
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return false
	}
	ok := dial(pk, ip, timeout)
	if netns.Set(orig) != nil {
		return ok // the thread stays locked and dies with the goroutine
	}
	runtime.UnlockOSThread()
	return ok
}

func dial(pk probeKind, ip string, timeout time.Duration) bool {
	addr := net.JoinHostPort(ip, fmt.Sprint(pk.port))
	if pk.proto == corev1.ProtocolTCP {
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	c, err := net.Dial("udp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("hostname")); err != nil {
		return false
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	return err == nil && n > 0
}

func (e *env) render(got, want result) string {
	var b strings.Builder
	for _, pk := range probes {
		fmt.Fprintf(&b, "%s expected:\n%s", pk, want[pk].String(e.names))
		fmt.Fprintf(&b, "%s observed:\n%s", pk, got[pk].String(e.names))
	}
	return b.String()
}

// reset removes every policy and puts labels back as they were, writing
// only what a case changed.
func (e *env) reset(ctx context.Context) {
	w := e.world(ctx)
	for _, np := range w.policies {
		if err := e.client.NetworkingV1().NetworkPolicies(np.Namespace).Delete(ctx, np.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			e.t.Fatal(err)
		}
	}
	for ns, l := range w.nsLabels {
		if want := map[string]string{"ns": ns}; !sameLabels(l, want) {
			e.patch(ctx, "namespaces", "", ns, l, want)
		}
	}
	for _, p := range w.pods {
		if want := map[string]string{"pod": p.Name}; !sameLabels(p.Labels, want) {
			e.patch(ctx, "pods", p.Namespace, p.Name, p.Labels, want)
		}
	}
}

// sameLabels compares labels, leaving out the namespace name label the API
// server keeps.
func sameLabels(have, want map[string]string) bool {
	n := 0
	for k, v := range have {
		if k == "kubernetes.io/metadata.name" {
			continue
		}
		if want[k] != v {
			return false
		}
		n++
	}
	return n == len(want)
}

// relabel sets an object's labels to exactly lbl.
func (e *env) relabel(ctx context.Context, kind, ns, name string, lbl map[string]string) {
	var cur map[string]string
	if kind == "namespaces" {
		n, err := e.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		cur = n.Labels
	} else {
		p, err := e.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		cur = p.Labels
	}
	e.patch(ctx, kind, ns, name, cur, lbl)
}

// patch turns an object's labels cur into exactly lbl.
func (e *env) patch(ctx context.Context, kind, ns, name string, cur, lbl map[string]string) {
	var parts []string
	for k := range cur {
		if _, keep := lbl[k]; !keep && k != "kubernetes.io/metadata.name" {
			parts = append(parts, fmt.Sprintf("%q:null", k))
		}
	}
	for k, v := range lbl {
		parts = append(parts, fmt.Sprintf("%q:%q", k, v))
	}
	body := []byte(`{"metadata":{"labels":{` + strings.Join(parts, ",") + `}}}`)
	var err error
	if kind == "namespaces" {
		_, err = e.client.CoreV1().Namespaces().Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	} else {
		_, err = e.client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	}
	if err != nil {
		e.t.Fatalf("labelling %s %s/%s: %v", kind, ns, name, err)
	}
}

func (e *env) apply(ctx context.Context, np *networkingv1.NetworkPolicy) {
	_, err := e.client.NetworkingV1().NetworkPolicies(np.Namespace).Create(ctx, np, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := e.client.NetworkingV1().NetworkPolicies(np.Namespace).Get(ctx, np.Name, metav1.GetOptions{})
		if gerr != nil {
			e.t.Fatal(gerr)
		}
		np.ResourceVersion = cur.ResourceVersion
		_, err = e.client.NetworkingV1().NetworkPolicies(np.Namespace).Update(ctx, np, metav1.UpdateOptions{})
	}
	if err != nil {
		e.t.Fatalf("applying NetworkPolicy %s/%s: %v", np.Namespace, np.Name, err)
	}
}

// check probes the matrix against the oracle's for the current objects.
func (e *env) check(ctx context.Context, step string) {
	e.t.Helper()
	want := e.expected(ctx)
	// Changes reach the dataplane in well under a second (see
	// BenchmarkPolicyToDataplane); probing at once would mostly measure
	// that delay, and cost a round of timeouts.
	time.Sleep(500 * time.Millisecond)
	if got, ok := e.probeUntil(ctx, want, 15*time.Second); !ok {
		e.t.Errorf("%s: the reachability matrix differs from the expected one:\n%s", step, e.render(got, want))
	}
}

// checkService probes a Service's ClusterIP from every matrix pod and
// compares with the oracle's verdict for the backend pod's target port:
// policies judge Service traffic after kube-proxy's DNAT.
func (e *env) checkService(ctx context.Context, step, clusterIP string, port int32, backend string, pk probeKind) {
	e.t.Helper()
	w := e.world(ctx)
	byKey := map[string]*corev1.Pod{}
	for _, p := range w.pods {
		byKey[p.Namespace+"/"+p.Name] = p
	}
	time.Sleep(500 * time.Millisecond)
	deadline := time.Now().Add(15 * time.Second)
	for {
		var wrong []string
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, from := range e.names {
			wg.Go(func() {
				want := w.allowed(byKey[from], byKey[backend], pk.proto, pk.port)
				if from == backend {
					// A pod reaching itself through a Service leaves its
					// namespace (hairpin), unlike through its own address.
					return
				}
				got := probe(e.netns[from], probeKind{pk.proto, port}, clusterIP)
				if got != want {
					mu.Lock()
					wrong = append(wrong, fmt.Sprintf("%s → %s:%d (%s %s): got allowed=%v, want %v", from, clusterIP, port, backend, pk, got, want))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(wrong) == 0 {
			return
		}
		if time.Now().After(deadline) {
			sort.Strings(wrong)
			e.t.Errorf("%s: through the Service:\n%s", step, strings.Join(wrong, "\n"))
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
}
