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
// Everything goes through the cluster.Cluster interface, so a session runs
// the same on every backend. NewCommand is "svclab exercise run".
package session
