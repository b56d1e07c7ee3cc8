package grade

import (
	"context"
	"net"
	"strconv"
)

// clearHalfOpen deletes, before a TCP or HTTP probe, the conntrack entries of
// connection attempts from the probe's source to its target that never got
// an answer (state SYN_SENT), on the nodes where the target's DNAT happens:
// the source's node, and every node when the target is a node address or the
// source is outside the cluster.
//
// Such an entry pins its address and ports to the backend it was DNATed to
// for two minutes (nf_conntrack_tcp_timeout_syn_sent), even after that
// backend is gone. The grader's own earlier attempts leave them — a check of
// the broken lab sends requests to Pods that die under them — and the
// kernel's next pick of the same source port matches one: the connection
// goes to the dead Pod ("network is unreachable") although the rules have
// long moved on, and a fixed lab fails a check now and then for a minute or
// two after the fix. Nothing live uses such an entry (it carries no
// connection), so deleting it changes nothing else a learner sees.
//
// It is best effort: a node it cannot reach only leaves the entries there.
func (g *Grader) clearHalfOpen(ctx context.Context, protocol string, src probeSource, tgt probeTarget) {
	if protocol != "tcp" && protocol != "http" {
		return
	}
	if net.ParseIP(tgt.host) == nil || tgt.port == 0 {
		return // resolved on the node: the address is not known here
	}
	nodes, err := g.Cluster.Nodes(ctx)
	if err != nil {
		g.log().Debug("clearing half-open conntrack entries: listing the nodes", "err", err)
		return
	}
	var on []string
	all := src.outside != nil
	for _, n := range nodes {
		if n.IP == tgt.host {
			all = true
		}
	}
	for _, n := range nodes {
		if all || n.Name == src.nodeName {
			on = append(on, n.Name)
		}
	}
	cmd := []string{"conntrack", "-D", "-p", "tcp", "--state", "SYN_SENT", "--orig-dst", tgt.host, "--orig-port-dst", strconv.Itoa(tgt.port)}
	if src.ip != "" {
		cmd = append(cmd, "--orig-src", src.ip)
	}
	for _, node := range on {
		// conntrack exits 1 when nothing matched: not an error here.
		if _, err := g.nodeOutput(ctx, node, cmd...); err != nil {
			g.log().Debug("clearing half-open conntrack entries", "node", node, "err", err)
		}
	}
}
