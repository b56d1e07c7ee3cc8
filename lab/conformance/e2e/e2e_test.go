// Package e2e is the test binary svclab's conformance run builds: upstream
// Kubernetes v1.37.2's end-to-end suite (k8s.io/kubernetes/test/e2e), cut
// to the suites that hold the [sig-network] specs — test/e2e/network, and
// test/e2e/common/network, which the suite package itself imports. Every
// [sig-network] … [Conformance] spec of v1.37.2 lives there (47; the
// conformance list in test/conformance/testdata names their files), so a
// focus on them selects the same specs as upstream's whole e2e.test would,
// from a binary that compiles in a fraction of its time.
//
// This file follows upstream's test/e2e/e2e_test.go; only the list of
// suites is shorter. It is a module of its own (like lab/kube) so that the
// suite's dependencies stay out of svclab's.
package e2e

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/onsi/ginkgo/v2"

	"k8s.io/component-base/version"
	conformancetestdata "k8s.io/kubernetes/test/conformance/testdata"
	e2e "k8s.io/kubernetes/test/e2e"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	e2ereporters "k8s.io/kubernetes/test/e2e/reporters"
	e2etestingmanifests "k8s.io/kubernetes/test/e2e/testing-manifests"
	testfixtures "k8s.io/kubernetes/test/fixtures"

	// define and freeze constants
	_ "k8s.io/kubernetes/test/e2e/feature"

	// test sources (test/e2e itself brings test/e2e/common)
	_ "k8s.io/kubernetes/test/e2e/network"

	// reconfigure framework
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/utils/ktesting/format"
)

func TestMain(m *testing.M) {
	var versionFlag bool
	flag.CommandLine.BoolVar(&versionFlag, "version", false, "Displays version information.")
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if versionFlag {
		fmt.Printf("%s\n", version.Get())
		os.Exit(0)
	}
	if flag.CommandLine.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unknown additional command line arguments: %s", flag.CommandLine.Args())
		os.Exit(1)
	}
	testfiles.AddFileSource(e2etestingmanifests.GetE2ETestingManifestsFS())
	testfiles.AddFileSource(testfixtures.GetTestFixturesFS())
	testfiles.AddFileSource(conformancetestdata.GetConformanceTestdataFS())
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

func TestE2E(t *testing.T) {
	progress = e2ereporters.NewProgressReporter(framework.TestContext.ProgressReportURL)
	e2e.RunE2ETests(t)
}

// progress posts each finished spec to --progress-report-url, as
// upstream's e2e_test.go does with the suite package's own reporter
// (which this file cannot reach): svclab's conformance run shows it.
var progress *e2ereporters.ProgressReporter

var _ = ginkgo.ReportBeforeSuite(func(report ginkgo.Report) {
	progress.SetTestsTotal(report.PreRunStats.SpecsThatWillRun)
})

var _ = ginkgo.ReportAfterEach(func(report ginkgo.SpecReport) {
	progress.ProcessSpecReport(report)
})
