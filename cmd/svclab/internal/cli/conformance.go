package cli

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/conformance"
	"github.com/svclab/svclab/lab/kubebin"
)

func newConformanceCommand(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "conformance",
		Short: "Put a lab cluster through upstream Kubernetes' [sig-network] conformance specs",
	}
	var (
		name, focus, skip, reportDir, mode string
		workers                            int
		keep                               bool
		timeout                            time.Duration
	)
	run := &cobra.Command{
		Use:   "run",
		Short: "Create a fresh cluster, run the [sig-network] Conformance specs of Kubernetes v1.37.2 on it, report and delete it",
		Long: `Builds upstream's end-to-end suite of Kubernetes v1.37.2 (its network suites; cached after the
first build), creates a fresh cluster of its own, runs the specs one after another with the
skeleton provider, writes the suite's JUnit report and output to the report directory, prints
a one-line summary and deletes the cluster. It exits with status 1 when a spec failed.

--focus all runs every [sig-network] Conformance spec (47; about 25 minutes on 2 cores),
--focus services the 15 Services ones (about 4 minutes), --focus network every other
[sig-network] spec a lab can run (about a hundred; hours on 2 cores), leaving out what needs
IPv6, a cloud provider, the internet or SSH to the nodes, and benchmarks; anything else is a
Ginkgo focus regular expression.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			backend := e.backend
			p, err := e.provider()
			if err != nil {
				return err
			}
			owners, err := e.owners(cmd)
			if err != nil {
				return err
			}
			switch focus {
			case "all":
				focus = conformance.AllFocus
			case "services":
				focus = conformance.ServicesFocus
			case "network":
				focus = conformance.NetworkFocus
				if skip != "" {
					skip = conformance.NetworkSkip() + "|" + skip
				} else {
					skip = conformance.NetworkSkip()
				}
			}
			if reportDir == "" {
				reportDir = filepath.Join(e.stateDir, "conformance", time.Now().Format("20060102-150405"))
			}
			res, err := conformance.Run(cmd.Context(), conformance.Options{
				Provider: p, Backend: backend, Owners: owners, Cluster: name, Keep: keep,
				Workers: workers, ProxyMode: mode, Focus: focus, Skip: skip, ReportDir: reportDir, Timeout: timeout,
				Progress: cluster.NewTextProgress(e.errOut), Log: e.log,
			})
			if err != nil && res == nil {
				return err
			}
			if res != nil && len(res.Specs) > 0 {
				for _, s := range res.Failed() {
					fmt.Fprintf(e.out, "✗ %s (%s)\n    %s\n", s.Name, s.State, s.Reason())
				}
				for _, s := range res.Setup {
					fmt.Fprintf(e.out, "✗ the suite's %s failed\n    %s\n", s.Name, s.Reason())
				}
				fmt.Fprintln(e.out, res.Summary())
			}
			if err != nil {
				return err
			}
			if !res.OK() {
				if len(res.Specs) == 0 {
					fmt.Fprintf(e.out, "no spec matched %s; the suite's output is in %s\n", focus, res.Log)
				}
				return &ExitError{Code: 1}
			}
			return nil
		},
	}
	f := run.Flags()
	f.StringVar(&name, "cluster", "", "name the run's cluster (default cf- and five random letters); it must not exist")
	f.BoolVar(&keep, "keep", false, "leave the cluster running afterwards")
	f.IntVar(&workers, "workers", 2, "worker nodes of the cluster")
	f.StringVar(&mode, "proxy-mode", "", "kube-proxy's mode: nftables (default) or iptables")
	f.StringVar(&focus, "focus", "all", "which specs: all, services, network, or a Ginkgo focus regular expression")
	f.StringVar(&skip, "skip", "", "a Ginkgo skip regular expression")
	f.StringVar(&reportDir, "report-dir", "", "where the JUnit report and the suite's output go (default STATE-DIR/conformance/TIME)")
	f.DurationVar(&timeout, "timeout", 2*time.Hour, "give up on the suite after this long")
	c.AddCommand(run)
	c.AddCommand(&cobra.Command{
		Use:   "build",
		Short: "Build the conformance suite into the cache unless it is there already, and print its path",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := kubebin.E2E.Locate(cmd.Context(), cluster.NewTextProgress(e.errOut))
			if err != nil {
				return err
			}
			fmt.Fprintln(e.out, bin)
			return nil
		},
	})
	return c
}
