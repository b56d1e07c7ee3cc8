package flowtest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/proxier/manifest"
	"github.com/svclab/svclab/lab/proxier/render"
)

// The world of the flow tests. The node namespace routes between a client
// network (192.168.77.0/24, the node is .1 and the "ext" client namespace
// holds .2-.13) and one veth per pod (the node side of each has
// podGateway/32, pods have a /32 and a default route to it), like a
// point-to-point CNI plugin. The node also has secondaryNodeIP on lo.
const (
	flowNode        = "flow-node"
	nodeIP          = "192.168.77.1"
	secondaryNodeIP = "192.168.88.1"
	extClientIP     = "192.168.77.2"
	// podGateway is the node's address on every pod link, so it is the
	// source address masquerading gives traffic to pods.
	podGateway  = "10.244.0.1"
	clusterCIDR = "10.244.0.0/16"
	serviceCIDR = "10.96.0.0/16"

	echoTCPPort = 8080
	echoUDPPort = 8053
	// nodeListenerPort is a NodePort (of flow/etp-cluster) on which the
	// node namespace itself listens, answering as "node": it answers
	// when a NodePort is not DNATed.
	nodeListenerPort = 30005

	// routerIP is the node's default gateway (a namespace of its own).
	routerIP = "192.168.66.2"

	dropTimeout = time.Second
	// reachTimeout bounds a probe that should get an answer: generous,
	// since it costs nothing when the answer comes, and the cases run
	// side by side on a machine that may be busy with other tests.
	reachTimeout = 5 * time.Second
)

// flowPods are the pod namespaces. Pods a* are on flowNode, b* on
// "other-node" (as far as the EndpointSlices say); c is a client pod.
var flowPods = []struct {
	name, ip string
	echo     bool
}{
	{"a1", "10.244.0.11", true},
	{"a2", "10.244.0.12", true},
	{"a3", "10.244.0.13", true},
	{"b1", "10.244.1.21", true},
	{"b2", "10.244.1.22", true},
	{"c", "10.244.0.100", false},
}

// affinitySources are the ext client's addresses used by the affinity
// cases (each is a separate client as far as affinity goes).
var affinitySources = func() []string {
	var out []string
	for i := 4; i <= 13; i++ {
		out = append(out, fmt.Sprintf("192.168.77.%d", i))
	}
	return out
}()

type world struct {
	mode string
	objs *manifest.Objects
	node Netns
	ext  Netns
	pods map[string]Netns
}

// client returns the namespace and source address of a client: "ext", a
// pod name, or "node".
func (w *world) client(name, src string) (Netns, netip.Addr, error) {
	var addr netip.Addr
	if src != "" {
		addr = netip.MustParseAddr(src)
	}
	switch name {
	case "ext":
		if !addr.IsValid() {
			addr = netip.MustParseAddr(extClientIP)
		}
		return w.ext, addr, nil
	case "node":
		return w.node, addr, nil
	}
	ns, ok := w.pods[name]
	if !ok {
		return Netns{}, addr, fmt.Errorf("unknown client %q", name)
	}
	for _, p := range flowPods {
		if p.name == name && !addr.IsValid() {
			addr = netip.MustParseAddr(p.ip)
		}
	}
	return ns, addr, nil
}

// Ways to reach a Service port.
const (
	viaClusterIP  = "cluster IP"
	viaNodePort   = "NodePort"
	viaExternalIP = "external IP"
	viaLB         = "load balancer IP"
)

// portName is the Service port used for each protocol.
var portName = map[string]string{"tcp": "http", "udp": "dns"}

// dest resolves a Service port address from the manifest. addr overrides
// the IP (the node address of a NodePort, for example), port the port.
func (w *world) dest(svcName, via, addr string, port int, proto string) (netip.AddrPort, error) {
	var svc *v1.Service
	for _, s := range w.objs.Services {
		if s.Namespace+"/"+s.Name == svcName {
			svc = s
		}
	}
	if svc == nil {
		return netip.AddrPort{}, fmt.Errorf("no Service %s in the manifest", svcName)
	}
	var sp *v1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == portName[proto] && strings.EqualFold(string(svc.Spec.Ports[i].Protocol), proto) {
			sp = &svc.Spec.Ports[i]
		}
	}
	if sp == nil {
		return netip.AddrPort{}, fmt.Errorf("Service %s has no %s port %q", svcName, proto, portName[proto])
	}
	var ip string
	svcPort := int(sp.Port)
	switch via {
	case viaClusterIP:
		ip = svc.Spec.ClusterIP
	case viaNodePort:
		ip, svcPort = nodeIP, int(sp.NodePort)
	case viaExternalIP:
		if len(svc.Spec.ExternalIPs) > 0 {
			ip = svc.Spec.ExternalIPs[0]
		}
	case viaLB:
		if len(svc.Status.LoadBalancer.Ingress) > 0 {
			ip = svc.Status.LoadBalancer.Ingress[0].IP
		}
	}
	if addr != "" {
		ip = addr
	}
	if port == 0 {
		port = svcPort
	}
	a, err := netip.ParseAddr(ip)
	if err != nil || port == 0 {
		return netip.AddrPort{}, fmt.Errorf("Service %s has no %s for %s", svcName, via, proto)
	}
	return netip.AddrPortFrom(a, uint16(port)), nil
}

