// Package views turns a lab cluster's state into the view models of the web
// UI's live panels and publishes them on an in-process bus:
//
//   - slices: the EndpointSlices of a scenario's Services, every endpoint
//     with its conditions, node, zone and hints, changes marked;
//   - rules/NODE: each node's proxy rules for those Services, grouped per
//     Service (map element → service chain → endpoints) with the lines
//     added and removed since the last change, and the raw ruleset;
//   - conntrack/NODE: each node's conntrack entries for Service traffic;
//   - probes: about once a second, a request from every node and from the
//     scenario's client Pods to each Service port, with the outcome and the
//     backend that answered;
//   - timeline: Kubernetes events, proxier sync events, the learner's
//     terminal commands and check results;
//   - health: whether the lab works (health.go) — the API server ready,
//     the nodes Ready, traffic between the nodes, every proxier's
//     /healthz, DNS from the control plane — in a learner's words with the
//     raw errors apart, leaving alone what the scenario's faults break on
//     purpose (Config.Disturbed);
//   - the packet path (Path), computed on request from a node's current
//     ruleset: map element, chains and rules to an endpoint, or the rule
//     that rejects or drops the packet and why.
//
// A Feed runs the collectors for one cluster and one set of Services; the Bus
// fans its frames out to any number of subscribers. Each subscriber has its
// own buffer that keeps the latest frame per topic (and a bounded list of
// appended timeline frames): a slow subscriber skips intermediate frames and
// still ends up with the current state, and it never blocks the publisher or
// the other subscribers.
//
// A node's rules are read again as soon as they change, whoever changed
// them: `nft monitor` on the node reports every committed transaction (the
// proxier's syncs, a fault deleting a rule, the learner's own nft or
// iptables-nft commands), and the proxier's sync events say the same for
// the timeline; a slow poll catches anything else.
//
// Everything reaches the cluster through cluster.Cluster (the clientset and
// NodeExec: nft, iptables-save, conntrack, curl), so the views work the same
// on every backend.
package views
