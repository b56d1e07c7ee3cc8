// Package faults is svclab's fault library: the ways a lesson breaks a
// working cluster. Each fault is a small type that implements the
// scenario.FaultKind declared in lab/scenario (its name and parameter check)
// plus Inject, and Revert where undoing it makes sense (the dataplane faults,
// whose state outlives a scenario's namespaces when a cluster is reused).
//
// Faults talk to a cluster only through the cluster.Cluster interface: API
// faults through its clientset, dataplane faults by running commands on a
// node (NodeExec) — sysctl, ip, nft, iptables, conntrack, and curl against
// the bundled proxier's fault switches on 127.0.0.1:10249/faults — so the
// same fault works on every backend.
//
// Registry returns a scenario.Registry holding every declared fault, with the
// implemented ones registered over their declarations; Lookup finds the
// implementation of a name or says that it is declared but not implemented.
package faults
