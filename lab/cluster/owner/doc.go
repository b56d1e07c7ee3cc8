// Package owner records which svclab process, or which attempt, is using a
// lab cluster, so that another process — "svclab exercise run" in a second
// terminal, a second "svclab serve", a sweep of another state directory —
// refuses to set a scenario up on it, recreate it or delete it, and says who
// holds it.
//
// A claim is a small JSON file per cluster in one directory for the whole
// machine (DefaultDir: /run/svclab/owners for root), whatever state
// directory made the cluster. A claim is held either by a process, while it
// runs (an flock on a lock file of the claim's own, which the kernel drops
// when the process dies, so a crash frees the cluster), or by an attempt,
// for as long as that attempt holds its cluster in the database that
// recorded it (an attempt outlives "svclab scenario start"; the database,
// possibly another process's, is asked). A claim that nothing holds any
// more is stale and taken over silently; a live one is taken over only when
// asked (--force), and its holder learns it at its next step (Check).
//
// Registry is the API: Acquire a Lease, Bind it to an attempt once the
// attempt exists, Release it (or Close it and let the attempt hold it);
// Holder and List say who holds what.
package owner
