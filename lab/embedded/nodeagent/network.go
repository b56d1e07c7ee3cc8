//go:build linux

package nodeagent

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/embedded/hostexec"
)

// podNetwork gives pods network namespaces on the node, kindnet-style: each
// pod has eth0 with an address from the node's pod CIDR and a default route
// to the node; the node has a /32 route per pod over the pod's veth, whose
// node end holds the CIDR's first address as the gateway.
type podNetwork struct {
	run    hostexec.Runner
	nodeNS string
	// userns is the lab's user namespace, which owns the pods' network
	// namespaces: root in a pod may change its own network, as on a node.
	userns   string
	prefix   string
	stateDir string

	mu   sync.Mutex
	cidr netip.Prefix
	// used maps allocated addresses to pod UIDs; persisted so a restarted
	// agent does not hand out an address twice.
	used map[netip.Addr]string
	// last is the address allocated last (persisted too): the next
	// allocation starts after it, as the host-local IPAM plugin's
	// last_reserved_ip does, so a new Pod does not get the address of a
	// Pod deleted a moment ago (EndpointSlices and conntrack entries that
	// still name the old Pod would point at the new one).
	last netip.Addr
	// hostPorts holds each pod's elements of the hostport maps, as
	// "MAP ELEMENT".
	hostPorts      map[string][]string
	hostPortsReady bool
}

func newPodNetwork(r hostexec.Runner, nodeNS, userns, prefix, stateDir string) *podNetwork {
	return &podNetwork{run: r, nodeNS: nodeNS, userns: userns, prefix: prefix, stateDir: stateDir, used: map[netip.Addr]string{}, hostPorts: map[string][]string{}}
}

var errNoPodCIDR = errors.New("the node has no pod CIDR yet")

// setCIDR records the node's pod CIDR (from Node.spec.podCIDR) and loads
// the allocations of a previous run.
func (n *podNetwork) setCIDR(cidr netip.Prefix) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cidr == cidr {
		return nil
	}
	n.cidr = cidr
	if b, err := os.ReadFile(n.lastFile()); err == nil {
		if a, err := netip.ParseAddr(strings.TrimSpace(string(b))); err == nil && cidr.Contains(a) {
			n.last = a
		}
	}
	b, err := os.ReadFile(n.ipamFile())
	if err != nil {
		return nil
	}
	var saved map[string]string
	if json.Unmarshal(b, &saved) != nil {
		return nil
	}
	for ip, uid := range saved {
		if a, err := netip.ParseAddr(ip); err == nil && cidr.Contains(a) {
			n.used[a] = uid
		}
	}
	return nil
}

func (n *podNetwork) ipamFile() string { return filepath.Join(n.stateDir, "ipam.json") }

// lastFile holds the last allocated address (host-local's
// last_reserved_ip).
func (n *podNetwork) lastFile() string { return filepath.Join(n.stateDir, "last_reserved_ip") }

func (n *podNetwork) saveLocked() error {
	m := map[string]string{}
	for ip, uid := range n.used {
		m[ip.String()] = uid
	}
	b, _ := json.Marshal(m)
	t := stateTree{dir: n.stateDir}
	if err := t.replaceFile(filepath.Base(n.ipamFile()), b, 0o644); err != nil {
		return err
	}
	if n.last.IsValid() {
		return t.replaceFile(filepath.Base(n.lastFile()), []byte(n.last.String()+"\n"), 0o644)
	}
	return nil
}

// gateway is the CIDR's first address.
func (n *podNetwork) gateway() netip.Addr { return n.cidr.Masked().Addr().Next() }

