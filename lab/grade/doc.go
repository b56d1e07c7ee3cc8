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
//     address, and send DNS from a fixed source port. Attempts run in
//     parallel; each has a timeout (2s when it should succeed, 1s when it
//     should be refused or time out) and a 1s bound on its TCP handshake,
//     so a dropped SYN costs a second, not the whole timeout;
//   - dataplane: what a node's proxy rules do with a Service's traffic
//     (nft list table ip kube-proxy, or iptables-save), what its
//     conntrack table holds for the Service (conntrack -L), how many
//     connections the table may hold (nf_conntrack_max, or the lab's
//     stand-in cap), which mode its kube-proxy runs in, and whether the
//     node's rules follow a change the grader makes (follows.go: a Service
//     of its own in kube-system gets an endpoint, then loses it; rules
//     mended by hand and a stuck or dead proxier do not follow). The nodes
//     are asked at once;
//   - rightFix: the object still exists, is the same object (UID), or kept a
//     field, compared with a Baseline recorded right after the faults were
//     injected;
//   - kubeProxyConfig: a field of kube-proxy's configuration (config.conf
//     of the kube-proxy ConfigMap) as kube-proxy reads it: its own strict
//     loader and defaults (lab/proxier/config), durations and numbers
//     compared as values, so any spelling kube-proxy accepts passes.
//
// Every check returns a Result with a message written for the learner;
// Grade runs a scenario's checks concurrently (at most MaxExecs commands on
// nodes and in Pods at a time, over one shared API client), sums the
// weights of those that passed into a score and lists the hints that
// failed checks unlock. BenchmarkGrade (lab/session) measures a grading of
// every scenario on a real cluster.
package grade
