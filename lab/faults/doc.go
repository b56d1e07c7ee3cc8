// Package faults is svclab's fault library: the ways a lesson breaks a
// working cluster. Each fault is a small type that implements the
// scenario.FaultKind declared in lab/scenario (its name and parameter check)
// plus Inject, and Revert where undoing it makes sense (the dataplane faults,
// whose state outlives a scenario's namespaces when a cluster is reused).
//
// Faults talk to a cluster only through the cluster.Cluster interface: API
// faults through its clientset, dataplane faults by running commands on a
// node (NodeExec) — sysctl, ip, nft, iptables, conntrack — and the bundled
// proxier's fault switches through lab/proxierctl, so the same fault works
// on every backend.
//
// Two dataplane faults stand in for kernel settings that a lab node, being
// a network namespace, cannot change on its own: conntrack-table-small caps
// the connections a node tracks with an nft connlimit table
// (svclab-conntrack-max) instead of net.netfilter.nf_conntrack_max, which
// only the host's initial namespace may set, and hairpin drops packets that
// would leave by the Pod veth they came in on (svclab-no-hairpin), as bridge
// ports without hairpin mode do. Both tables say in a comment what they
// emulate.
//
// Registry returns a scenario.Registry holding every declared fault, with the
// implemented ones registered over their declarations; Lookup finds the
// implementation of a name or says that it is declared but not implemented.
package faults