// allocate returns uid's address, allocating the first free one after the
// address allocated last (round-robin, wrapping around at the end of the
// CIDR).
func (n *podNetwork) allocate(uid string) (netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.cidr.IsValid() {
		return netip.Addr{}, errNoPodCIDR
	}
	for ip, u := range n.used {
		if u == uid {
			return ip, nil
		}
	}
	// .0 is the network, .1 the gateway; the last is the broadcast.
	first := n.gateway().Next()
	usable := func(ip netip.Addr) bool {
		return n.cidr.Contains(ip) && n.cidr.Contains(ip.Next()) && first.Compare(ip) <= 0
	}
	start := first
	if n.last.IsValid() && usable(n.last.Next()) {
		start = n.last.Next()
	}
	ip := start
	for {
		if _, taken := n.used[ip]; !taken && usable(ip) {
			n.used[ip], n.last = uid, ip
			return ip, n.saveLocked()
		}
		if ip = ip.Next(); !usable(ip) {
			ip = first
		}
		if ip == start || !usable(ip) {
			return netip.Addr{}, fmt.Errorf("no free pod address left in %s", n.cidr)
		}
	}
}

func (n *podNetwork) release(uid string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ip, u := range n.used {
		if u == uid {
			delete(n.used, ip)
		}
	}
	return n.saveLocked()
}

// names derives the pod's namespace and veth names from its UID.
func (n *podNetwork) names(uid string) (netns, hostVeth string) {
	sum := sha256.Sum256([]byte(uid))
	h := hex.EncodeToString(sum[:])
	return PodNetnsName(n.prefix, uid), "veth" + h[:8]
}

// PodNetnsName is the network namespace (under /run/netns) of the Pod
// with uid, whose names start with prefix (Config.PodNetnsPrefix).
func PodNetnsName(prefix, uid string) string {
	sum := sha256.Sum256([]byte(uid))
	return prefix + hex.EncodeToString(sum[:])[:10]
}

// setup creates the pod's network namespace, owned by the user namespace
// pinned at owner (the lab's, or the pod's own), and wires it to the node.
func (n *podNetwork) setup(ctx context.Context, uid, hostname, owner string) (netns string, ip netip.Addr, err error) {
	ip, err = n.allocate(uid)
	if err != nil {
		return "", ip, err
	}
	netns, veth := n.names(uid)
	defer func() {
		if err != nil {
			n.teardown(context.WithoutCancel(ctx), uid)
		}
	}()
	// Leftovers of this pod from an agent that died (the namespace, or
	// the node's end of a veth whose namespace lives on in a process)
	// would make the commands below fail: start clean.
	n.removeLinks(ctx, uid)
	bits := fmt.Sprint(n.cidr.Bits())
	gw := n.gateway().String()
	// Three commands, not a dozen: a node starting many pods at once
	// spends its time forking ip otherwise.
	node := []string{
		"link add " + veth + " type veth peer name eth0 netns " + netns,
		"addr replace " + gw + "/32 dev " + veth,
		"link set " + veth + " up",
		"route replace " + ip.String() + "/32 dev " + veth + " src " + gw,
	}
	pod := []string{
		"link set lo up",
		"addr add " + ip.String() + "/" + bits + " dev eth0",
		"link set eth0 up",
		// As the CNI ptp plugin (kindnet) does: the pod's subnet is
		// reached through the node, not on-link.
		"route del " + n.cidr.Masked().String() + " dev eth0",
		"route replace " + gw + "/32 dev eth0 scope link src " + ip.String(),
		"route replace " + n.cidr.Masked().String() + " via " + gw + " dev eth0 src " + ip.String(),
		"route replace default via " + gw + " dev eth0",
	}
	if owner == "" {
		owner = n.userns
	}
	if err := n.run.NewNetns(ctx, owner, netns); err != nil {
		return "", ip, fmt.Errorf("setting up the pod network: %w", err)
	}
	for _, b := range []struct {
		ns    string
		lines []string
	}{{n.nodeNS, node}, {netns, pod}} {
		if _, err := n.run.Run(ctx, []byte(strings.Join(b.lines, "\n")+"\n"), "ip", "-n", b.ns, "-batch", "-"); err != nil {
			return "", ip, fmt.Errorf("setting up the pod network: %w", err)
		}
	}
	return netns, ip, nil
}

// hostPortTable is the node's nft table (family ip) for pods' hostPorts,
// as the CNI portmap plugin does it: traffic to the node's own addresses
// on a hostPort is DNATed to the pod.
const hostPortTable = "svclab-hostports"

