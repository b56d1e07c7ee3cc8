// Package grade evaluates a scenario's checks against a live cluster and
// turns them into a score, learner-facing messages and unlocked hints.
//
// The four check kinds of scenario.yaml:
//
//   - api: a kubectl-style JSONPath over the referenced objects (read with
//     the dynamic client), compared with equals, contains, matches, exists,
//     count... operators;
//   - probe: traffic from a node (NodeExec: curl, bash's /dev/tcp, nc, dig)
//     or from a Pod (the exec subresource, as kubectl exec: curl or wget,
//     nc, dig or nslookup) to a Service's ClusterIP, DNS name or NodePort,
//     a node or a host. Each attempt ends as success, refused (a REJECT or
//     an RST) or timeout (a DROP); HTTP probes to agnhost's /hostname learn
//     which Pod answered (and whether it ran on the client's node or in its
//     zone), to /clientip which client address it saw. A probe may start
//     from a Pod on a given node (onNode), target a node's secondary
//     address, and send DNS from a fixed source port;
//   - dataplane: what a node's proxy rules do with a Service's traffic
//     (nft list table ip kube-proxy, or iptables-save), what its
//     conntrack table holds for the Service (conntrack -L), and which mode
//     its kube-proxy runs in;
//   - rightFix: the object still exists, is the same object (UID), or kept a
//     field, compared with a Baseline recorded right after the faults were
//     injected.
//
// Every check returns a Result with a message written for the learner;
// Grade runs a scenario's checks concurrently, sums the weights of those
// that passed into a score and lists the hints that failed checks unlock.
package grade
