// Package faults holds the proxier's teaching fault switches. Each is off
// by default and can be flipped at runtime (Set, or the HTTP handler the
// daemon mounts at /faults on its metrics address); every change is logged
// and exported as metrics, and the daemon reacts to it at once:
//
//   - skipConntrackCleanup: UDP conntrack entries are no longer reconciled
//     after a sync, so clients stay pinned to deleted endpoints.
//   - stopSyncing: the proxier stops programming rules but leaves the
//     existing ones in place (a dead or stuck kube-proxy); /healthz turns
//     503 once a queued change is older than the health timeout.
//   - syncEverySeconds: syncs happen at most every N seconds, so changes
//     take up to N seconds to reach the rules (a slow proxier).
//   - omitService: one Service ("namespace/name") is left out of the
//     rules, as if the proxier had never seen it.
package faults
