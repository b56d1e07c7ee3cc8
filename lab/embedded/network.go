//go:build linux

package embedded

import (
	"context"
	"fmt"
	"github.com/svclab/svclab/lab/embedded/hostexec"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

func run(ctx context.Context, r hostexec.Runner, name string, args ...string) error {
	_, err := r.Run(ctx, nil, name, args...)
	return err
}

// The fabric of a cluster is a bridge in a network namespace of its own
// (State.FabricNetns), owned by the host: the nodes', the control plane's
// and the load balancer's veths are its ports. The host is not on it. The
// bridge's frames never meet the host's netfilter (br_netfilter is off in
// that namespace, and its stack there has one address, the nodes' gateway
// to Services, which answers nothing), so a lab can neither plant entries
// in the host's conntrack nor fill it, nor make the host answer it. The
// host reaches the API server, and nothing else, over a veth of its own
// to the control plane's namespace (State.Bridge on the host, its address
// the gateway's): that namespace does not forward.

// hostRuleset is the host's nft table of a cluster: its link to the
// control plane carries replies to the host's connections and nothing
// else, and the host forwards nothing to it or from it.
func hostRuleset(st *State) string {
	return fmt.Sprintf(`table inet %[1]s {
	comment "svclab: the host's link to the control plane of cluster %[2]s"
	chain input {
		type filter hook input priority filter - 10; policy accept;
		iifname "%[3]s" ct state established,related accept comment "replies to the host's connections to the API server"
		iifname "%[3]s" counter drop comment "the control plane opens nothing on the host"
	}
	chain forward {
		type filter hook forward priority filter - 10; policy accept;
		iifname "%[3]s" counter drop comment "lab traffic never leaves its cluster"
		oifname "%[3]s" counter drop comment "nothing reaches into a lab cluster"
	}
}
`, st.FirewallTable(), st.Name, st.Bridge)
}

// fabricRuleset is the nft tables of the fabric's own namespace. The
// bridge table: each port sends from the MAC address svclab gave its far
// end only, so that the bridge learns one address per port however many a
// node makes up; no node speaks ARP for the addresses of svclab's (the
// gateway's, the API server's, the load balancer's), sends IPv4 from them,
// or sends IPv4 for them anywhere but to their own MAC address; a node
// sends unicast frames to the lab's own MAC addresses only; the fabric is
// IPv4 and ARP only. The arp table: the fabric's stack learns neighbours
// among the lab's own addresses only and answers for the gateway only.
// The inet table: the gateway takes nothing in and sends nothing out, not
// even an ICMP error for a packet's options or TTL; br_netfilter, should
// it be turned on in the namespace, would find no rule that stops bridged
// traffic (those frames are not for the gateway's MAC address and take
// neither input nor output).
func fabricRuleset(st *State) string {
	var ports, nodes, labAddrs, ownMAC []string
	labMACs := []string{st.mac(st.Gateway)}
	for _, p := range fabricPorts(st) {
		labMACs = append(labMACs, p.mac)
		ports = append(ports, fmt.Sprintf("\t\tiifname %q ether saddr != %s counter drop comment \"not this port's MAC address\"\n", p.veth, p.mac)+
			fmt.Sprintf("\t\tiifname %q arp saddr ether != %s counter drop comment \"ARP for a MAC address not this port's\"\n", p.veth, p.mac))
		labAddrs = append(labAddrs, p.ip)
	}
	for _, n := range st.Nodes {
		nodes = append(nodes, strconv.Quote(n.HostVeth))
	}
	own := []string{st.Gateway, st.API.IP}
	if st.LB != nil {
		own = append(own, st.LB.IP)
	}
	for _, ip := range own {
		ownMAC = append(ownMAC, ip+" . "+st.mac(ip))
	}
	set := func(elems []string) string { return "{ " + strings.Join(elems, ", ") + " }" }
	return fmt.Sprintf(`table bridge svclab {
	comment "svclab: each port of cluster %[1]s sends from its own MAC address"
	chain prerouting {
		type filter hook prerouting priority filter; policy accept;
%[2]s		iifname %[3]s ether daddr & 01:00:00:00:00:00 == 00:00:00:00:00:00 ether daddr != %[4]s counter drop comment "unicast to the lab's own MAC addresses only"
		iifname %[3]s ether type != { ip, arp } counter drop comment "plain IPv4 and ARP only: no VLAN tags, no IPv6"
		iifname %[3]s arp saddr ip %[5]s counter drop comment "no node speaks for svclab's addresses"
		iifname %[3]s ip saddr %[5]s counter drop comment "no node sends from svclab's addresses"
		iifname %[3]s ip daddr %[5]s ip daddr . ether daddr != %[6]s counter drop comment "svclab's addresses are reached at their own MAC addresses only"
	}
}
table arp svclab {
	comment "svclab: the gateway learns the addresses of cluster %[1]s only"
	chain input {
		type filter hook input priority filter; policy accept;
		arp saddr ip != %[7]s counter drop comment "not an address of the lab's"
		arp daddr ip != %[8]s counter drop comment "the gateway speaks for its own address only"
	}
}
table inet svclab {
	comment "svclab: the gateway of cluster %[1]s answers nothing"
	chain prerouting {
		type filter hook prerouting priority raw; policy accept;
		ether daddr %[9]s counter drop comment "not even an ICMP error for its options or TTL"
	}
	chain input {
		type filter hook input priority filter; policy drop;
	}
	chain output {
		type filter hook output priority filter; policy drop;
	}
}
`, st.Name, strings.Join(ports, ""), set(nodes), set(labMACs), set(own), set(ownMAC), set(labAddrs), st.Gateway, st.mac(st.Gateway))
}

// fabricPort is one port of a cluster's bridge: the host end of a veth,
// and the MAC and IPv4 addresses of its far end.
type fabricPort struct{ veth, mac, ip string }

// fabricPorts are the ports of st's bridge: its nodes', its control
// plane's and its load balancer's.
func fabricPorts(st *State) []fabricPort {
	var out []fabricPort
	for _, n := range st.Nodes {
		out = append(out, fabricPort{n.HostVeth, st.mac(n.IP), n.IP})
	}
	out = append(out, fabricPort{st.API.HostVeth, st.mac(st.API.IP), st.API.IP})
	if lb := st.LB; lb != nil {
		out = append(out, fabricPort{lb.HostVeth, st.mac(lb.IP), lb.IP})
	}
	return out
}

// mac is the MAC address svclab gives the interface with address ip on
// st's fabric (the bridge's own for the gateway): locally administered,
// from the fabric index and the address's last byte, so that the bridge
// table knows each port's.
func (st *State) mac(ip string) string {
	a := netip.MustParseAddr(ip).As4()
	return fmt.Sprintf("02:73:6c:%02x:00:%02x", st.Index, a[3])
}

// edgeRuleset is the nft tables of svclab's own namespaces on the fabric:
// the control plane's (api) and the load balancer's. They take no packet
// with IP options, no fragment and no ICMP redirect, so that nothing a
// node forges is answered with an ICMP error or reroutes them; they learn
// neighbours on the fabric's subnet only and answer ARP for their own
// address only (the kernel's neighbour table is every namespace's); they
// take in replies to their own connections (a ClusterIP answers from its
// own address) and, from the lab's addresses (the fabric's subnet, the
// Pods'), the API server's port, which keeps no connection state (a flood
// of SYNs fills no table) — nothing else: a new packet they drop leaves
// no connection behind, and nothing of the control plane but the API
// server listens beyond its loopback.
func edgeRuleset(st *State, api bool) string {
	own, port := st.LB.IP, ""
	if api {
		own, port = st.API.IP, fmt.Sprint(apiserverPort)
	}
	var stateless, output, open string
	if api {
		stateless = fmt.Sprintf("\t\ttcp dport %s notrack comment \"the API server's port keeps no connection state\"\n", port)
		output = fmt.Sprintf(`	chain raw-output {
		type filter hook output priority raw; policy accept;
		tcp sport %s notrack
	}
`, port)
		open = fmt.Sprintf("\t\ttcp dport %s accept\n\t\ticmp type echo-request accept\n", port)
	}
	return fmt.Sprintf(`table inet svclab {
	comment "svclab: the lab reaches %[1]s and nothing else of svclab's"
	chain raw-prerouting {
		type filter hook prerouting priority raw; policy accept;
		iifname "eth0" ip hdrlength != 5 counter drop comment "no IP options: no error for a broken one"
		iifname "eth0" ip frag-off & 0x3fff != 0 counter drop comment "no fragments: nothing to reassemble, no error for a lost one"
		iifname "eth0" icmp type redirect counter drop comment "no node reroutes svclab's traffic"
%[4]s	}
%[5]s	chain input {
		type filter hook input priority filter; policy accept;
		iifname "lo" accept
		ct state established,related accept comment "replies to this namespace's own connections (a ClusterIP's among them)"
		iifname "eth0" ip saddr != { %[2]s, %[3]s } counter drop comment "new packets from the lab's addresses only"
%[6]s		counter drop comment "nothing else is open to the lab"
	}
}
table arp svclab {
	comment "svclab: learns the fabric's addresses only, answers for its own"
	chain input {
		type filter hook input priority filter; policy accept;
		arp saddr ip != %[2]s counter drop comment "not an address of the fabric's"
		arp daddr ip != %[7]s counter drop comment "not this namespace's address"
	}
}
`, map[bool]string{true: "its API server's port", false: "nothing of its load balancer"}[api], st.Subnet, st.PodCIDR, stateless, output, open, own)
}

// fabricUp makes the cluster's fabric: its namespace and bridge, one
// network namespace per node with a veth to the bridge, the control
// plane's and the load balancer's namespaces, the host's link to the
// control plane (State.Bridge, made by createBridge) and the nft tables.
// The nodes get an address on the fabric, a route for the Service CIDR and
// no default route. Their network namespaces are owned by the lab's user
// namespace (pinned at userns): root in the lab has every network
// capability on its nodes. The fabric's, the control plane's and the load
// balancer's are the host's.
func fabricUp(ctx context.Context, r hostexec.Runner, st *State, userns string) error {
	fab := st.FabricNetns()
	prefix := netip.MustParsePrefix(st.Subnet)
	plen := fmt.Sprint(prefix.Bits())
	// sysctl -e: a host without br_netfilter or IPv6 has nothing to turn
	// off. br_netfilter is loaded first where it can be, so that loading
	// it later (Docker does) cannot turn it on for this namespace. A new
	// namespace takes the host's IPv4 settings (Docker turns forwarding
	// on): svclab's namespaces forward nothing, take and send no ICMP
	// redirects (a node would reroute their traffic), and have no IPv6.
	quiet := func(netns string, settings ...string) []string {
		return append([]string{"ip", "netns", "exec", netns, "sysctl", "-q", "-e", "-w", "net.ipv4.ip_forward=0",
			"net.ipv4.conf.all.accept_redirects=0", "net.ipv4.conf.default.accept_redirects=0",
			"net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.default.send_redirects=0",
			"net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"}, settings...)
	}
	r.Run(ctx, nil, "modprobe", "-q", "br_netfilter")
	cmds := [][]string{
		{"ip", "netns", "add", fab},
		quiet(fab, "net.bridge.bridge-nf-call-iptables=0", "net.bridge.bridge-nf-call-ip6tables=0", "net.bridge.bridge-nf-call-arptables=0"),
		// No multicast snooping: the bridge floods multicast as a plain
		// switch does, and keeps no group table a node could fill.
		{"ip", "-n", fab, "link", "add", st.Bridge, "address", st.mac(st.Gateway), "type", "bridge", "mcast_snooping", "0"},
		{"ip", "-n", fab, "addr", "add", st.Gateway + "/" + plen, "dev", st.Bridge},
		{"ip", "-n", fab, "link", "set", st.Bridge, "up"},
	}
	for _, c := range cmds {
		if err := run(ctx, r, c[0], c[1:]...); err != nil {
			return fmt.Errorf("setting up the cluster's fabric: %w", err)
		}
	}
	if _, err := r.Run(ctx, []byte(fabricRuleset(st)), "ip", "netns", "exec", fab, "nft", "-f", "-"); err != nil {
		return fmt.Errorf("installing the fabric's firewall tables: %w", err)
	}
	// veth links netns to the bridge: its port there port, far end eth0
	// with address ip and svclab's MAC address for it.
	veth := func(netns, port, ip string) [][]string {
		return [][]string{
			{"ip", "-n", fab, "link", "add", port, "type", "veth", "peer", "name", "eth0", "address", st.mac(ip), "netns", netns},
			{"ip", "-n", fab, "link", "set", port, "master", st.Bridge, "up"},
			{"ip", "-n", netns, "link", "set", "lo", "up"},
			{"ip", "-n", netns, "addr", "add", ip + "/" + plen, "dev", "eth0"},
			{"ip", "-n", netns, "link", "set", "eth0", "up"},
		}
	}
	for _, n := range st.Nodes {
		if err := r.NewNetns(ctx, userns, n.Netns); err != nil {
			return fmt.Errorf("setting up node %s: %w", n.Name, err)
		}
		cmds := append(veth(n.Netns, n.HostVeth, n.IP),
			// A route for ClusterIPs, as a kind node's default route
			// gives: without one the kernel refuses a node's own
			// connections to a Service before kube-proxy's output chain
			// can DNAT them (curl <ClusterIP> from a node shell).
			[]string{"ip", "-n", n.Netns, "route", "add", st.ServiceCIDR, "via", st.Gateway},
			[]string{"ip", "netns", "exec", n.Netns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"},
			// The kernel rate-limits the ICMP errors a REJECT rule sends
			// (a burst of 6, then one a second per peer): with the limit
			// a refused connection could look dropped. Lab nodes answer
			// every time, so refused means refused.
			[]string{"ip", "netns", "exec", n.Netns, "sysctl", "-q", "-w", "net.ipv4.icmp_ratelimit=0"},
			// Conntrack entries record when they began (conntrack -L -o
			// ktimestamp), from the node's first connection on: graders
			// tell a table that was flushed from one that was not.
			[]string{"ip", "netns", "exec", n.Netns, "sysctl", "-q", "-w", "net.netfilter.nf_conntrack_timestamp=1"},
		)
		for _, c := range cmds {
			if err := run(ctx, r, c[0], c[1:]...); err != nil {
				return fmt.Errorf("setting up node %s: %w", n.Name, err)
			}
		}
	}
	// The control plane: the API server reaches the nodes on the fabric,
	// the Pods through their nodes (podRoutes adds a route per node's Pod
	// CIDR) and Services through the control-plane node's kube-proxy, as a
	// kubeadm API server on that node would. The host reaches it over its
	// own link, from the gateway's address; the namespace does not
	// forward between the two.
	api := st.API
	up := hostUplink(st.Index)
	cmds = append([][]string{{"ip", "netns", "add", api.Netns}, quiet(api.Netns)},
		veth(api.Netns, api.HostVeth, api.IP)...)
	cmds = append(cmds,
		[]string{"ip", "-n", api.Netns, "route", "add", st.ServiceCIDR, "via", st.ControlPlane().IP},
		[]string{"sysctl", "-q", "-e", "-w", "net.ipv6.conf." + st.Bridge + ".disable_ipv6=1"},
		[]string{"ip", "link", "set", up, "netns", api.Netns},
		[]string{"ip", "-n", api.Netns, "link", "set", up, "up"},
		[]string{"ip", "-n", api.Netns, "route", "add", st.Gateway + "/32", "dev", up},
		[]string{"ip", "addr", "add", st.Gateway + "/32", "dev", st.Bridge},
		[]string{"ip", "link", "set", st.Bridge, "up"},
		[]string{"ip", "route", "add", api.IP + "/32", "dev", st.Bridge, "src", st.Gateway},
	)
	for _, c := range cmds {
		if err := run(ctx, r, c[0], c[1:]...); err != nil {
			return fmt.Errorf("setting up the control plane's network: %w", err)
		}
	}
	if _, err := r.Run(ctx, []byte(edgeRuleset(st, true)), "ip", "netns", "exec", api.Netns, "nft", "-f", "-"); err != nil {
		return fmt.Errorf("installing the control plane's firewall table: %w", err)
	}
	if _, err := r.Run(ctx, []byte(hostRuleset(st)), "nft", "-f", "-"); err != nil {
		return fmt.Errorf("installing the host firewall table: %w", err)
	}
	if lb := st.LB; lb != nil {
		// The load balancer's own namespace is the host's, not the lab's:
		// nothing a learner does in the lab changes where it sends traffic.
		cmds := append([][]string{{"ip", "netns", "add", lb.Netns}, quiet(lb.Netns)},
			veth(lb.Netns, lb.HostVeth, lb.IP)...)
		// Spread connections over the nodes by their addresses and
		// ports, as a cloud network load balancer hashes them.
		cmds = append(cmds, []string{"ip", "netns", "exec", lb.Netns, "sysctl", "-q", "-w", "net.ipv4.fib_multipath_hash_policy=1"})
		for _, c := range cmds {
			if err := run(ctx, r, c[0], c[1:]...); err != nil {
				return fmt.Errorf("setting up the load balancer: %w", err)
			}
		}
		if _, err := r.Run(ctx, []byte(edgeRuleset(st, false)), "ip", "netns", "exec", lb.Netns, "nft", "-f", "-"); err != nil {
			return fmt.Errorf("installing the load balancer's firewall tables: %w", err)
		}
	}
	return pinNeighbours(ctx, r, st)
}

// hostUplink is the control plane's end of the host's link to it (the
// host's is State.Bridge), made on the host by createBridge and moved
// into the control plane's namespace by fabricUp.
func hostUplink(index int) string { return fmt.Sprintf("svl%d-cp", index) }

// pinNeighbours writes the lab's addresses and their MAC addresses into
// the neighbour tables of svclab's ends of the fabric, for good (nud
// permanent): the gateway's, the control plane's and the load
// balancer's. An ARP claim a node manages to send past the bridge's rules
// then changes nothing of where svclab's own traffic goes.
func pinNeighbours(ctx context.Context, r hostexec.Runner, st *State) error {
	var cmds [][]string
	pin := func(netns, dev, ip string) {
		cmds = append(cmds, []string{"ip", "-n", netns, "neigh", "replace", ip, "lladdr", st.mac(ip), "dev", dev, "nud", "permanent"})
	}
	ports := fabricPorts(st)
	for _, p := range ports {
		pin(st.FabricNetns(), st.Bridge, p.ip)
	}
	for _, ns := range []string{st.API.Netns, lbNetns(st)} {
		if ns == "" {
			continue
		}
		pin(ns, "eth0", st.Gateway)
		for _, p := range ports {
			if p.veth != st.API.HostVeth && (st.LB == nil || p.veth != st.LB.HostVeth) {
				pin(ns, "eth0", p.ip)
			}
		}
	}
	for _, c := range cmds {
		if err := run(ctx, r, c[0], c[1:]...); err != nil {
			return fmt.Errorf("pinning the fabric's neighbours: %w", err)
		}
	}
	return nil
}

// lbNetns is the load balancer's network namespace ("" for a cluster made
// before labs had one).
func lbNetns(st *State) string {
	if st.LB == nil {
		return ""
	}
	return st.LB.Netns
}

// createBridge claims the lowest free fabric index by creating the host's
// link to the cluster's control plane, svlbr<index> (creating a link is
// atomic, so concurrent creates cannot collide), and returns the index.
// Indexes whose subnet overlaps a host route are skipped: the host's route
// to the API server would take that route's traffic.
func createBridge(ctx context.Context, r hostexec.Runner) (int, error) {
	routes, err := r.Run(ctx, nil, "ip", "-4", "-o", "route", "show", "table", "all")
	if err != nil {
		return 0, err
	}
	used := routePrefixes(string(routes))
	for i := 1; i <= maxIndex; i++ {
		subnet := netip.MustParsePrefix(fmt.Sprintf("%s.%d.0/24", fabricBase, i))
		if overlapsAny(subnet, used) {
			continue
		}
		_, err := r.Run(ctx, nil, "ip", "link", "add", fmt.Sprintf("%s%d", bridgePrefix, i), "type", "veth", "peer", "name", hostUplink(i))
		if err == nil {
			return i, nil
		}
		if !strings.Contains(err.Error(), "exists") {
			return 0, fmt.Errorf("creating the host's link to the cluster: %w", err)
		}
	}
	return 0, fmt.Errorf("no free network for a new cluster: all %d fabric subnets in %s.0.0/16 are in use (delete clusters with 'svclab cluster delete')", maxIndex, fabricBase)
}

var routeDst = regexp.MustCompile(`^(?:(?:unicast|local|broadcast|blackhole|unreachable|prohibit|throw)\s+)?(\S+)`)

// routePrefixes parses `ip -4 -o route show` output into the prefixes it
// routes, skipping default routes and svclab's own bridges.
func routePrefixes(out string) []netip.Prefix {
	var ps []netip.Prefix
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.Contains(line, " dev "+bridgePrefix) {
			continue
		}
		m := routeDst.FindStringSubmatch(line)
		if m == nil || m[1] == "default" {
			continue
		}
		dst := m[1]
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if p, err := netip.ParsePrefix(dst); err == nil {
			ps = append(ps, p.Masked())
		}
	}
	return ps
}

func overlapsAny(p netip.Prefix, ps []netip.Prefix) bool {
	for _, q := range ps {
		if q.Bits() == 0 {
			continue
		}
		if p.Overlaps(q) {
			return true
		}
	}
	return false
}

// fabricDown removes what fabricUp and createBridge made. It is idempotent:
// missing pieces are not errors. Deleting a namespace also deletes the
// veths it holds, and with them their far ends: the fabric's takes the
// bridge and its ports, the control plane's the host's link to it.
func fabricDown(ctx context.Context, r hostexec.Runner, st *State) error {
	var errs []string
	netns := []string{}
	for _, n := range st.Nodes {
		netns = append(netns, n.Netns)
	}
	if api := st.API; api != nil {
		netns = append(netns, api.Netns)
	}
	if lb := st.LB; lb != nil {
		netns = append(netns, lb.Netns)
	}
	if st.Name != "" {
		netns = append(netns, st.FabricNetns())
	}
	for _, ns := range netns {
		if err := deleteNetns(ctx, r, ns); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if st.Bridge != "" {
		if err := ignoreMissing(run(ctx, r, "ip", "link", "del", st.Bridge)); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if err := ignoreMissing(run(ctx, r, "nft", "delete", "table", "inet", st.FirewallTable())); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("removing the cluster network: %s", strings.Join(errs, "; "))
	}
	return nil
}

func deleteNetns(ctx context.Context, r hostexec.Runner, name string) error {
	return ignoreMissing(run(ctx, r, "ip", "netns", "del", name))
}

// ignoreMissing turns "does not exist" errors of ip and nft into nil.
func ignoreMissing(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, s := range []string{"Cannot find device", "No such device", "No such file or directory", "does not exist", "Cannot open network namespace"} {
		if strings.Contains(msg, s) {
			return nil
		}
	}
	return err
}
