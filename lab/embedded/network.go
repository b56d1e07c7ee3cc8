//go:build linux

package embedded

import (
	"context"
	"errors"
	"fmt"
	"github.com/svclab/svclab/lab/embedded/hostexec"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

func run(ctx context.Context, r hostexec.Runner, name string, args ...string) error {
	_, err := r.Run(ctx, nil, name, args...)
	return err
}

// firewallRuleset is the host's nft tables that fence a cluster in. The
// inet table: nothing from its bridge is forwarded anywhere but back onto
// the bridge, nothing is forwarded onto it from elsewhere, and the host
// accepts from it only replies to connections the host opened (the host
// reaches the API server, the cluster does not reach the host). The
// host's connection tracking sees only the host's own traffic with the lab:
// traffic between the lab's machines (bridged, which br_netfilter would
// hand to the host's conntrack) is not tracked, so that a lab can neither
// fill the host's table nor plant entries in it, and what is tracked is in
// a conntrack zone of the lab's own, apart from the host's and other
// labs' connections. A reply counts only when the connection it answers
// came from the gateway's address, which no node may send from; anything
// else for the gateway's MAC address is dropped before routing, where the
// kernel would answer bad IP options or an expired TTL with an ICMP error
// to whatever source the lab forged (another lab, the internet). The
// bridge table: each port sends from the MAC address svclab gave its far
// end only, so that the bridge learns one address per port however many a
// node makes up; no node speaks ARP for the addresses of svclab's (the
// host's, the API server's, the load balancer's), sends IPv4 from them, or
// sends IPv4 for them anywhere but to their own MAC address; a node sends
// unicast frames to the lab's own MAC addresses only (the bridge hands a
// frame for a host port's MAC to the host, which would answer it for any
// of its addresses; svclab's own ports send only to neighbours whose ARP
// the bridge checked, which are the lab's); the fabric is IPv4 only, and no port sends IPv4
// fragments (the host reassembles bridged fragments in one store for every
// lab). The arp table: the host learns neighbours among the lab's own
// addresses only and answers for its address on the bridge only.
func firewallRuleset(st *State) string {
	var ports, nodes, labAddrs, ownMAC []string
	var all []string
	labMACs := []string{st.mac(st.Gateway)}
	for _, p := range fabricPorts(st) {
		all = append(all, strconv.Quote(p.veth))
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
	return fmt.Sprintf(`table inet %[1]s {
	comment "svclab: isolate cluster %[2]s"
	chain raw-prerouting {
		type filter hook prerouting priority raw; policy accept;
		iifname "%[3]s" ip daddr %[8]s ether daddr %[11]s ct zone set %[9]d accept comment "the lab's packets for the host meet only the host's connections to this lab"
		iifname "%[3]s" notrack comment "the lab's traffic among its machines is not the host's to track"
	}
	chain raw-output {
		type filter hook output priority raw; policy accept;
		oifname "%[3]s" ct zone set %[9]d
	}
	chain prerouting {
		type filter hook prerouting priority -150; policy accept;
		iifname "%[3]s" ether daddr %[11]s ct direction reply ct original ip saddr %[8]s accept
		iifname "%[3]s" ether daddr %[11]s counter drop comment "the host answers the lab nothing, not even an ICMP error for its options or TTL"
	}
	chain forward {
		type filter hook forward priority filter - 10; policy accept;
		iifname "%[3]s" oifname "%[3]s" accept
		iifname "%[3]s" counter drop comment "lab traffic never leaves its cluster"
		oifname "%[3]s" counter drop comment "nothing reaches into a lab cluster"
	}
	chain input {
		type filter hook input priority filter - 10; policy accept;
		iifname "%[3]s" ct direction reply ct original ip saddr %[8]s accept comment "replies to the host's connections"
		iifname "%[3]s" counter drop comment "lab clusters do not reach the host"
	}
}
table bridge %[1]s {
	comment "svclab: each port of cluster %[2]s sends from its own MAC address"
	chain prerouting {
		type filter hook prerouting priority filter; policy accept;
%[4]s		iifname %[5]s ether daddr & 01:00:00:00:00:00 == 00:00:00:00:00:00 ether daddr != %[13]s counter drop comment "unicast to the lab's own MAC addresses only: a host port's would hand the frame to the host"
		iifname %[5]s ether type != { ip, arp } counter drop comment "plain IPv4 and ARP only: no VLAN tags, no IPv6"
		iifname %[12]s ip frag-off & 0x3fff != 0 counter drop comment "no IPv4 fragments: the host's reassembly store is every lab's"
		iifname %[5]s arp saddr ip %[6]s counter drop comment "no node speaks for svclab's addresses"
		iifname %[5]s ip saddr %[6]s counter drop comment "no node sends from svclab's addresses"
		iifname %[5]s ip daddr %[6]s ip daddr . ether daddr != %[10]s counter drop comment "svclab's addresses are reached at their own MAC addresses only"
	}
}
table arp %[1]s {
	comment "svclab: the host learns the addresses of cluster %[2]s only"
	chain input {
		type filter hook input priority filter; policy accept;
		iifname "%[3]s" arp saddr ip != %[7]s counter drop comment "not an address of the lab's"
		iifname "%[3]s" arp daddr ip != %[8]s counter drop comment "the host speaks for its address on the bridge only"
	}
}
`, st.FirewallTable(), st.Name, st.Bridge, strings.Join(ports, ""), set(nodes), set(own), set(labAddrs), st.Gateway, st.ConntrackZone(), set(ownMAC), st.mac(st.Gateway), set(all), set(labMACs))
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

// apiRuleset is the nft table of the control plane's own network
// namespace: the lab reaches the API server's port (and may ping it),
// nothing else; loopback, where the other components listen, is the
// control plane's.
func apiRuleset() string {
	return fmt.Sprintf(`table inet svclab {
	comment "svclab: the lab reaches its API server and nothing else of its control plane"
	chain input {
		type filter hook input priority filter; policy accept;
		iifname "lo" accept
		ct state established,related accept
		tcp dport %d accept
		icmp type echo-request accept
		counter drop comment "only the API server's port is open to the lab"
	}
}
`, apiserverPort)
}

// fabricUp creates the cluster's bridge, one network namespace per node with
// a veth to the bridge, the control plane's and the load balancer's
// namespaces, and the host firewall tables. The nodes get an address on
// the fabric, a route for the Service CIDR and no default route. Their
// network namespaces are owned by the lab's user namespace (pinned at
// userns): root in the lab has every network capability on its nodes. The
// control plane's and the load balancer's are the host's.
func fabricUp(ctx context.Context, r hostexec.Runner, st *State, userns string) error {
	if err := run(ctx, r, "ip", "link", "set", st.Bridge, "address", st.mac(st.Gateway), "up"); err != nil {
		return err
	}
	// The host has no IPv6 on the fabric: no address, no neighbours (on
	// a host without IPv6 there is nothing to turn off).
	if _, err := os.Stat("/proc/sys/net/ipv6"); err == nil {
		if err := run(ctx, r, "sysctl", "-q", "-w", "net.ipv6.conf."+st.Bridge+".disable_ipv6=1"); err != nil {
			return err
		}
	}
	prefix := netip.MustParsePrefix(st.Subnet)
	plen := fmt.Sprint(prefix.Bits())
	if err := run(ctx, r, "ip", "addr", "add", st.Gateway+"/"+plen, "dev", st.Bridge); err != nil {
		return err
	}
	if _, err := r.Run(ctx, []byte(firewallRuleset(st)), "nft", "-f", "-"); err != nil {
		return fmt.Errorf("installing the host firewall table: %w", err)
	}
	if err := acceptBridged(ctx, r, st); err != nil {
		return err
	}
	// veth links netns to the bridge: host end hostVeth, far end eth0
	// with address ip and svclab's MAC address for it.
	veth := func(netns, hostVeth, ip string) [][]string {
		return [][]string{
			{"ip", "link", "add", hostVeth, "type", "veth", "peer", "name", "eth0", "address", st.mac(ip), "netns", netns},
			{"ip", "link", "set", hostVeth, "master", st.Bridge, "up"},
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
	// kubeadm API server on that node would.
	api := st.API
	cmds := append([][]string{{"ip", "netns", "add", api.Netns}}, veth(api.Netns, api.HostVeth, api.IP)...)
	cmds = append(cmds, []string{"ip", "-n", api.Netns, "route", "add", st.ServiceCIDR, "via", st.ControlPlane().IP})
	for _, c := range cmds {
		if err := run(ctx, r, c[0], c[1:]...); err != nil {
			return fmt.Errorf("setting up the control plane's network: %w", err)
		}
	}
	if _, err := r.Run(ctx, []byte(apiRuleset()), "ip", "netns", "exec", api.Netns, "nft", "-f", "-"); err != nil {
		return fmt.Errorf("installing the control plane's firewall table: %w", err)
	}
	if lb := st.LB; lb != nil {
		// The load balancer's own namespace is the host's, not the lab's:
		// nothing a learner does in the lab changes where it sends traffic.
		cmds := append([][]string{{"ip", "netns", "add", lb.Netns}}, veth(lb.Netns, lb.HostVeth, lb.IP)...)
		// Spread connections over the nodes by their addresses and
		// ports, as a cloud network load balancer hashes them.
		cmds = append(cmds, []string{"ip", "netns", "exec", lb.Netns, "sysctl", "-q", "-w", "net.ipv4.fib_multipath_hash_policy=1"})
		for _, c := range cmds {
			if err := run(ctx, r, c[0], c[1:]...); err != nil {
				return fmt.Errorf("setting up the load balancer: %w", err)
			}
		}
	}
	return pinNeighbours(ctx, r, st)
}

// pinNeighbours writes the lab's addresses and their MAC addresses into
// the neighbour tables of svclab's ends of the fabric, for good (nud
// permanent): the host's on the bridge, the control plane's and the load
// balancer's. An ARP claim a node manages to send past the bridge's rules
// then changes nothing of where svclab's own traffic goes.
func pinNeighbours(ctx context.Context, r hostexec.Runner, st *State) error {
	var cmds [][]string
	pin := func(netns, dev, ip string) {
		c := []string{"ip"}
		if netns != "" {
			c = append(c, "-n", netns)
		}
		cmds = append(cmds, append(c, "neigh", "replace", ip, "lladdr", st.mac(ip), "dev", dev, "nud", "permanent"))
	}
	ports := fabricPorts(st)
	for _, p := range ports {
		pin("", st.Bridge, p.ip)
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

// createBridge claims the lowest free fabric index by creating its bridge
// (creating a link is atomic, so concurrent creates cannot collide) and
// returns the index. Indexes whose subnet overlaps a host route are skipped.
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
		_, err := r.Run(ctx, nil, "ip", "link", "add", fmt.Sprintf("%s%d", bridgePrefix, i), "type", "bridge")
		if err == nil {
			return i, nil
		}
		if !strings.Contains(err.Error(), "exists") {
			return 0, fmt.Errorf("creating the cluster bridge: %w", err)
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

// firewallFamilies are the nft families of a cluster's host tables
// (firewallRuleset).
var firewallFamilies = []string{"inet", "bridge", "arp"}

// fabricDown removes what fabricUp and createBridge made. It is idempotent:
// missing pieces are not errors. Deleting a node's namespace also deletes
// its veth pair.
func fabricDown(ctx context.Context, r hostexec.Runner, st *State) error {
	var errs []string
	for _, n := range st.Nodes {
		if err := deleteNetns(ctx, r, n.Netns); err != nil {
			errs = append(errs, err.Error())
		}
		if n.HostVeth == "" {
			continue
		}
		if err := ignoreMissing(run(ctx, r, "ip", "link", "del", n.HostVeth)); err != nil {
			errs = append(errs, err.Error())
		}
	}
	var own []struct{ netns, veth string }
	if api := st.API; api != nil {
		own = append(own, struct{ netns, veth string }{api.Netns, api.HostVeth})
	}
	if lb := st.LB; lb != nil {
		own = append(own, struct{ netns, veth string }{lb.Netns, lb.HostVeth})
	}
	for _, o := range own {
		if err := deleteNetns(ctx, r, o.netns); err != nil {
			errs = append(errs, err.Error())
		}
		if o.veth == "" {
			continue
		}
		if err := ignoreMissing(run(ctx, r, "ip", "link", "del", o.veth)); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if st.Bridge != "" {
		if err := ignoreMissing(run(ctx, r, "ip", "link", "del", st.Bridge)); err != nil {
			errs = append(errs, err.Error())
		}
	}
	for _, family := range firewallFamilies {
		if err := ignoreMissing(run(ctx, r, "nft", "delete", "table", family, st.FirewallTable())); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if err := dropBridgedAccept(ctx, r, st.Name); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("removing the cluster network: %s", strings.Join(errs, "; "))
	}
	return nil
}

// acceptBridged lets the cluster's traffic between its nodes through the
// host's iptables FORWARD chain, as libvirt and kind's Docker networks
// do: with br_netfilter (bridge-nf-call-iptables) bridged frames pass
// FORWARD, and Docker, once started, sets its policy to DROP — which
// would cut every node off from the others. The rule names the cluster
// (comment svclab-NAME) so that fabricDown and sweeps find it. A host
// without iptables needs none.
func acceptBridged(ctx context.Context, r hostexec.Runner, st *State) error {
	rule := []string{"FORWARD", "-i", st.Bridge, "-o", st.Bridge, "-m", "comment", "--comment", st.FirewallTable(), "-j", "ACCEPT"}
	if _, err := r.Run(ctx, nil, "iptables", append([]string{"-w", "-C"}, rule...)...); err == nil {
		return nil
	}
	if _, err := r.Run(ctx, nil, "iptables", append([]string{"-w", "-I"}, rule...)...); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil // no iptables: no FORWARD chain to let it through
		}
		return fmt.Errorf("letting the cluster's bridged traffic through the host's FORWARD chain: %w", err)
	}
	return nil
}

// dropBridgedAccept removes what acceptBridged added for cluster name.
func dropBridgedAccept(ctx context.Context, r hostexec.Runner, name string) error {
	out, err := r.Run(ctx, nil, "iptables", "-w", "-S", "FORWARD")
	if err != nil {
		return nil // no filter table: nothing was added
	}
	var errs []string
	for _, rule := range bridgedAccepts(string(out), firewallTablePrefix+name) {
		args := append([]string{"-w", "-D"}, strings.Fields(strings.TrimPrefix(rule, "-A "))...)
		if _, err := r.Run(ctx, nil, "iptables", args...); err != nil && !strings.Contains(err.Error(), "does a matching rule exist") {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// bridgedAccepts picks the FORWARD rules with comment (or, for "", any
// svclab comment) out of iptables -S.
func bridgedAccepts(out, comment string) []string {
	var rules []string
	for _, line := range strings.Split(out, "\n") {
		i := strings.Index(line, "--comment ")
		if !strings.HasPrefix(line, "-A FORWARD ") || i < 0 {
			continue
		}
		f := strings.Fields(line[i+len("--comment "):])
		if len(f) == 0 {
			continue
		}
		c := strings.Trim(f[0], `"`)
		if c == comment || comment == "" && strings.HasPrefix(c, firewallTablePrefix) {
			rules = append(rules, line)
		}
	}
	return rules
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
