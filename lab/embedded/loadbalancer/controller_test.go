package loadbalancer

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// fakePlane records routes.
type fakePlane struct{ routes map[netip.Addr][]netip.Addr }

func (p *fakePlane) Route(_ context.Context, a netip.Addr, nodes []netip.Addr) error {
	p.routes[a] = slices.Clone(nodes)
	return nil
}
func (p *fakePlane) Remove(_ context.Context, a netip.Addr) error { delete(p.routes, a); return nil }
func (p *fakePlane) Routes(context.Context) (map[netip.Addr][]netip.Addr, error) {
	out := map[netip.Addr][]netip.Addr{}
	for a, n := range p.routes {
		out[a] = n
	}
	return out, nil
}

// fakeProber answers from a table of "IP:port/path" → healthy.
type fakeProber struct{ ok map[string]bool }

func (p *fakeProber) Probe(_ context.Context, node netip.Addr, port int, path string) (bool, string) {
	key := fmt.Sprintf("%s:%d%s", node, port, path)
	if p.ok[key] {
		return true, "200"
	}
	return false, "503 {\"localEndpoints\": 0}"
}

func node(name, ip string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
}

func lbService(ns, name string, uid types.UID, created int64, mutate ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, CreationTimestamp: metav1.Unix(created, 0)},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
			Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080}}}}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

type lab struct {
	c      *Controller
	cs     *fake.Clientset
	plane  *fakePlane
	prober *fakeProber
}

func newLab(objs ...runtime.Object) *lab {
	base := []runtime.Object{
		node("lab-control-plane", "172.29.1.2", map[string]string{ExcludeLabel: ""}),
		node("lab-worker", "172.29.1.3", nil),
		node("lab-worker2", "172.29.1.4", nil),
	}
	cs := fake.NewClientset(append(base, objs...)...)
	l := &lab{cs: cs, plane: &fakePlane{routes: map[netip.Addr][]netip.Addr{}}, prober: &fakeProber{ok: map[string]bool{}}}
	l.c = &Controller{Client: cs, Pool: netip.MustParsePrefix("172.29.1.240/28"), Plane: l.plane, Prober: l.prober,
		Now: func() time.Time { return time.Unix(1000, 0) }}
	return l
}

func (l *lab) reconcile(t *testing.T) {
	t.Helper()
	if err := l.c.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (l *lab) status(t *testing.T, ns, name string) string {
	t.Helper()
	s, err := l.cs.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		mode := ""
		if in.IPMode != nil {
			mode = string(*in.IPMode)
		}
		ips = append(ips, in.IP+"/"+mode)
	}
	return strings.Join(ips, ",")
}

func (l *lab) events(t *testing.T, ns string) []string {
	t.Helper()
	evs, err := l.cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs.Items {
		out = append(out, e.InvolvedObject.Name+" "+e.Reason+": "+e.Message)
	}
	return out
}

