// Package flowtest proves the proxier renderers right with real packets and
// against the real kube-proxy.
//
// The tests (root only, skipped with -short) build small worlds of Linux
// network namespaces: a "node" namespace that holds the rendered ruleset
// (applied with nft -f or iptables-restore), "pod" namespaces behind veths
// that run TCP and UDP echo servers reporting the peer address they saw,
// and client namespaces. Everything is done from the test process itself:
// a socket created on a thread that has entered a namespace stays in that
// namespace, so listeners and dials need no helper binaries.
//
//   - flow_test.go sends TCP and UDP packets through both modes' rules and
//     checks DNAT targets and their spread, REJECT versus DROP, masquerade,
//     hairpin, session affinity and its expiry, traffic policies, the
//     serving+terminating fallback, topology hints and NodePort addresses.
//   - conntrack_test.go runs the daemon ("svclab proxier run --objects",
//     this test binary re-executed in the node namespace) in both modes
//     and keeps UDP flows to a ClusterIP (from a pod) and to a NodePort
//     (from outside) pinned in conntrack to endpoint A; when A leaves the
//     EndpointSlice the stale entries go and the same flows reach B, while
//     under the skip-conntrack-cleanup fault they keep reaching A; a
//     Service left without endpoints loses its ClusterIP flows (rejected
//     from then on) but keeps its NodePort ones, as v1.37 does.
//   - differential_test.go runs upstream kube-proxy v1.37.2 (svclab-kube
//     kube-proxy) against an embedded cluster in a namespace of its own and
//     compares its ruleset with ours for the same objects, after
//     normalisation (normalize.go). Six configurations: both modes with
//     default settings, with nodePortAddresses CIDRs and masqueradeAll, and
//     from the other node's point of view. The nftables transaction output
//     is loaded too and must give the same table. Set FLOWTEST_DUMP_DIR to
//     keep both normalised listings of each configuration.
//
// The exported helpers (namespaces, echo servers, probes, normalisers) are
// only meant for these tests. Only loopback and addresses inside namespaces
// the tests created are ever targeted.
package flowtest
