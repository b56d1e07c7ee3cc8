//go:build linux

package embedded

import (
	"context"
	"errors"
	"fmt"
	"github.com/svclab/svclab/lab/embedded/hostexec"
	"net/netip"
	"os/exec"
	"regexp"
	"strings"
)

func run(ctx context.Context, r hostexec.Runner, name string, args ...string) error {
	_, err := r.Run(ctx, nil, name, args...)
	return err
}

// firewallRuleset is the host nft table that fences a cluster in: nothing
// from its bridge is forwarded anywhere but back onto the bridge, nothing is
// forwarded onto it from elsewhere, and the host accepts from it only replies
// to connections the host opened (the host reaches the API server, the
// cluster does not reach the host).
func firewallRuleset(st *State) string {
	return fmt.Sprintf(`table inet %[1]s {
	comment "svclab: isolate cluster %[2]s"
	chain forward {
		type filter hook forward priority filter - 10; policy accept;
		iifname "%[3]s" oifname "%[3]s" accept
		iifname "%[3]s" counter drop comment "lab traffic never leaves its cluster"
		oifname "%[3]s" counter drop comment "nothing reaches into a lab cluster"
	}
	chain input {
		type filter hook input priority filter - 10; policy accept;
		iifname "%[3]s" ct state established,related accept
		iifname "%[3]s" counter drop comment "lab clusters do not reach the host"
	}
}
`, st.FirewallTable(), st.Name, st.Bridge)
}

// fabricUp creates the cluster's bridge, one network namespace per node with
// a veth to the bridge, and the host firewall table. The nodes get an
// address on the fabric, a route for the Service CIDR and no default route.
// Their network namespaces are owned by the lab's user namespace (pinned
// at userns): root in the lab has every network capability on its nodes.
func fabricUp(ctx context.Context, r hostexec.Runner, st *State, userns string) error {
	if err := run(ctx, r, "ip", "link", "set", st.Bridge, "up"); err != nil {
		return err
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
	for _, n := range st.Nodes {
		if err := r.NewNetns(ctx, userns, n.Netns); err != nil {
			return fmt.Errorf("setting up node %s: %w", n.Name, err)
		}
		cmds := [][]string{
			{"ip", "link", "add", n.HostVeth, "type", "veth", "peer", "name", "eth0", "netns", n.Netns},
			{"ip", "link", "set", n.HostVeth, "master", st.Bridge, "up"},
			{"ip", "-n", n.Netns, "link", "set", "lo", "up"},
			{"ip", "-n", n.Netns, "addr", "add", n.IP + "/" + plen, "dev", "eth0"},
			{"ip", "-n", n.Netns, "link", "set", "eth0", "up"},
			// A route for ClusterIPs, as a kind node's default route
			// gives: without one the kernel refuses a node's own
			// connections to a Service before kube-proxy's output chain
			// can DNAT them (curl <ClusterIP> from a node shell).
			{"ip", "-n", n.Netns, "route", "add", st.ServiceCIDR, "via", st.Gateway},
			{"ip", "netns", "exec", n.Netns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"},
			// The kernel rate-limits the ICMP errors a REJECT rule sends
			// (a burst of 6, then one a second per peer): with the limit
			// a refused connection could look dropped. Lab nodes answer
			// every time, so refused means refused.
			{"ip", "netns", "exec", n.Netns, "sysctl", "-q", "-w", "net.ipv4.icmp_ratelimit=0"},
			// Conntrack entries record when they began (conntrack -L -o
			// ktimestamp), from the node's first connection on: graders
			// tell a table that was flushed from one that was not.
			{"ip", "netns", "exec", n.Netns, "sysctl", "-q", "-w", "net.netfilter.nf_conntrack_timestamp=1"},
		}
		for _, c := range cmds {
			if err := run(ctx, r, c[0], c[1:]...); err != nil {
				return fmt.Errorf("setting up node %s: %w", n.Name, err)
			}
		}
	}
	if lb := st.LB; lb != nil {
		// The load balancer's own namespace is the host's, not the lab's:
		// nothing a learner does in the lab changes where it sends traffic.
		cmds := [][]string{
			{"ip", "netns", "add", lb.Netns},
			{"ip", "link", "add", lb.HostVeth, "type", "veth", "peer", "name", "eth0", "netns", lb.Netns},
			{"ip", "link", "set", lb.HostVeth, "master", st.Bridge, "up"},
			{"ip", "-n", lb.Netns, "link", "set", "lo", "up"},
			{"ip", "-n", lb.Netns, "addr", "add", lb.IP + "/" + plen, "dev", "eth0"},
			{"ip", "-n", lb.Netns, "link", "set", "eth0", "up"},
			// Spread connections over the nodes by their addresses and
			// ports, as a cloud network load balancer hashes them.
			{"ip", "netns", "exec", lb.Netns, "sysctl", "-q", "-w", "net.ipv4.fib_multipath_hash_policy=1"},
		}
		for _, c := range cmds {
			if err := run(ctx, r, c[0], c[1:]...); err != nil {
				return fmt.Errorf("setting up the load balancer: %w", err)
			}
		}
	}
	return nil
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
	if lb := st.LB; lb != nil {
		if err := deleteNetns(ctx, r, lb.Netns); err != nil {
			errs = append(errs, err.Error())
		}
		if err := ignoreMissing(run(ctx, r, "ip", "link", "del", lb.HostVeth)); err != nil {
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