// hostPort is one container port published on the node.
type hostPort struct {
	proto         string // tcp, udp, sctp
	port, podPort int32
	// hostIP is the node address the port is published on; "" means
	// every address (0.0.0.0, as the kubelet reads an empty hostIP).
	hostIP string
}

// conflicts says whether two hostPorts cannot both be published, by the
// kubelet's rule (the scheduler's NodePorts: HostPortInfo.CheckConflict):
// the same protocol and port on the same address, or on any address when
// either is 0.0.0.0.
func (h hostPort) conflicts(o hostPort) bool {
	return h.proto == o.proto && h.port == o.port && (h.hostIP == "" || o.hostIP == "" || h.hostIP == o.hostIP)
}

// on says where h is published, for messages: "0.0.0.0" or the address.
func (h hostPort) on() string { return cmp.Or(h.hostIP, "0.0.0.0") }

// hostPortsOf returns the hostPorts pod's containers ask for.
func hostPortsOf(pod *corev1.Pod) []hostPort {
	var out []hostPort
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort == 0 {
				continue
			}
			proto := strings.ToLower(string(p.Protocol))
			if proto == "" {
				proto = "tcp"
			}
			hostIP := p.HostIP
			if hostIP == "0.0.0.0" {
				hostIP = ""
			}
			out = append(out, hostPort{proto: proto, port: p.HostPort, podPort: p.ContainerPort, hostIP: hostIP})
		}
	}
	return out
}

func (n *podNetwork) nft(ctx context.Context, args ...string) error {
	_, err := n.run.Run(ctx, nil, "ip", append([]string{"netns", "exec", n.nodeNS, "nft"}, args...)...)
	return err
}

