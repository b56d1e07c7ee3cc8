//go:build linux

package nodeagent

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/svclab/svclab/lab/embedded/netpol"
)

// KubeletPort is the port of the kubelet API on every node.
const KubeletPort = 10250

// Config is what one node's agent needs.
type Config struct {
	NodeName string
	NodeIP   string
	// Netns is the node's network namespace (under /run/netns).
	Netns string
	// Kubeconfig authenticates the agent as system:node:NodeName.
	Kubeconfig string
	// ServingCert and ServingKey are the kubelet endpoint's certificate.
	ServingCert, ServingKey string
	// ClientCA verifies clients of the kubelet endpoint (the API server).
	ClientCA string
	// StateDir holds the node's pods: sandboxes, container bundles, logs.
	StateDir string
	// PodNetnsPrefix starts the names of pod network namespaces.
	PodNetnsPrefix string
	// ClusterDNS and DNSDomain go into pods' resolv.conf.
	ClusterDNS, DNSDomain string
	// NodeContainer is the node's own container, which the agent keeps
	// running; none when its ID is empty.
	NodeContainer NodeContainer
	// ExitsDir is where the cluster's supervisor records the exits of
	// containers whose agent had died (see ReapOrphans).
	ExitsDir string
	// Marker is the environment variable (KEY=VALUE) every process the
	// agent starts carries, so a sweep finds them after a crash.
	Marker string
	// CgroupParent is the cgroup (the same path in every hierarchy) under
	// which each container of the node gets its own, so that removing the
	// cluster removes them all; runc's default when empty.
	CgroupParent string
	// Isolation is the lab's user namespace, which every container of the
	// node joins.
	Isolation Isolation
	// Logs bound each container's log (DefaultLogLimits when zero).
	Logs LogLimits
	// Mounts is the lab's budget of mounts, shared by its nodes' agents;
	// none when nil.
	Mounts *MountBudget
	// Policy receives how far the node's NetworkPolicy agent has got;
	// nobody asks when nil.
	Policy *netpol.Progress
}

// Validate checks cfg.
func (c Config) Validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("node name is empty"))
	}
	if _, err := netip.ParseAddr(c.NodeIP); err != nil {
		errs = append(errs, fmt.Errorf("node IP %q: %w", c.NodeIP, err))
	}
	for name, v := range map[string]string{"netns": c.Netns, "kubeconfig": c.Kubeconfig, "serving certificate": c.ServingCert,
		"serving key": c.ServingKey, "client CA": c.ClientCA, "state directory": c.StateDir, "pod netns prefix": c.PodNetnsPrefix} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is not set", name))
		}
	}
	if err := c.Isolation.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
