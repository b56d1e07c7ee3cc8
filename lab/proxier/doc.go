// Package proxier is the root of svclab's bundled proxier, a kube-proxy
// v1.37 replacement whose rules read exactly like upstream's.
//
// The work is cut by domain:
//
//   - manifest decodes Services, EndpointSlices and Nodes from YAML files
//     with errors that name the document and field.
//   - model turns those API objects into per-ServicePort state for one node
//     and IP family and categorizes endpoints (topology, traffic policies,
//     serving+terminating fallback).
//   - nftables renders a model into the "ip kube-proxy" table through a
//     knftables transaction, with full and partial syncs.
//   - iptables renders a model into iptables-restore input for the filter
//     and nat tables.
//   - render is the "svclab proxier render" command that prints what would
//     be programmed.
//   - daemon is the runtime behind "svclab proxier run" (package run): the
//     object store fed by informers or an objects file, the sync loop on
//     runner's bounded-frequency runner, the nftables and iptables
//     appliers, and the hooks to conntrack (UDP reconciler), healthcheck
//     (/healthz, /livez, healthCheckNodePorts) and metrics.
//   - events and faults are the teaching hooks: the sync-event stream and
//     the runtime fault switches.
//   - config reads KubeProxyConfiguration files and kube-proxy's flags;
//     deploy generates the kube-proxy DaemonSet, ConfigMap and RBAC.
//
// See README.md for the chain layout of both modes.
package proxier
