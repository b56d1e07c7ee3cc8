package embedded

import (
	"fmt"
	"os"
)

// The processes of an embedded cluster besides Kubernetes' own are the
// svclab binary re-executed under these names (argv[0]), each with the
// cluster's state directory as its one argument. lab/roles runs them.
const (
	// SupervisorArg0 is the cluster's supervisor (SupervisorMain).
	SupervisorArg0 = "svclab-supervisor"
	// NodeAgentArg0 is the agents of the cluster's nodes (NodeAgentMain).
	NodeAgentArg0 = "svclab-node-agent"
	// LoadBalancerArg0 is the lab's load balancer (LoadBalancerMain).
	LoadBalancerArg0 = "svclab-load-balancer"
)

// DefaultGOGC is the garbage-collector target of every Go process of a
// cluster: below Go's 100, to keep an idle lab near 400 MiB, but not much
// below, because CPU and not memory limits how many labs a machine runs
// (at GOGC=10 garbage collection was a third of an idle lab API server's
// CPU; 50 costs about 35 MiB more per lab than 10/25 and saves a quarter
// of that CPU).
const DefaultGOGC = 50

// SupervisorMain is the main function of SupervisorArg0: args is the
// cluster's state directory. It returns the exit code.
func SupervisorMain(args []string) int { return roleMain(SupervisorArg0, args, runSupervisor) }

// NodeAgentMain is the main function of NodeAgentArg0: every node's agent
// in one process. args is the cluster's state directory.
func NodeAgentMain(args []string) int { return roleMain(NodeAgentArg0, args, runNodeAgents) }

// LoadBalancerMain is the main function of LoadBalancerArg0. args is the
// cluster's state directory.
func LoadBalancerMain(args []string) int { return roleMain(LoadBalancerArg0, args, runLoadBalancer) }

// roleMain runs a role that takes the cluster's state directory alone.
func roleMain(name string, args []string, run func(dir string) int) int {
	if len(args) != 1 {
		fmt.Fprintf(os.Stderr, "usage: %s CLUSTER-DIR\n", name)
		return 2
	}
	return run(args[0])
}
