// Package conformance puts a lab cluster through upstream Kubernetes'
// [sig-network] conformance specs, as kind does in its own CI: a lab that
// claims to be a real cluster has to pass them.
//
// Run builds the suite (upstream's end-to-end tests of v1.37.2, cut to
// their network suites: the module in lab/conformance/e2e, built and cached
// by lab/kubebin like svclab-kube), creates a fresh cluster of its own on
// the chosen backend, runs the focused specs one after another against it
// with upstream's skeleton provider, reads the suite's JUnit report, and
// deletes the cluster. The suite posts each finished spec to a local
// address, which becomes the run's progress lines; its whole output goes
// to e2e.log beside the report.
//
//	REPORT-DIR/junit_01.xml  the suite's JUnit report
//	REPORT-DIR/e2e.log       everything the suite printed
//	REPORT-DIR/kubeconfig    the cluster's kubeconfig (gone with the cluster)
//
// Two focuses are named: AllFocus (every [sig-network] Conformance spec,
// 47 in v1.37.2) and ServicesFocus (the 15 [sig-network] Services ones,
// which `go tool task test` runs).
package conformance
