//go:build linux

package nodeagent

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// recordingRunner records commands and fails those containing failOn.
type recordingRunner struct {
	cmds   []string
	failOn string
}

// Run records the command, then each line of its input indented.
func (r *recordingRunner) Run(_ context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	cmd := name + " " + strings.Join(args, " ")
	r.cmds = append(r.cmds, cmd)
	if r.failOn != "" && strings.Contains(cmd, r.failOn) {
		return nil, errors.New("RTNETLINK answers: File exists")
	}
	if stdin == nil {
		return nil, nil
	}
	for _, l := range strings.Split(strings.TrimSuffix(string(stdin), "\n"), "\n") {
		r.cmds = append(r.cmds, "  "+l)
		if r.failOn != "" && strings.Contains(l, r.failOn) {
			return nil, errors.New("RTNETLINK answers: File exists")
		}
	}
	return nil, nil
}

func (r *recordingRunner) NewNetns(ctx context.Context, userns, name string) error {
	_, err := r.Run(ctx, nil, "new-netns", name, "--owner", userns)
	return err
}

func TestPodNetworkSetup(t *testing.T) {
	r := &recordingRunner{}
	n := newPodNetwork(r, "svclab-lab-worker", "/lab/userns", "svclab-lab-pod-", t.TempDir())
	if _, _, err := n.setup(context.Background(), "uid-1", "p", ""); !errors.Is(err, errNoPodCIDR) {
		t.Fatalf("setup before the node has a pod CIDR: %v", err)
	}
	n.setCIDR(netip.MustParsePrefix("10.244.1.0/24"))
	netns, ip, err := n.setup(context.Background(), "uid-1", "p", "")
	if err != nil {
		t.Fatal(err)
	}
	wantNS, veth := n.names("uid-1")
	if netns != wantNS || ip != netip.MustParseAddr("10.244.1.2") {
		t.Errorf("netns %s ip %s", netns, ip)
	}
	want := []string{
		// Leftovers of an agent that died go first.
		"ip netns del " + netns,
		"ip -n svclab-lab-worker link del " + veth,
		"new-netns " + netns + " --owner /lab/userns",
		"ip -n svclab-lab-worker -batch -",
		"  link add " + veth + " type veth peer name eth0 netns " + netns,
		"  addr replace 10.244.1.1/32 dev " + veth,
		"  link set " + veth + " up",
		"  route replace 10.244.1.2/32 dev " + veth + " src 10.244.1.1",
		"ip -n " + netns + " -batch -",
		"  link set lo up",
		"  addr add 10.244.1.2/24 dev eth0",
		"  link set eth0 up",
		"  route del 10.244.1.0/24 dev eth0",
		"  route replace 10.244.1.1/32 dev eth0 scope link src 10.244.1.2",
		"  route replace 10.244.1.0/24 via 10.244.1.1 dev eth0 src 10.244.1.2",
		"  route replace default via 10.244.1.1 dev eth0",
	}
	if !slices.Equal(r.cmds, want) {
		t.Errorf("commands:\n%s\nwant\n%s", strings.Join(r.cmds, "\n"), strings.Join(want, "\n"))
	}

	// The next pod gets the next address; the same pod keeps its own.
	_, ip2, _ := n.setup(context.Background(), "uid-2", "q", "")
	_, again, _ := n.setup(context.Background(), "uid-1", "p", "")
	if ip2.String() != "10.244.1.3" || again != ip {
		t.Errorf("second pod %s, first pod again %s", ip2, again)
	}

	// A restarted agent reads the allocations back.
	n2 := newPodNetwork(r, "svclab-lab-worker", "/lab/userns", "svclab-lab-pod-", n.stateDir)
	n2.setCIDR(netip.MustParsePrefix("10.244.1.0/24"))
	if got, _ := n2.allocate("uid-3"); got.String() != "10.244.1.4" {
		t.Errorf("after a restart the next address is %s, want 10.244.1.4", got)
	}

	// Teardown deletes the namespace (and with it the veth pair) and
	// frees the address.
	r.cmds = nil
	if err := n.teardown(context.Background(), "uid-1"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.cmds, []string{"ip netns del " + netns, "ip -n svclab-lab-worker link del " + veth}) {
		t.Errorf("teardown: %v", r.cmds)
	}
	if got, _ := n.allocate("uid-4"); got.String() == "10.244.1.2" {
		t.Errorf("the address freed a moment ago was handed out again at once")
	}
}

