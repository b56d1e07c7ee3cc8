// Package model is the proxier's view of the cluster: from Services,
// EndpointSlices and this node's Node object it computes, for one IP
// family, every proxied ServicePort (ClusterIP, ExternalIPs, load-balancer
// VIPs, NodePort, health check node port, session affinity, traffic
// policies) with its endpoints and their ready/serving/terminating/local
// conditions, following kube-proxy v1.37's ServiceChangeTracker and
// EndpointSliceCache. CategorizeEndpoints reproduces pkg/proxy/topology.go:
// the Cluster list with topology hints and the serving+terminating
// fallback, the Local list, and the union of reachable endpoints.
//
// The package is pure: no I/O, no clients. Renderers consume a Snapshot;
// ChangedServices compares two snapshots to drive partial syncs.
package model
