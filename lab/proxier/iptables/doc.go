// Package iptables renders a model.Snapshot into the iptables-restore input
// (filter and nat tables) that kube-proxy v1.37's iptables proxier writes:
// KUBE-SERVICES, KUBE-EXTERNAL-SERVICES, KUBE-NODEPORTS, KUBE-POSTROUTING,
// KUBE-MARK-MASQ, KUBE-FORWARD, KUBE-PROXY-FIREWALL, KUBE-FIREWALL and the
// per-service KUBE-SVC/SVL/EXT/FW/SEP chains with upstream's hashing,
// statistic probabilities and "recent" affinity. Options select a partial
// sync (only changed Services' chains, stale chains deleted with -X).
// JumpRules lists the rules kube-proxy inserts into the built-in chains.
package iptables
