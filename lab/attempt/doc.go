// Package attempt manages learners' attempts at scenarios: the layer the
// command line ("svclab scenario start|check|hint|solve|reset|abandon|
// status") and the web UI share, and that classrooms build on.
//
// A Manager starts an attempt — the cluster (created with the scenario's
// shape when missing), the setup and the faults (lab/session) — and records
// it in the store (lab/store) together with the session's saved state, the
// baseline its rightFix checks compare with. Everything after that (Check,
// Hint, Solve, Reset, Abandon) works from the attempt's id alone, so a later
// process — the next "svclab scenario check", or the web server after a
// restart — finds the running attempt in the database and grades it against
// the stored baseline.
//
// Attempts that svclab cannot carry out — an unknown or malformed scenario,
// a cluster that cannot be created, a fault that does not apply, a check
// that times out — are recorded as errored with a message that says what
// to do, and the cluster is left usable (what the failed setup applied is
// removed again).
//
// An attempt holds its cluster, machine-wide (lab/cluster/owner): Start
// claims it and binds the claim to the attempt, which holds it until it
// passes or is abandoned; another process or state directory is refused
// the cluster, unless it takes it over (Options.TakeOver), and then the
// attempt it was taken from errors at its next step and leaves the
// taker's scenario alone when it is abandoned.
//
// The Run functions (RunStart, RunCheck, RunHint, ...) are the learner's
// commands as text: the Manager's work for the learner's latest attempt
// at a scenario, printed as "svclab scenario" shows it. The commands
// themselves are cmd/svclab/internal/cli's; this package has no flags.
//
// The session layer sits behind the small Starter interface, so the manager
// is unit-tested with hand-written fakes; the end-to-end test runs it on a
// real embedded cluster.
package attempt
