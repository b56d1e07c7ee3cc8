// Package conntrack is kube-proxy v1.37's UDP conntrack reconciler
// (pkg/proxy/conntrack/cleanup.go), over netlink with no conntrack binary.
//
// After a successful sync in which a Service with a UDP port changed
// endpoints, CleanStaleEntries dumps the conntrack table of the family and
// deletes every UDP flow whose original destination is a Service frontend
// (ClusterIP, ExternalIP or load-balancer VIP, with the port) or whose
// original destination port is a NodePort, and whose reply source is not
// one of that Service port's serving endpoints. Traffic policies, topology
// and the terminating state are deliberately ignored. Since v1.37 a
// Service with no serving endpoints has its IP frontends cleaned too (all
// their flows are stale), but its NodePort is still skipped.
//
// TCP is never touched (graceful termination needs established flows).
package conntrack