func newWorld(t *testing.T, mode string) *world {
	t.Helper()
	ctx := t.Context()
	data, err := os.ReadFile("testdata/flows.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Decode(bytes.NewReader(data), "testdata/flows.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules bytes.Buffer
	err = render.Render(ctx, testLogger(t), render.Options{
		Mode:         mode,
		NodeName:     flowNode,
		ClusterCIDR:  clusterCIDR,
		ServiceCIDRs: []string{serviceCIDR},
	}, bytes.NewReader(data), "testdata/flows.yaml", &rules)
	if err != nil {
		t.Fatalf("render: %v", err)
	}

	lab := newSandbox(t, "f"+mode[:1])
	w := &world{mode: mode, objs: objs, pods: map[string]Netns{}}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	newNetns := func(short string) Netns {
		ns, err := lab.Netns(ctx, short)
		must(err)
		return ns
	}
	w.node = newNetns("node")
	w.ext = newNetns("ext")
	// The cases run at once, and several REJECT towards the same client:
	// without this, the node's per-destination ICMP rate limit turns some
	// of those REJECTs into timeouts.
	_, err = w.node.Exec(ctx, nil, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1", "net.ipv4.icmp_ratelimit=0")
	must(err)
	must(lab.Veth(ctx, w.node, lab.ID+"x", nodeIP+"/24", w.ext, "eth0", extClientIP+"/24"))
	for _, a := range affinitySources {
		must(w.ext.IP(ctx, "addr", "add", a+"/24", "dev", "eth0"))
	}
	for _, a := range []string{"192.168.77.3"} {
		must(w.ext.IP(ctx, "addr", "add", a+"/24", "dev", "eth0"))
	}
	must(w.ext.IP(ctx, "route", "add", "default", "via", nodeIP))
	// The node's default route leads to a "router" namespace that
	// accepts the whole service CIDR as local and answers on the
	// Services' ports as "router": Service traffic that the rules neither
	// redirect nor stop leaks there and says so.
	router := newNetns("rtr")
	must(lab.Veth(ctx, w.node, lab.ID+"r", "192.168.66.1/30", router, "eth0", routerIP+"/30"))
	must(w.node.IP(ctx, "route", "add", "default", "via", routerIP))
	must(router.IP(ctx, "route", "add", "local", serviceCIDR, "dev", "lo", "table", "local"))
	for _, dst := range []string{"192.168.77.0/24", "10.244.0.0/16"} {
		must(router.IP(ctx, "route", "add", dst, "via", "192.168.66.1"))
	}
	must(w.node.IP(ctx, "addr", "add", secondaryNodeIP+"/32", "dev", "lo"))

	var servers []*EchoServer
	t.Cleanup(func() {
		for _, s := range servers {
			if err := s.Close(); err != nil {
				t.Errorf("close echo server %s: %v", s.Name, err)
			}
		}
	})
	for i, p := range flowPods {
		ns := newNetns(p.name)
		w.pods[p.name] = ns
		hostIf := fmt.Sprintf("%sp%d", lab.ID, i)
		must(lab.Veth(ctx, w.node, hostIf, podGateway+"/32", ns, "eth0", p.ip+"/32"))
		must(w.node.IP(ctx, "route", "add", p.ip+"/32", "dev", hostIf))
		must(ns.IP(ctx, "route", "add", podGateway, "dev", "eth0", "scope", "link"))
		must(ns.IP(ctx, "route", "add", "default", "via", podGateway, "dev", "eth0"))
		if p.echo {
			s, err := StartEcho(ns, p.name, []int{echoTCPPort}, []int{echoUDPPort}, testLogger(t))
			must(err)
			servers = append(servers, s)
		}
	}
	s, err := StartEcho(w.node, "node", []int{nodeListenerPort}, nil, testLogger(t))
	must(err)
	servers = append(servers, s)
	s, err = StartEcho(router, "router", []int{80, 81}, []int{53, 81}, testLogger(t))
	must(err)
	servers = append(servers, s)

	switch mode {
	case render.ModeNFTables:
		must(ApplyNFTables(ctx, w.node, rules.String()))
	case render.ModeIPTables:
		must(ApplyIPTables(ctx, w.node, rules.String()))
	}
	return w
}

// flowCase sends n probes per protocol from a client to a Service and
// checks what happens to them.
type flowCase struct {
	name   string
	modes  []string // modes where the case applies; nil means both
	protos []string // nil means tcp and udp
	from   string   // "ext", "node" or a pod name
	src    string   // source address (default: the client's)
	svc    string   // namespace/name
	via    string
	addr   string // IP to use instead of the Service's (e.g. another node address for viaNodePort)
	port   int    // port to use instead of the Service's
	n      int

	want Outcome
	// backends are the echo servers that may answer; with spread, each
	// of them must answer at least once.
	backends []string
	spread   bool
	// peer is the source address the backends must see: "client" for the
	// client's own address, else an IP.
	peer string

	// custom replaces the probe loop.
	custom func(ctx context.Context, w *world, proto string) []string
}

var flowCases = []flowCase{
	{name: "cluster IP spreads over all endpoints, pod client IP kept", from: "c", svc: "flow/spread", via: viaClusterIP, n: 45,
		want: Reached, backends: []string{"a1", "a2", "b1"}, spread: true, peer: "client"},
	{name: "cluster IP from outside the cluster is masqueraded", from: "ext", svc: "flow/spread", via: viaClusterIP, n: 10,
		want: Reached, backends: []string{"a1", "a2", "b1"}, peer: podGateway},
	{name: "cluster IP from the node itself", from: "node", svc: "flow/spread", via: viaClusterIP, n: 10,
		want: Reached, backends: []string{"a1", "a2", "b1"}, peer: podGateway},
	{name: "no endpoints: cluster IP rejected", from: "c", svc: "flow/empty", via: viaClusterIP, n: 2, want: Refused},
	{name: "no endpoints: NodePort rejected", from: "ext", svc: "flow/empty", via: viaNodePort, n: 2, want: Refused},
	{name: "eTP Local without local endpoint: NodePort dropped", from: "ext", svc: "flow/etp-local-remote", via: viaNodePort, n: 1, want: TimedOut},
	{name: "eTP Local without local endpoint: pod traffic to NodePort short-circuited", from: "c", svc: "flow/etp-local-remote", via: viaNodePort, n: 5,
		want: Reached, backends: []string{"b1"}, peer: "client"},
	{name: "eTP Local without local endpoint: node traffic to NodePort short-circuited and masqueraded", from: "node", svc: "flow/etp-local-remote", via: viaNodePort, n: 5,
		want: Reached, backends: []string{"b1"}, peer: podGateway},
	{name: "eTP Local without local endpoint: cluster IP still works", from: "c", svc: "flow/etp-local-remote", via: viaClusterIP, n: 5,
		want: Reached, backends: []string{"b1"}, peer: "client"},
	{name: "eTP Local: NodePort goes to the local endpoint with the client IP", from: "ext", svc: "flow/etp-local", via: viaNodePort, n: 15,
		want: Reached, backends: []string{"a1"}, peer: "client"},
	{name: "eTP Cluster: NodePort spreads and is masqueraded", from: "ext", svc: "flow/etp-cluster", via: viaNodePort, n: 30,
		want: Reached, backends: []string{"a1", "b1"}, spread: true, peer: podGateway},
	{name: "NodePort on a secondary node IP is not served (nftables: primary only)", modes: []string{render.ModeNFTables}, protos: []string{"tcp"},
		from: "ext", svc: "flow/etp-cluster", via: viaNodePort, addr: secondaryNodeIP, n: 3, want: Reached, backends: []string{"node"}, peer: "client"},
	{name: "NodePort on a secondary node IP is not served (nftables: primary only)", modes: []string{render.ModeNFTables}, protos: []string{"udp"},
		from: "ext", svc: "flow/etp-cluster", via: viaNodePort, addr: secondaryNodeIP, n: 2, want: Refused},
	{name: "NodePort on a secondary node IP is served (iptables: all local addresses)", modes: []string{render.ModeIPTables},
		from: "ext", svc: "flow/etp-cluster", via: viaNodePort, addr: secondaryNodeIP, n: 10, want: Reached, backends: []string{"a1", "b1"}, peer: podGateway},
	{name: "hairpin: an endpoint reaches itself through its Service, masqueraded", from: "a2", svc: "flow/hairpin", via: viaClusterIP, n: 3,
		want: Reached, backends: []string{"a2"}, peer: podGateway},
	{name: "ClientIP affinity sticks and expires", svc: "flow/affinity", via: viaClusterIP, custom: affinityCase},
	{name: "iTP Local: only local endpoints", from: "c", svc: "flow/itp-local", via: viaClusterIP, n: 30,
		want: Reached, backends: []string{"a1", "a3"}, spread: true, peer: "client"},
	{name: "iTP Local without local endpoint: dropped, no fallback", from: "c", svc: "flow/itp-local-remote", via: viaClusterIP, n: 1, want: TimedOut},
	{name: "only serving+terminating endpoints: fallback to them", from: "c", svc: "flow/terminating", via: viaClusterIP, n: 30,
		want: Reached, backends: []string{"a1", "b1"}, spread: true, peer: "client"},
	{name: "ready and terminating endpoints: only the ready one", from: "c", svc: "flow/mixed-terminating", via: viaClusterIP, n: 15,
		want: Reached, backends: []string{"a1"}, peer: "client"},
	{name: "terminating endpoint that does not serve: rejected", from: "c", svc: "flow/not-serving", via: viaClusterIP, n: 2, want: Refused},
	{name: "load balancer IP from an allowed source", from: "ext", src: extClientIP, svc: "flow/lb", via: viaLB, n: 3,
		want: Reached, backends: []string{"a3"}, peer: podGateway},
	{name: "load balancer IP from a source outside loadBalancerSourceRanges: dropped", from: "ext", src: "192.168.77.3", svc: "flow/lb", via: viaLB, n: 1, want: TimedOut},
	{name: "source ranges do not apply to the NodePort", from: "ext", src: "192.168.77.3", svc: "flow/lb", via: viaNodePort, n: 3,
		want: Reached, backends: []string{"a3"}, peer: podGateway},
	{name: "external IP", from: "ext", svc: "flow/external-ip", via: viaExternalIP, n: 3,
		want: Reached, backends: []string{"a3"}, peer: podGateway},
	{name: "cluster IP on a port it does not serve: rejected (nftables cluster-ips-check)", modes: []string{render.ModeNFTables},
		from: "c", svc: "flow/spread", via: viaClusterIP, port: 81, n: 2, want: Refused},
	{name: "cluster IP on a port it does not serve: not handled (iptables), leaks to the router", modes: []string{render.ModeIPTables},
		from: "c", svc: "flow/spread", via: viaClusterIP, port: 81, n: 2, want: Reached, backends: []string{"router"}, peer: "client"},
	{name: "unallocated service CIDR address: dropped (nftables cluster-ips-check)", modes: []string{render.ModeNFTables},
		from: "c", svc: "flow/spread", via: viaClusterIP, addr: "10.96.200.200", n: 1, want: TimedOut},
	{name: "unallocated service CIDR address: not handled (iptables), leaks to the router", modes: []string{render.ModeIPTables},
		from: "c", svc: "flow/spread", via: viaClusterIP, addr: "10.96.200.200", n: 2, want: Reached, backends: []string{"router"}, peer: "client"},
	{name: "topology hints: only the endpoint for this zone", from: "c", svc: "flow/zones", via: viaClusterIP, n: 20,
		want: Reached, backends: []string{"a1"}, peer: "client"},
}

// affinityCase checks ClientIP affinity (timeout 2 s): each of ten
// clients keeps its backend over quick successive connections, the
// clients do not all share one backend, and after the timeout the choice
// is made afresh (with three backends, ten clients all keeping theirs by
// chance has a probability of 3^-10).
func affinityCase(ctx context.Context, w *world, proto string) []string {
	var problems []string
	dst, err := w.dest("flow/affinity", viaClusterIP, "", 0, proto)
	if err != nil {
		return []string{err.Error()}
	}
	first := map[string]string{}
	for _, src := range affinitySources {
		for i := range 3 {
			r := Probe(ctx, w.ext, proto, netip.MustParseAddr(src), dst, reachTimeout)
			if r.Outcome != Reached {
				problems = append(problems, fmt.Sprintf("from %s: %s", src, r))
				continue
			}
			if i == 0 {
				first[src] = r.Backend
			} else if r.Backend != first[src] {
				problems = append(problems, fmt.Sprintf("from %s: connection %d went to %s, the first to %s: affinity not kept", src, i+1, r.Backend, first[src]))
			}
		}
	}
	if len(problems) > 0 {
		return problems
	}
	if distinct := slices.Compact(slices.Sorted(maps.Values(first))); len(distinct) < 2 {
		problems = append(problems, fmt.Sprintf("all %d clients went to %v", len(first), distinct))
	}
	time.Sleep(3 * time.Second) // timeoutSeconds 2, plus a margin
	changed := 0
	for _, src := range affinitySources {
		r := Probe(ctx, w.ext, proto, netip.MustParseAddr(src), dst, reachTimeout)
		if r.Outcome != Reached {
			problems = append(problems, fmt.Sprintf("after the timeout, from %s: %s", src, r))
			continue
		}
		if r.Backend != first[src] {
			changed++
		}
	}
	if changed == 0 {
		problems = append(problems, "after the timeout every client still went to its first backend: affinity did not expire")
	}
	return problems
}

// run probes and returns the problems found, and a summary of the
// backends that answered.
func (c flowCase) run(ctx context.Context, w *world, proto string) (problems []string, summary string) {
	if c.custom != nil {
		return c.custom(ctx, w, proto), ""
	}
	ns, src, err := w.client(c.from, c.src)
	if err != nil {
		return []string{err.Error()}, ""
	}
	dst, err := w.dest(c.svc, c.via, c.addr, c.port, proto)
	if err != nil {
		return []string{err.Error()}, ""
	}
	timeout := reachTimeout
	if c.want == TimedOut {
		timeout = dropTimeout
	}
	seen := map[string]int{}
	for range c.n {
		r := Probe(ctx, ns, proto, src, dst, timeout)
		if r.Outcome != c.want {
			problems = append(problems, fmt.Sprintf("%s → %s: want %s, got %s", c.from, dst, c.want, r))
			continue
		}
		if r.Outcome != Reached {
			continue
		}
		seen[r.Backend]++
		if !slices.Contains(c.backends, r.Backend) {
			problems = append(problems, fmt.Sprintf("%s → %s reached %s, want one of %v", c.from, dst, r.Backend, c.backends))
		}
		wantPeer := c.peer
		if wantPeer == "client" {
			wantPeer = src.String()
		}
		if wantPeer != "" && r.Peer.Addr().String() != wantPeer {
			problems = append(problems, fmt.Sprintf("%s → %s: %s saw the connection from %s, want %s", c.from, dst, r.Backend, r.Peer.Addr(), wantPeer))
		}
	}
	if c.spread {
		for _, b := range c.backends {
			if seen[b] == 0 {
				problems = append(problems, fmt.Sprintf("%s → %s: %d probes never reached %s (seen %v)", c.from, dst, c.n, b, seen))
			}
		}
	}
	if len(seen) > 0 {
		summary = fmt.Sprintf("%s → %s: %v", c.from, dst, seen)
	}
	return problems, summary
}

func TestFlows(t *testing.T) {
	requireRoot(t, "nft", "iptables", "iptables-restore", "sysctl")
	for _, mode := range []string{render.ModeNFTables, render.ModeIPTables} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, mode)
			type job struct {
				name, proto string
				c           flowCase
			}
			var jobs []job
			for _, c := range flowCases {
				if c.modes != nil && !slices.Contains(c.modes, mode) {
					continue
				}
				protos := c.protos
				if protos == nil {
					protos = []string{"tcp", "udp"}
				}
				for _, p := range protos {
					jobs = append(jobs, job{c.name + "/" + p, p, c})
				}
			}
			// The cases use disjoint Services or sources, so they run all
			// at once (t.Parallel would be capped by -parallel, which
			// defaults to the number of CPUs); each subtest then reports
			// its own result.
			type result struct {
				problems []string
				summary  string
			}
			results := make([]result, len(jobs))
			var wg sync.WaitGroup
			for i, j := range jobs {
				wg.Go(func() {
					p, s := j.c.run(t.Context(), w, j.proto)
					results[i] = result{p, s}
				})
			}
			wg.Wait()
			for i, j := range jobs {
				t.Run(j.name, func(t *testing.T) {
					if results[i].summary != "" {
						t.Log(results[i].summary)
					}
					for _, p := range results[i].problems {
						t.Error(p)
					}
				})
			}
		})
	}
}