func TestPodNetworkSetupFailureCleansUp(t *testing.T) {
	r := &recordingRunner{failOn: "addr add"}
	n := newPodNetwork(r, "node-ns", "/lab/userns", "pod-", t.TempDir())
	n.setCIDR(netip.MustParsePrefix("10.244.2.0/24"))
	_, _, err := n.setup(context.Background(), "uid-1", "p", "")
	if err == nil || !strings.Contains(err.Error(), "setting up the pod network") {
		t.Fatalf("err = %v", err)
	}
	netns, veth := n.names("uid-1")
	if tail := r.cmds[len(r.cmds)-2:]; !slices.Equal(tail, []string{"ip netns del " + netns, "ip -n node-ns link del " + veth}) {
		t.Errorf("a failed setup ends with %q, want the namespace and veth removed", tail)
	}
	if len(n.used) != 0 {
		t.Errorf("the failed pod's address was not released: %v", n.used)
	}
}

func TestRoutesFor(t *testing.T) {
	got := routesFor("lab-worker", map[string]nodeRoute{
		"lab-control-plane": {cidr: "10.244.0.0/24", ip: "172.29.1.2"},
		"lab-worker":        {cidr: "10.244.1.0/24", ip: "172.29.1.3"},
		"lab-worker2":       {cidr: "10.244.2.0/24", ip: "172.29.1.4"},
		"lab-worker3":       {cidr: "", ip: "172.29.1.5"}, // no CIDR yet
	})
	want := []string{"10.244.0.0/24 via 172.29.1.2", "10.244.2.0/24 via 172.29.1.4"}
	if !slices.Equal(got, want) {
		t.Errorf("routes %v, want %v", got, want)
	}
}

