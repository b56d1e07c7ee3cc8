package loadbalancer

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// ExcludeLabel keeps a node out of every load balancer (kubeadm puts it on
// control-plane nodes).
const ExcludeLabel = "node.kubernetes.io/exclude-from-external-load-balancers"

// ProxyHealthPort is kube-proxy's health port (/healthz, /livez).
const ProxyHealthPort = 10256

// Plane is the load balancer's forwarding plane.
type Plane interface {
	// Route sends the traffic of addr to nodes (none: it is dropped).
	Route(ctx context.Context, addr netip.Addr, nodes []netip.Addr) error
	// Remove stops handling addr.
	Remove(ctx context.Context, addr netip.Addr) error
	// Routes lists the addresses the plane handles and where each goes.
	Routes(ctx context.Context) (map[netip.Addr][]netip.Addr, error)
}

// Prober asks a node's health endpoint: an answer with status 200 is
// healthy; detail says what came back ("503 {\"localEndpoints\": 0}",
// "connection refused").
type Prober interface {
	Probe(ctx context.Context, node netip.Addr, port int, path string) (healthy bool, detail string)
}

// Controller is the lab's load balancer.
type Controller struct {
	Client kubernetes.Interface
	// Pool holds the addresses it hands out.
	Pool   netip.Prefix
	Plane  Plane
	Prober Prober
	// Interval is how often it checks the nodes and reconciles (default
	// 1s: a lab's load balancer is quicker than a cloud's).
	Interval time.Duration
	Log      *slog.Logger
	// Now is the clock of events (default time.Now).
	Now func() time.Time

	// failures counts each (address, node)'s failed checks in a row.
	failures map[netip.Addr]map[netip.Addr]int
	// sent is what each address was last routed to, in order.
	sent map[netip.Addr][]netip.Addr
	// seq tells apart the names of events recorded at the same moment.
	seq int64
	// rounds counts the reconciliations done.
	rounds atomic.Int64
}

// Rounds is how many reconciliations the controller has done. A change
// made before round r began is acted on by round r + RoundsToAct - 1.
func (c *Controller) Rounds() int64 { return c.rounds.Load() }

// RoundsToAct is how many reconciliations that begin after a change take
// to act on it: a node that stops passing leaves after failuresToLeave.
const RoundsToAct = failuresToLeave

// failuresToLeave is how many failed checks in a row take a node out.
const failuresToLeave = 2

// Run reconciles every Interval until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	every := c.Interval
	if every == 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := c.Reconcile(ctx); err != nil && ctx.Err() == nil {
			c.log().Warn("load balancer: reconciling", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (c *Controller) log() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

func (c *Controller) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// balanced is a Service the load balancer serves.
func balanced(s *corev1.Service) bool {
	return s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.LoadBalancerClass == nil
}

// Reconcile gives addresses to the LoadBalancer Services that lack one,
// checks their nodes, routes each address to its healthy nodes and drops
// the addresses of Services that are gone.
func (c *Controller) Reconcile(ctx context.Context) error {
	defer c.rounds.Add(1)
	if c.failures == nil {
		c.failures = map[netip.Addr]map[netip.Addr]int{}
		c.sent = map[netip.Addr][]netip.Addr{}
		// What the plane holds (after a restart of this process) is
		// known; the first round reports only changes to it.
		if routes, err := c.Plane.Routes(ctx); err == nil {
			for a, nodes := range routes {
				c.sent[a] = nodes
			}
		}
	}
	svcs, err := c.Client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing Services: %w", err)
	}
	nodeList, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	var nodes []*corev1.Node
	for i := range nodeList.Items {
		n := &nodeList.Items[i]
		if _, excluded := n.Labels[ExcludeLabel]; !excluded && nodeIP(n).IsValid() {
			nodes = append(nodes, n)
		}
	}
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })

	// Addresses in use: kept by the Services that hold them.
	used := map[netip.Addr]types.UID{}
	var services []*corev1.Service
	for i := range svcs.Items {
		s := &svcs.Items[i]
		if !balanced(s) {
			continue
		}
		services = append(services, s)
		if a := c.assigned(s); a.IsValid() {
			if _, taken := used[a]; !taken {
				used[a] = s.UID
			}
		}
	}
	slices.SortFunc(services, func(a, b *corev1.Service) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	live := map[netip.Addr]bool{}
	for _, s := range services {
		addr := c.assigned(s)
		if !addr.IsValid() || used[addr] != s.UID {
			if addr, err = c.allocate(ctx, s, used); err != nil {
				c.log().Warn("load balancer: no address", "service", s.Namespace+"/"+s.Name, "err", err)
				continue
			}
		}
		live[addr] = true
		c.balance(ctx, s, addr, nodes)
	}
	routes, err := c.Plane.Routes(ctx)
	if err != nil {
		return err
	}
	for a := range routes {
		if !live[a] && c.Pool.Contains(a) {
			if err := c.Plane.Remove(ctx, a); err != nil {
				return err
			}
			delete(c.sent, a)
			delete(c.failures, a)
		}
	}
	return nil
}

// assigned is the pool address in s's status, if any.
func (c *Controller) assigned(s *corev1.Service) netip.Addr {
	for _, in := range s.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil && c.Pool.Contains(a) {
			return a
		}
	}
	return netip.Addr{}
}

