package faults

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/scenario"
)

// Fault is one fault of the library: its declaration (name, parameters)
// and how to inject it into a running cluster. Inject returns once the
// fault is in effect in the API or on the node; the workloads it disturbs
// may still be rolling out.
type Fault interface {
	scenario.FaultKind
	Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error
}

// Reverter is a fault that can be undone without the scenario's setup
// manifests: the dataplane faults, whose kernel or proxier state would
// otherwise outlive the scenario on a reused cluster.
type Reverter interface {
	Revert(ctx context.Context, c cluster.Cluster, p scenario.Params) error
}

// Settler is a fault that takes effect some time after its injection,
// through the workloads it disturbs (a capped conntrack table fills as
// Pods connect). Settle waits until it has, so that the learner, and the
// grader's record of the broken state, find the cluster broken.
type Settler interface {
	Settle(ctx context.Context, c cluster.Cluster, p scenario.Params) error
}

// Library returns every implemented fault.
func Library() []Fault {
	return []Fault{
		// API level.
		selectorTypo{spec("selector-typo")},
		targetPortMismatch{spec("targetport-mismatch")},
		portNameMismatch{spec("port-name-mismatch")},
		failingReadinessProbe{spec("failing-readiness-probe")},
		abruptShutdown{spec("abrupt-shutdown")},
		scaleDeployment{spec("scale-deployment")},
		scaleToZero{spec("scale-to-zero")},
		etpLocalSingleNode{spec("etp-local-single-node")},
		itpLocalNoLocalReplica{spec("itp-local-no-local-replica")},
		trafficDistribution{spec("traffic-distribution")},
		sessionAffinitySNAT{spec("session-affinity-snat")},
		labelClientBackend{spec("label-client-backend")},
		statefulSetNotReadyPeers{spec("statefulset-not-ready-peers")},
		headlessConfusion{spec("headless-clusterip-confusion")},
		externalName{spec("external-name")},
		trafficPolicy{spec("traffic-policy")},
		topologyModeAnnotationFault{spec("topology-mode-annotation")},
		stuckRollout{spec("stuck-rollout")},
		rolloutRestart{spec("rollout-restart")},
		defaultDeny{spec("default-deny-networkpolicy")},
		networkPolicyAndOr{spec("networkpolicy-and-or")},
		nodeMarkedForDeletion{spec("node-marked-for-deletion")},
		// Dataplane level.
		proxierStuck{spec("proxier-stuck")},
		proxierDead{spec("proxier-dead")},
		staleUDPConntrackDNS{spec("stale-udp-conntrack-dns")},
		ruleDeleted{spec("rule-deleted")},
		ipForwardOff{spec("ip-forward-off")},
		nodePortPrimaryIPOnly{spec("nodeport-primary-ip-only")},
		conntrackTableSmall{spec("conntrack-table-small")},
		hairpin{spec("hairpin")},
		kubeProxyConfig{spec("kube-proxy-config")},
		outsideRoute{spec("outside-route")},
	}
}

// spec returns the declaration of the fault named name. A name missing from
// scenario.FaultSpecs gives a spec with that name and no parameters, which
// TestLibraryMatchesDeclarations reports.
func spec(name string) scenario.FaultSpec {
	for _, s := range scenario.FaultSpecs {
		if s.FaultName == name {
			return s
		}
	}
	return scenario.FaultSpec{FaultName: name}
}

// Registry returns a registry of every declared fault, with the
// implementations of Library registered over the declarations.
func Registry() *scenario.Registry {
	r := scenario.DefaultFaults()
	for _, f := range Library() {
		r.Register(f)
	}
	return r
}

// ErrNotImplemented is returned by Lookup for a fault that scenario.yaml may
// name but the library cannot inject yet.
var ErrNotImplemented = errors.New("declared but not implemented by the fault library yet")