func TestHostPorts(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Ports: []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8081}, {ContainerPort: 9090}}},
		{Ports: []corev1.ContainerPort{{ContainerPort: 53, HostPort: 5353, Protocol: corev1.ProtocolUDP, HostIP: "0.0.0.0"}}},
		{Ports: []corev1.ContainerPort{{ContainerPort: 9000, HostPort: 9001, HostIP: "172.29.1.3"}}},
	}}}
	ports := hostPortsOf(pod)
	if want := []hostPort{{proto: "tcp", port: 8081, podPort: 8080}, {proto: "udp", port: 5353, podPort: 53}, {proto: "tcp", port: 9001, podPort: 9000, hostIP: "172.29.1.3"}}; !slices.Equal(ports, want) {
		t.Fatalf("hostPortsOf = %v, want %v", ports, want)
	}
	r := &recordingRunner{}
	n := newPodNetwork(r, "node-ns", "/lab/userns", "pod-", t.TempDir())
	ip := netip.MustParseAddr("10.244.1.5")
	if err := n.setHostPorts(context.Background(), "uid-1", ip, ports); err != nil {
		t.Fatal(err)
	}
	const nft = "ip netns exec node-ns nft "
	want := []string{
		"add table ip svclab-hostports",
		"add map ip svclab-hostports hostports { type inet_proto . inet_service : ipv4_addr . inet_service ; }",
		"add map ip svclab-hostports hostports-addr { type ipv4_addr . inet_proto . inet_service : ipv4_addr . inet_service ; }",
		"add chain ip svclab-hostports prerouting { type nat hook prerouting priority dstnat ; }",
		"add chain ip svclab-hostports output { type nat hook output priority -100 ; }", // dstnat is prerouting's only
		"flush map ip svclab-hostports hostports",                                       // an earlier agent's elements
		"flush map ip svclab-hostports hostports-addr",
		"flush chain ip svclab-hostports prerouting",
		"flush chain ip svclab-hostports output",
		// An address's own ports before every address's.
		"add rule ip svclab-hostports prerouting fib daddr type local dnat ip to ip daddr . meta l4proto . th dport map @hostports-addr",
		"add rule ip svclab-hostports prerouting fib daddr type local dnat ip to meta l4proto . th dport map @hostports",
		"add rule ip svclab-hostports output fib daddr type local dnat ip to ip daddr . meta l4proto . th dport map @hostports-addr",
		"add rule ip svclab-hostports output fib daddr type local dnat ip to meta l4proto . th dport map @hostports",
		"add element ip svclab-hostports hostports { tcp . 8081 : 10.244.1.5 . 8080 }",
		"add element ip svclab-hostports hostports { udp . 5353 : 10.244.1.5 . 53 }",
		"add element ip svclab-hostports hostports-addr { 172.29.1.3 . tcp . 9001 : 10.244.1.5 . 9000 }",
	}
	for i := range want {
		want[i] = nft + want[i]
	}
	if !slices.Equal(r.cmds, want) {
		t.Errorf("commands:\n%s\nwant\n%s", strings.Join(r.cmds, "\n"), strings.Join(want, "\n"))
	}
	// The table is set up once; the next pod only adds its element.
	r.cmds = nil
	n.setHostPorts(context.Background(), "uid-2", netip.MustParseAddr("10.244.1.6"), []hostPort{{proto: "tcp", port: 80, podPort: 80}})
	if len(r.cmds) != 1 {
		t.Errorf("second pod: %v", r.cmds)
	}
	// Teardown withdraws exactly the pod's elements.
	r.cmds = nil
	n.teardown(context.Background(), "uid-1")
	want = []string{nft + "delete element ip svclab-hostports hostports { tcp . 8081 }", nft + "delete element ip svclab-hostports hostports { udp . 5353 }",
		nft + "delete element ip svclab-hostports hostports-addr { 172.29.1.3 . tcp . 9001 }"}
	if len(r.cmds) < 3 || !slices.Equal(r.cmds[:3], want) {
		t.Errorf("teardown: %v", r.cmds)
	}
}