// Addresses come from the pool, lowest free first, and stay with their
// Service; loadBalancerIP is honoured when it is in the pool and free;
// Services of another class, and other types, get none.
func TestAllocation(t *testing.T) {
	want := func(s *corev1.Service) { s.Spec.LoadBalancerIP = "172.29.1.250" }
	outside := func(s *corev1.Service) { s.Spec.LoadBalancerIP = "10.0.0.1" }
	class := "example.com/other"
	other := func(s *corev1.Service) { s.Spec.LoadBalancerClass = &class }
	clusterIP := func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }
	l := newLab(
		lbService("shop", "a", "uid-a", 1),
		lbService("shop", "b", "uid-b", 2, want),
		lbService("shop", "c", "uid-c", 3, outside),
		lbService("shop", "d", "uid-d", 4, other),
		lbService("shop", "e", "uid-e", 5, clusterIP),
	)
	l.reconcile(t)
	for name, wantStatus := range map[string]string{"a": "172.29.1.241/VIP", "b": "172.29.1.250/VIP", "c": "172.29.1.242/VIP", "d": "", "e": ""} {
		if got := l.status(t, "shop", name); got != wantStatus {
			t.Errorf("%s: status %q, want %q", name, got, wantStatus)
		}
	}
	// A restarted controller keeps them.
	l.c = &Controller{Client: l.cs, Pool: l.c.Pool, Plane: l.plane, Prober: l.prober}
	l.reconcile(t)
	if got := l.status(t, "shop", "a"); got != "172.29.1.241/VIP" {
		t.Errorf("after a restart a has %q", got)
	}
	// A deleted Service's address is routed no more and handed out again.
	if err := l.cs.CoreV1().Services("shop").Delete(context.Background(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	l.reconcile(t)
	if _, ok := l.plane.routes[addr("172.29.1.241")]; ok {
		t.Error("the deleted Service's address is still routed")
	}
	if _, err := l.cs.CoreV1().Services("shop").Create(context.Background(), lbService("shop", "f", "uid-f", 6), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l.reconcile(t)
	if got := l.status(t, "shop", "f"); got != "172.29.1.241/VIP" {
		t.Errorf("f got %q, want the freed 172.29.1.241", got)
	}
}

func TestPoolExhausted(t *testing.T) {
	var objs []runtime.Object
	for i := range 15 {
		objs = append(objs, lbService("shop", fmt.Sprintf("s%02d", i), types.UID(fmt.Sprint("u", i)), int64(i)))
	}
	l := newLab(objs...)
	l.reconcile(t)
	if got := l.status(t, "shop", "s13"); got != "172.29.1.254/VIP" {
		t.Errorf("the last address: %q", got)
	}
	if got := l.status(t, "shop", "s14"); got != "" {
		t.Errorf("the 15th Service got %q from a /28", got)
	}
	if evs := l.events(t, "shop"); !slices.ContainsFunc(evs, func(e string) bool {
		return strings.HasPrefix(e, "s14 AllocationFailed: the lab's load-balancer pool 172.29.1.240/28 has no free address")
	}) {
		t.Errorf("events %q", evs)
	}
}

// externalTrafficPolicy: Local is checked on healthCheckNodePort, Cluster on
// kube-proxy's /healthz; excluded nodes are never checked; a node leaves
// after two failed checks and comes back after one good one; each change
// is an event saying who takes traffic and why the others do not.
func TestHealthChecks(t *testing.T) {
	local := func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = 31000
	}
	l := newLab(lbService("edge", "ingress", "uid-i", 1, local), lbService("edge", "api", "uid-a", 2))
	l.prober.ok["172.29.1.3:31000/"] = true
	l.prober.ok["172.29.1.3:10256/healthz"] = true
	l.prober.ok["172.29.1.4:10256/healthz"] = true
	l.reconcile(t)
	ingress, api := addr("172.29.1.241"), addr("172.29.1.242")
	w1, w2 := addr("172.29.1.3"), addr("172.29.1.4")
	if got := l.plane.routes[ingress]; !slices.Equal(got, []netip.Addr{w1}) {
		t.Errorf("ingress (Local, a replica on lab-worker only) goes to %v", got)
	}
	if got := l.plane.routes[api]; !slices.Equal(got, []netip.Addr{w1, w2}) {
		t.Errorf("api (Cluster) goes to %v", got)
	}
	evs := l.events(t, "edge")
	wantEvent := "ingress UpdatedLoadBalancer: 172.29.1.241 sends traffic to lab-worker; failing the health check: lab-worker2 (http://172.29.1.4:31000/: 503 {\"localEndpoints\": 0})"
	if !slices.Contains(evs, wantEvent) {
		t.Errorf("events:\n%s\nwant %s", strings.Join(evs, "\n"), wantEvent)
	}
	// kube-proxy on lab-worker2 turns unhealthy (drained): api keeps it
	// for one failed check, drops it at the second.
	l.prober.ok["172.29.1.4:10256/healthz"] = false
	l.reconcile(t)
	if got := l.plane.routes[api]; !slices.Equal(got, []netip.Addr{w1, w2}) {
		t.Errorf("after one failed check api goes to %v", got)
	}
	l.reconcile(t)
	if got := l.plane.routes[api]; !slices.Equal(got, []netip.Addr{w1}) {
		t.Errorf("after two failed checks api goes to %v", got)
	}
	// The replicas spread: lab-worker2 passes ingress's check at once.
	l.prober.ok["172.29.1.4:31000/"] = true
	l.reconcile(t)
	if got := l.plane.routes[ingress]; !slices.Equal(got, []netip.Addr{w1, w2}) {
		t.Errorf("after spreading ingress goes to %v", got)
	}
	// No healthy node: the address drops its traffic.
	l.prober.ok = map[string]bool{}
	l.reconcile(t)
	l.reconcile(t)
	if got, ok := l.plane.routes[ingress]; !ok || len(got) != 0 {
		t.Errorf("with no healthy node ingress goes to %v (routed: %v)", got, ok)
	}
	if evs := l.events(t, "edge"); !slices.ContainsFunc(evs, func(e string) bool {
		return strings.HasPrefix(e, "ingress UpdatedLoadBalancer: 172.29.1.241 drops its traffic: no node passes the health check")
	}) {
		t.Errorf("events %q", evs)
	}
}
