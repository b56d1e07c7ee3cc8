// Package session runs a scenario on a lab cluster: the pipeline
// cluster → setup → faults → (the learner acts) → grade → explanation.
//
// EnsureCluster finds or creates a cluster of the scenario's shape. Start
// applies the setup manifests with server-side apply, waits for the
// application to settle, injects the faults (lab/faults), waits for them to
// take effect and records the baseline the rightFix checks compare with
// (lab/grade). Grade grades once; Solve runs the scenario's reference
// solution (kubectl is svclab-kube's, pointed at the cluster) and grades
// until the checks pass or time runs out; Teardown reverts the dataplane
// faults and deletes what the setup created.
//
// Teardown also puts back what a scenario changed outside its namespaces
// (kube-proxy's and CoreDNS's ConfigMaps and workloads, node labels and
// taints), so one cluster serves scenario after scenario.
//
// Exercise is the self-grading run of many scenarios ("svclab exercise run
// --all --solve --wrong-fixes"): scenarios of one cluster shape share a
// cluster; for each, set up → the checks must fail → each wrong fix of
// scenario.yaml must be rejected by the checks it names (undone by its undo
// commands, or by setting the scenario up afresh) → the reference solution
// must pass → tear down. Strict (svclab scenario test) is the author's
// proof: a wrong fix must fail exactly the checks it names, and every check
// must fail at least once (judgeFlips); extra attempts from a file and the
// other proxy mode are options of the run. PrintSummary and WriteJUnit
// report the outcomes.
// A run holds its clusters while it runs (lab/cluster/owner) and, given no
// cluster name, makes clusters of its own, so it never lands on a lab
// somebody is using.
//
// Everything goes through the cluster.Cluster interface, so a session runs
// the same on every backend. The commands ("svclab exercise run",
// "svclab scenario test") are cmd/svclab/internal/cli's.
package session