// setHostPorts publishes ports of the pod uid (at ip) on the node.
func (n *podNetwork) setHostPorts(ctx context.Context, uid string, ip netip.Addr, ports []hostPort) error {
	if len(ports) == 0 {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.hostPortsReady {
		for _, cmd := range [][]string{
			{"add", "table", "ip", hostPortTable},
			{"add", "map", "ip", hostPortTable, "hostports", "{ type inet_proto . inet_service : ipv4_addr . inet_service ; }"},
			// hostPorts on one node address (a hostIP).
			{"add", "map", "ip", hostPortTable, "hostports-addr", "{ type ipv4_addr . inet_proto . inet_service : ipv4_addr . inet_service ; }"},
			{"add", "chain", "ip", hostPortTable, "prerouting", "{ type nat hook prerouting priority dstnat ; }"},
			{"add", "chain", "ip", hostPortTable, "output", "{ type nat hook output priority -100 ; }"},
			{"flush", "map", "ip", hostPortTable, "hostports"}, // an earlier agent's
			{"flush", "map", "ip", hostPortTable, "hostports-addr"},
			{"flush", "chain", "ip", hostPortTable, "prerouting"},
			{"flush", "chain", "ip", hostPortTable, "output"},
			// A lookup that finds nothing ends its rule, not the chain:
			// an address's own ports first, then every address's.
			{"add", "rule", "ip", hostPortTable, "prerouting", "fib daddr type local dnat ip to ip daddr . meta l4proto . th dport map @hostports-addr"},
			{"add", "rule", "ip", hostPortTable, "prerouting", "fib daddr type local dnat ip to meta l4proto . th dport map @hostports"},
			{"add", "rule", "ip", hostPortTable, "output", "fib daddr type local dnat ip to ip daddr . meta l4proto . th dport map @hostports-addr"},
			{"add", "rule", "ip", hostPortTable, "output", "fib daddr type local dnat ip to meta l4proto . th dport map @hostports"},
		} {
			if err := n.nft(ctx, cmd...); err != nil {
				return fmt.Errorf("setting up hostPorts: %w", err)
			}
		}
		n.hostPortsReady = true
	}
	for _, p := range ports {
		// nft parses the element: only what validatePod lets through
		// goes into it.
		if p.proto != "tcp" && p.proto != "udp" && p.proto != "sctp" || p.port < 1 || p.port > 65535 || p.podPort < 1 || p.podPort > 65535 {
			return fmt.Errorf("publishing hostPort %d/%s: not a port the lab's nodes publish", p.port, p.proto)
		}
		set, elem := "hostports", fmt.Sprintf("%s . %d : %s . %d", p.proto, p.port, ip, p.podPort)
		if p.hostIP != "" {
			addr, err := netip.ParseAddr(p.hostIP)
			if err != nil || !addr.Is4() {
				return fmt.Errorf("publishing hostPort %d/%s on %s: the lab's nodes have IPv4 addresses only", p.port, p.proto, p.hostIP)
			}
			set, elem = "hostports-addr", fmt.Sprintf("%s . %s . %d : %s . %d", addr, p.proto, p.port, ip, p.podPort)
		}
		if err := n.nft(ctx, "add", "element", "ip", hostPortTable, set, "{ "+elem+" }"); err != nil {
			return fmt.Errorf("publishing hostPort %d/%s on %s: %w", p.port, p.proto, p.on(), err)
		}
		n.hostPorts[uid] = append(n.hostPorts[uid], set+" "+elem)
	}
	return nil
}

// clearHostPorts withdraws the pod's hostPorts.
func (n *podNetwork) clearHostPorts(ctx context.Context, uid string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, rec := range n.hostPorts[uid] {
		set, elem, _ := strings.Cut(rec, " ")
		key, _, _ := strings.Cut(elem, " : ")
		n.nft(ctx, "delete", "element", "ip", hostPortTable, set, "{ "+key+" }")
	}
	delete(n.hostPorts, uid)
}

// teardown removes the pod's namespace (and with it the veth pair) and
// releases its address and hostPorts. Missing pieces are not errors.
func (n *podNetwork) teardown(ctx context.Context, uid string) error {
	n.clearHostPorts(ctx, uid)
	if err := n.removeLinks(ctx, uid); err != nil {
		return err
	}
	return n.release(uid)
}

// removeLinks deletes the pod's namespace and the node's end of its veth,
// where they exist.
func (n *podNetwork) removeLinks(ctx context.Context, uid string) error {
	netns, veth := n.names(uid)
	if _, err := n.run.Run(ctx, nil, "ip", "netns", "del", netns); err != nil && !isMissing(err) {
		return err
	}
	if _, err := n.run.Run(ctx, nil, "ip", "-n", n.nodeNS, "link", "del", veth); err != nil && !isMissing(err) {
		return err
	}
	return nil
}

// sweepExcept removes what pods of an earlier run of the agent left
// (their namespaces and veths) and forgets their addresses, but for the
// pods in keep, which the agent adopts.
func (n *podNetwork) sweepExcept(ctx context.Context, keep map[string]bool) {
	b, err := os.ReadFile(n.ipamFile())
	if err != nil {
		return
	}
	var saved map[string]string
	if json.Unmarshal(b, &saved) != nil {
		os.Remove(n.ipamFile())
		return
	}
	for ip, uid := range saved {
		if !keep[uid] {
			n.removeLinks(ctx, uid)
			delete(saved, ip)
		}
	}
	b, _ = json.Marshal(saved)
	stateTree{dir: n.stateDir}.replaceFile(filepath.Base(n.ipamFile()), b, 0o644)
}

func isMissing(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "No such file") || strings.Contains(msg, "Cannot find device") || strings.Contains(msg, "does not exist") ||
		strings.Contains(msg, "No such device")
}

// routesFor computes the node's routes to the other nodes' pod CIDRs.
// A Node's CIDR and address go to ip as arguments: only a prefix and an
// address that parse do, as the parser writes them.
func routesFor(self string, nodes map[string]nodeRoute) []string {
	var out []string
	for name, r := range nodes {
		if name == self || r.cidr == "" || r.ip == "" {
			continue
		}
		cidr, err := netip.ParsePrefix(r.cidr)
		if err != nil {
			continue
		}
		ip, err := netip.ParseAddr(r.ip)
		if err != nil || ip.Zone() != "" {
			continue
		}
		out = append(out, cidr.Masked().String()+" via "+ip.String())
	}
	sort.Strings(out)
	return out
}

type nodeRoute struct{ cidr, ip string }
