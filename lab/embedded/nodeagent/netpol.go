//go:build linux

package nodeagent

import (
	"context"
	"log/slog"

	"k8s.io/client-go/kubernetes"

	"github.com/svclab/svclab/lab/embedded/netpol"
)

// enforceNetworkPolicy runs the node's NetworkPolicy agent (package netpol)
// until ctx ends: it programs the table inet kube-network-policies in the
// node's network namespace, and removes it when the agent stops.
func enforceNetworkPolicy(ctx context.Context, cfg Config, client kubernetes.Interface, log *slog.Logger) {
	log = log.With("component", "kube-network-policies")
	if err := netpol.Run(ctx, client, cfg.NodeName, netpol.NetnsApplier{Netns: cfg.Netns}, cfg.Policy, log); err != nil {
		log.Error("NetworkPolicy enforcement stopped", "err", err)
	}
}
