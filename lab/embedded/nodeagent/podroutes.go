//go:build linux

package nodeagent

import (
	"context"
	"log/slog"
	"net/netip"

	"k8s.io/client-go/kubernetes"

	"github.com/svclab/svclab/lab/embedded/hostexec"
)

// PodRoutes keeps, in the network namespace netns (under /run/netns), a
// route to every node's Pod CIDR via that node, until ctx ends: what each
// node's agent keeps in its node, for a namespace that is no node — the
// control plane's, so that the API server reaches Pods and answers those
// that reach it, as a managed control plane routed to its nodes does.
// That namespace is svclab's, and a Node object is the lab's to make up:
// only Nodes allow accepts (the cluster's own, at their own addresses,
// with a Pod CIDR from the cluster's range) are routed, so that no Node a
// learner creates steers the control plane's traffic (a default route, the
// host's address, the host's resolver).
func PodRoutes(ctx context.Context, client kubernetes.Interface, netns string, allow func(node string, ip netip.Addr, cidr netip.Prefix) bool, log *slog.Logger) {
	(&routeSync{cfg: Config{Netns: netns}, runner: hostexec.Exec{}, log: log, allow: allow}).watch(ctx, client)
}
