// Package netpol enforces Kubernetes NetworkPolicy on an embedded node with
// nftables, the way a CNI's policy agent does: one agent per node (started
// by the node agent, in the node's network namespace) watches Pods,
// Namespaces and NetworkPolicies and keeps the node's table
// `inet kube-network-policies` in step with them.
//
// The compiler (Compile) is a pure function from those objects to a Ruleset
// for one node; Render prints a Ruleset as an nft script, and Diff prints
// the script that turns one Ruleset into another (set elements added and
// removed, changed chains flushed and refilled) in one atomic transaction.
// The Controller runs informers, compiles on every change and applies the
// difference, so a label change becomes a set element within milliseconds.
//
// Where the rules sit. Pods live in their own network namespaces with a
// veth to the node; everything a pod sends or receives, except traffic
// with its own node, crosses the node's forward hook. Both base chains
// (egress, ingress) hook there at filter priority, after kube-proxy's DNAT
// in prerouting, so a connection to a Service is judged on the Pod it was
// sent to, as upstream CNIs do. Replies and related packets of accepted
// connections pass through conntrack (ct state established,related).
// Traffic from or to the node itself (kubelet probes, hostNetwork Pods) is
// always allowed, as the NetworkPolicy API specifies, and hostNetwork Pods
// are never selected.
//
// Each local Pod selected by a policy for a direction gets a chain
// (ingress-pod-<ns>/<pod>) reached through a verdict map keyed by the Pod's
// IP; it jumps to the chain of each policy that selects it
// (ingress-policy-<ns>/<policy>), whose rules accept, and ends with a drop.
// Peers are named sets of Pod IPs, updated element by element; ipBlocks are
// written inline; named ports are resolved per Pod through sets of
// address . protocol . port.
//
// A policy the compiler cannot enforce (an unknown protocol, a CIDR that
// does not parse, ...) is left out whole and reported as an event on it;
// the others keep being enforced.
package netpol