func TestPodNetworkSweep(t *testing.T) {
	dir := t.TempDir()
	first := newPodNetwork(&recordingRunner{}, "node-ns", "/lab/userns", "pod-", dir)
	first.setCIDR(netip.MustParsePrefix("10.244.1.0/24"))
	first.setup(context.Background(), "uid-a", "a", "")
	first.setup(context.Background(), "uid-b", "b", "")
	first.setup(context.Background(), "uid-k", "k", "")

	// The agent dies; the next one adopts uid-k and sweeps what the
	// other pods left.
	r := &recordingRunner{}
	next := newPodNetwork(r, "node-ns", "/lab/userns", "pod-", dir)
	next.sweepExcept(context.Background(), map[string]bool{"uid-k": true})
	var want []string
	for _, uid := range []string{"uid-a", "uid-b"} {
		netns, veth := next.names(uid)
		want = append(want, "ip netns del "+netns, "ip -n node-ns link del "+veth)
	}
	got := slices.Clone(r.cmds)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("sweep:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	next.setCIDR(netip.MustParsePrefix("10.244.1.0/24"))
	if ip, _ := next.allocate("uid-k"); ip.String() != "10.244.1.4" {
		t.Errorf("the adopted pod's address is %s, want 10.244.1.4 kept", ip)
	}
	// The swept pods' addresses are free, but allocation goes on after
	// the last one handed out.
	if len(next.used) != 1 {
		t.Errorf("after the sweep %v are allocated, want uid-k's only", next.used)
	}
	if ip, _ := next.allocate("uid-c"); ip.String() != "10.244.1.5" {
		t.Errorf("after the sweep the next address is %s, want 10.244.1.5", ip)
	}
}

// Addresses go round: a new pod gets the first free address after the one
// allocated last, wrapping around at the end of the CIDR, across agent
// restarts (as host-local's last_reserved_ip).
func TestPodAddressesRoundRobin(t *testing.T) {
	dir := t.TempDir()
	cidr := netip.MustParsePrefix("10.244.3.0/29") // .2 to .6 for pods
	n := newPodNetwork(&recordingRunner{}, "node-ns", "/lab/userns", "pod-", dir)
	n.setCIDR(cidr)
	alloc := func(n *podNetwork, uid string) string {
		t.Helper()
		ip, err := n.allocate(uid)
		if err != nil {
			return err.Error()
		}
		return ip.String()
	}
	for _, step := range []struct {
		release []string
		uid     string
		want    string
	}{
		{nil, "a", "10.244.3.2"},
		{nil, "b", "10.244.3.3"},
		{[]string{"a"}, "c", "10.244.3.4"}, // not a's .2, freed a moment ago
		{nil, "c", "10.244.3.4"},           // a pod keeps its address
		{[]string{"b"}, "d", "10.244.3.5"},
		{nil, "e", "10.244.3.6"},
		{nil, "f", "10.244.3.2"}, // wraps around past the broadcast address
		{nil, "g", "10.244.3.3"},
		{nil, "h", "no free pod address left in 10.244.3.0/29"},
		{[]string{"d"}, "h", "10.244.3.5"},
	} {
		for _, uid := range step.release {
			if err := n.release(uid); err != nil {
				t.Fatal(err)
			}
		}
		if got := alloc(n, step.uid); got != step.want {
			t.Fatalf("allocate(%s) after releasing %v = %s, want %s", step.uid, step.release, got, step.want)
		}
	}

	// A restarted agent goes on after the last address: .5 was last.
	n.release("e")
	n.release("f")
	next := newPodNetwork(&recordingRunner{}, "node-ns", "/lab/userns", "pod-", dir)
	next.setCIDR(cidr)
	if got := alloc(next, "i"); got != "10.244.3.6" {
		t.Errorf("after a restart the next address is %s, want 10.244.3.6", got)
	}

	// A last address outside a new CIDR is forgotten.
	other := newPodNetwork(&recordingRunner{}, "node-ns", "/lab/userns", "pod-", dir)
	other.setCIDR(netip.MustParsePrefix("10.244.9.0/24"))
	if got := alloc(other, "j"); got != "10.244.9.2" {
		t.Errorf("in a new CIDR the first address is %s, want 10.244.9.2", got)
	}
}

// hostPorts conflict as the kubelet decides: the same protocol and port
// on the same address, or on any address when either is 0.0.0.0.
func TestHostPortConflicts(t *testing.T) {
	for _, tc := range []struct {
		a, b hostPort
		want bool
	}{
		{hostPort{proto: "tcp", port: 80}, hostPort{proto: "tcp", port: 80}, true},
		{hostPort{proto: "tcp", port: 80}, hostPort{proto: "udp", port: 80}, false},
		{hostPort{proto: "tcp", port: 80}, hostPort{proto: "tcp", port: 81}, false},
		{hostPort{proto: "tcp", port: 80, hostIP: "127.0.0.1"}, hostPort{proto: "tcp", port: 80, hostIP: "172.29.1.3"}, false},
		{hostPort{proto: "tcp", port: 80, hostIP: "127.0.0.1"}, hostPort{proto: "tcp", port: 80, hostIP: "127.0.0.1"}, true},
		{hostPort{proto: "tcp", port: 80}, hostPort{proto: "tcp", port: 80, hostIP: "172.29.1.3"}, true}, // 0.0.0.0 overlaps every address
		{hostPort{proto: "tcp", port: 80, hostIP: "172.29.1.3"}, hostPort{proto: "udp", port: 80, hostIP: "172.29.1.3"}, false},
	} {
		if got := tc.a.conflicts(tc.b); got != tc.want || tc.b.conflicts(tc.a) != tc.want {
			t.Errorf("%+v vs %+v: conflict %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
