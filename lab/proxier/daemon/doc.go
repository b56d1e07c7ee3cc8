// Package daemon is the proxier's runtime: it keeps the Services,
// EndpointSlices, this node's Node and the ServiceCIDRs it is told about
// (by client-go informers or an objects file), and drives the renderers
// with kube-proxy v1.37's sync loop — a bounded-frequency runner
// (minSyncPeriod, syncPeriod retries, an hourly full resync), partial
// syncs of the Services that changed, full resyncs after failures, node
// topology changes, a missing iptables canary or on request — and, after
// each successful sync, the health servers and the UDP conntrack
// reconciler.
//
// Appliers put rules into the kernel: NFTablesApplier drives the
// nftables.Syncer through knftables (the nft binary); IPTablesApplier
// feeds iptables-restore --noflush. What uses knftables (NFTablesApplier,
// the cleanup of the other mode) builds on Linux only, as package
// nftables does. A failed apply leaves the previous
// ruleset in place (both are transactional), is counted in metrics,
// logged, and retried with a full sync.
//
// Teaching hooks: every sync is published on an events.Broker (what
// changed, which rules were added and removed, full or partial, how long)
// and the faults.Switches can stop or slow syncing, skip conntrack cleanup
// or leave a Service out. The metrics server exposes both (/events,
// /faults) next to /metrics, /proxyMode, /healthz, /configz and
// /programmed (how far the rules follow the API: Proxier.Programmed).
package daemon
