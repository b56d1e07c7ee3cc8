package session

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"

	"github.com/svclab/svclab/lab/cluster"
)

// prepareNodes turns off ICMP rate limiting on every node and makes sure
// every node routes the Service CIDR. kube-proxy
// DNATs a node's own connections to ClusterIPs in the output path, after
// the kernel picked a route for the ClusterIP; a node without a default
// route (the embedded backend's nodes have none, by design) cannot even
// start such a connection ("Network is unreachable"), so node-to-ClusterIP
// traffic — and DNS from a node — would fail for reasons no scenario
// intends. Where the route is missing, it adds one for the Service CIDR
// through the node's fabric interface; kind's nodes have a default route
// and are left alone.
func prepareNodes(ctx context.Context, c cluster.Cluster, log *slog.Logger) error {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return err
	}
	probe := firstAddr(cluster.DefaultServiceCIDR)
	for _, n := range nodes {
		// The kernel rate-limits the ICMP errors that a REJECT rule sends
		// (a burst of 6, then one a second per peer), so of 20 probes
		// to a Service without endpoints most would seem dropped; turn
		// the limit off so that refused means refused.
		var errOut bytes.Buffer
		if err := c.NodeExec(ctx, n.Name, []string{"sysctl", "-q", "-w", "net.ipv4.icmp_ratelimit=0"}, cluster.Stdio{Stderr: &errOut}); err != nil {
			return fmt.Errorf("turning off ICMP rate limiting on node %s: %w: %s", n.Name, err, strings.TrimSpace(errOut.String()))
		}
		if c.NodeExec(ctx, n.Name, []string{"ip", "route", "get", probe}, cluster.Stdio{}) == nil {
			continue
		}
		var out bytes.Buffer
		if err := c.NodeExec(ctx, n.Name, []string{"ip", "-o", "-4", "addr", "show"}, cluster.Stdio{Stdout: &out}); err != nil {
			return fmt.Errorf("listing the addresses of node %s: %w", n.Name, err)
		}
		dev := ""
		for _, line := range strings.Split(out.String(), "\n") {
			f := strings.Fields(line)
			if len(f) >= 4 && f[2] == "inet" && strings.HasPrefix(f[3], n.IP+"/") {
				dev = f[1]
			}
		}
		if dev == "" {
			return fmt.Errorf("node %s has no interface with its address %s", n.Name, n.IP)
		}
		errOut.Reset()
		if err := c.NodeExec(ctx, n.Name, []string{"ip", "route", "replace", cluster.DefaultServiceCIDR, "dev", dev, "src", n.IP}, cluster.Stdio{Stderr: &errOut}); err != nil {
			return fmt.Errorf("adding a route to the Service CIDR %s on node %s: %w: %s", cluster.DefaultServiceCIDR, n.Name, err, strings.TrimSpace(errOut.String()))
		}
		log.Info("node had no route to the Service CIDR; added one", "node", n.Name, "cidr", cluster.DefaultServiceCIDR, "dev", dev)
	}
	return nil
}

// firstAddr is the first host address of a CIDR (the kubernetes Service's
// ClusterIP).
func firstAddr(cidr string) string {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return cidr
	}
	return p.Masked().Addr().Next().String()
}