// Lookup returns the implementation of the fault named name in r.
func Lookup(r *scenario.Registry, name string) (Fault, error) {
	k, ok := r.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("unknown fault %q; the fault library has %s", name, strings.Join(r.Names(), ", "))
	}
	f, ok := k.(Fault)
	if !ok {
		return nil, fmt.Errorf("fault %q: %w", name, ErrNotImplemented)
	}
	return f, nil
}

// Inject validates and injects the faults of s, in order.
func Inject(ctx context.Context, c cluster.Cluster, r *scenario.Registry, faults []scenario.Fault) error {
	for i, sf := range faults {
		f, err := Lookup(r, sf.Name)
		if err != nil {
			return err
		}
		if err := f.Validate(sf.Params); err != nil {
			return fmt.Errorf("fault %d (%s): invalid parameters: %w", i+1, sf.Name, err)
		}
		if err := f.Inject(ctx, c, sf.Params); err != nil {
			return fmt.Errorf("injecting fault %s: %w", sf.Name, err)
		}
	}
	return nil
}

// Settle waits, in order, for the faults that take effect later
// (Settler); call it once the scenario's workloads have rolled out.
func Settle(ctx context.Context, c cluster.Cluster, r *scenario.Registry, faults []scenario.Fault) error {
	for _, sf := range faults {
		f, err := Lookup(r, sf.Name)
		if err != nil {
			return err
		}
		if st, ok := f.(Settler); ok {
			if err := st.Settle(ctx, c, sf.Params); err != nil {
				return fmt.Errorf("waiting for fault %s to take effect: %w", sf.Name, err)
			}
		}
	}
	return nil
}

// Revert undoes, in reverse order, the faults that can be reverted. It
// tries every one and returns the errors joined.
func Revert(ctx context.Context, c cluster.Cluster, r *scenario.Registry, faults []scenario.Fault) error {
	var errs []error
	for i := len(faults) - 1; i >= 0; i-- {
		f, err := Lookup(r, faults[i].Name)
		if err != nil {
			continue
		}
		if rv, ok := f.(Reverter); ok {
			if err := rv.Revert(ctx, c, faults[i].Params); err != nil {
				errs = append(errs, fmt.Errorf("reverting fault %s: %w", faults[i].Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// namespace is the fault's namespace parameter, defaulted.
func namespace(p scenario.Params) string { return p.String("namespace", "default") }

// nodeName turns the node parameter (a short name such as worker) into the
// cluster's node name, checking that the node exists.
func nodeName(ctx context.Context, c cluster.Cluster, p scenario.Params, param string) (string, error) {
	short := p.String(param, "")
	if short == "" {
		return "", fmt.Errorf("parameter %s is required: the node's short name, such as worker", param)
	}
	full := scenario.NodeName(c.Name(), short)
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return "", fmt.Errorf("listing the nodes of cluster %s: %w", c.Name(), err)
	}
	var names []string
	for _, n := range nodes {
		if n.Name == full {
			return full, nil
		}
		names = append(names, n.Name)
	}
	return "", fmt.Errorf("cluster %s has no node %s (%s: %q); its nodes are %s", c.Name(), full, param, short, strings.Join(names, ", "))
}

// nodesOrAll is the node parameter's node, or every node when it is absent.
func nodesOrAll(ctx context.Context, c cluster.Cluster, p scenario.Params) ([]cluster.Node, error) {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the nodes of cluster %s: %w", c.Name(), err)
	}
	if p.String("node", "") == "" {
		return nodes, nil
	}
	full, err := nodeName(ctx, c, p, "node")
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		if n.Name == full {
			return []cluster.Node{n}, nil
		}
	}
	return nil, fmt.Errorf("cluster %s has no node %s", c.Name(), full)
}

// run runs cmd against node's dataplane and returns its standard output
// (see cluster.DataplaneOutput: the host's tools in the node's network
// namespace where the cluster allows it, so that a tool the learner
// replaced in the node cannot fake a fault). A failure carries the
// command's standard error.
func run(ctx context.Context, c cluster.Cluster, node string, cmd ...string) (string, error) {
	return cluster.DataplaneOutput(ctx, c, node, cmd...)
}