// allocate gives s an address: its spec.loadBalancerIP when that is in the
// pool and free, else the lowest free one, and writes it to its status.
func (c *Controller) allocate(ctx context.Context, s *corev1.Service, used map[netip.Addr]types.UID) (netip.Addr, error) {
	var addr netip.Addr
	if want, err := netip.ParseAddr(s.Spec.LoadBalancerIP); err == nil && c.usable(want) {
		if _, taken := used[want]; !taken {
			addr = want
		}
	}
	for a := c.Pool.Masked().Addr().Next(); !addr.IsValid() && c.usable(a); a = a.Next() {
		if _, taken := used[a]; !taken {
			addr = a
		}
	}
	if !addr.IsValid() {
		c.event(ctx, s, corev1.EventTypeWarning, "AllocationFailed", fmt.Sprintf("the lab's load-balancer pool %s has no free address", c.Pool))
		return netip.Addr{}, fmt.Errorf("pool %s exhausted", c.Pool)
	}
	vip := corev1.LoadBalancerIPModeVIP
	upd := s.DeepCopy()
	upd.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: addr.String(), IPMode: &vip}}
	if _, err := c.Client.CoreV1().Services(s.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
		return netip.Addr{}, fmt.Errorf("writing the address of %s/%s: %w", s.Namespace, s.Name, err)
	}
	used[addr] = s.UID
	c.event(ctx, s, corev1.EventTypeNormal, "EnsuredLoadBalancer", "Ensured load balancer at "+addr.String())
	return addr, nil
}

// usable says whether a may be handed out: in the pool, neither its network
// nor its broadcast address.
func (c *Controller) usable(a netip.Addr) bool {
	p := c.Pool.Masked()
	if !p.Contains(a) || a == p.Addr() {
		return false
	}
	last := p.Addr()
	for n := p.Addr(); p.Contains(n); n = n.Next() {
		last = n
	}
	return a != last
}

// health is one node's answer for one Service.
type health struct {
	node    *corev1.Node
	ip      netip.Addr
	healthy bool
	detail  string
	url     string
}

// balance checks s's nodes and routes addr to the healthy ones.
func (c *Controller) balance(ctx context.Context, s *corev1.Service, addr netip.Addr, nodes []*corev1.Node) {
	port, path := ProxyHealthPort, "/healthz"
	if s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal && s.Spec.HealthCheckNodePort != 0 {
		port, path = int(s.Spec.HealthCheckNodePort), "/"
	}
	if c.failures[addr] == nil {
		c.failures[addr] = map[netip.Addr]int{}
	}
	prev := c.sent[addr]
	var checks []health
	var to []netip.Addr
	for _, n := range nodes {
		ip := nodeIP(n)
		ok, detail := c.Prober.Probe(ctx, ip, port, path)
		h := health{node: n, ip: ip, healthy: ok, detail: detail, url: "http://" + netip.AddrPortFrom(ip, uint16(port)).String() + path}
		if ok {
			c.failures[addr][ip] = 0
		} else {
			c.failures[addr][ip]++
			// A node that took traffic stays until it failed twice.
			if slices.Contains(prev, ip) && c.failures[addr][ip] < failuresToLeave {
				h.healthy = true
			}
		}
		checks = append(checks, h)
		if h.healthy {
			to = append(to, ip)
		}
	}
	if _, known := c.sent[addr]; known && slices.Equal(prev, to) {
		return
	}
	if err := c.Plane.Route(ctx, addr, to); err != nil {
		c.log().Warn("load balancer: routing", "address", addr, "err", err)
		return
	}
	c.sent[addr] = to
	c.event(ctx, s, corev1.EventTypeNormal, "UpdatedLoadBalancer", describe(addr, checks))
}

// describe says where addr's traffic goes and why the other nodes take none.
func describe(addr netip.Addr, checks []health) string {
	var in, out []string
	for _, h := range checks {
		if h.healthy {
			in = append(in, h.node.Name)
		} else {
			out = append(out, fmt.Sprintf("%s (%s: %s)", h.node.Name, h.url, h.detail))
		}
	}
	msg := fmt.Sprintf("%s sends traffic to %s", addr, strings.Join(in, ", "))
	if len(in) == 0 {
		msg = fmt.Sprintf("%s drops its traffic: no node passes the health check", addr)
	}
	if len(out) > 0 {
		msg += "; failing the health check: " + strings.Join(out, "; ")
	}
	return msg
}

// nodeIP is a node's InternalIP.
func nodeIP(n *corev1.Node) netip.Addr {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				return ip
			}
		}
	}
	return netip.Addr{}
}

// event records an event on s, as the service controller does.
func (c *Controller) event(ctx context.Context, s *corev1.Service, kind, reason, msg string) {
	now := metav1.NewTime(c.now())
	c.seq++
	ev := &corev1.Event{
		// Named as client-go's event recorder names them.
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", s.Name, now.UnixNano()+c.seq), Namespace: s.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: s.Namespace, Name: s.Name,
			UID: s.UID, ResourceVersion: s.ResourceVersion},
		Type: kind, Reason: reason, Message: msg, Count: 1,
		FirstTimestamp: now, LastTimestamp: now,
		Source: corev1.EventSource{Component: "svclab-load-balancer"},
	}
	if _, err := c.Client.CoreV1().Events(s.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		c.log().Debug("load balancer: recording an event", "err", err)
	}
}
