package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/faults"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/session"
)

// newScenarioTest returns "svclab scenario test": the author's proof of
// scenarios on real clusters.
func newScenarioTest(e *env) *cobra.Command {
	var ro session.RunOptions
	var dir, junit, attemptsFile, mode string
	var all, noResets bool
	var parallel int
	c := &cobra.Command{
		Use:          "test [ID... | --all]",
		Short:        "Prove scenarios on real clusters: broken fails, right fixes pass, wrong fixes fail what they say, every check flips",
		SilenceUsage: true,
		Long: `The scenario author's proof, on clusters of the scenarios' shapes. For each
scenario: set up and broken, some check must fail and no check may err →
each wrong fix must fail exactly the checks it names in rejectedBy (no
fewer: the learner would pass; no more: the declaration would be wrong) →
the reference solution and every other solution must pass every check →
every rightFix rule must have failed under some wrong fix (one that never
does grades nothing). Checks that pass on the broken lab are listed as
guards, and guards no wrong fix breaks are reported.

--wrong-fixes-from FILE tries more attempts than the scenarios declare, a
reviewer's or an author's, in this format:

  scenarios:
    selector-typo:
      wrongFixes:
        - id: relabel-pods
          description: Relabel the Pods to the typo
          commands: ["kubectl label pods -l app=web ap=web"]
          rejectedBy: [endpoints]
          undo: ["kubectl label pods -l app=web ap-"]
      otherSolutions:
        - id: apply
          description: Apply a fixed Service
          commands: ["kubectl patch service web -p '{\"spec\":{\"selector\":{\"app\":\"web\"}}}'"]

Scenarios that name no proxy mode run in nftables mode, and --mode iptables
runs them in iptables mode (skipping those written for nftables): whether
their checks hold in the other mode. Whatever mode a cluster runs, a
scenario's set-up switches kube-proxy to the scenario's and its end
switches back.

Clusters, claims, --keep and --parallel work as in svclab exercise run.
Exits 1 unless every scenario passed.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := fillRunOptions(cmd, e, &ro, dir, parallel); err != nil {
				return err
			}
			o := session.ExerciseOptions{
				Provider: ro.Provider, Source: ro.Source, IDs: args, All: all, Cluster: ro.Cluster, Keep: ro.Keep,
				Solve: true, WrongFixes: true, Strict: true, NoResets: noResets, ProxyMode: mode,
				Out: ro.Out, Log: ro.Log, Svclab: ro.Svclab, Owners: ro.Owners, Backend: ro.Backend, Force: ro.Force, Parallel: parallel,
			}
			if attemptsFile != "" {
				var err error
				if o.Attempts, err = loadAttempts(attemptsFile, o.Source); err != nil {
					return err
				}
			}
			return exercise(cmd, o, junit)
		},
	}
	c.Flags().StringVar(&ro.Cluster, "cluster", "", "the cluster to run on (the base name with several shapes); created (and deleted afterwards) when it does not exist (default: clusters of the run's own)")
	c.Flags().BoolVar(&ro.Force, "force", false, "take the clusters over when another svclab process or attempt holds them (theirs stops)")
	c.Flags().BoolVar(&ro.Keep, "keep", false, "keep the clusters and the scenario when done")
	c.Flags().BoolVar(&all, "all", false, "test every scenario")
	c.Flags().BoolVar(&noResets, "no-resets", false, "skip what needs a scenario set up a second time (wrong fixes without an undo, other solutions; their declarations are trusted): a quicker run")
	c.Flags().StringVar(&junit, "junit", "", "write a JUnit XML report to this file")
	c.Flags().StringVar(&dir, "dir", "", "take the scenarios from this directory instead of the built-in ones")
	c.Flags().StringVar(&attemptsFile, "wrong-fixes-from", "", "a YAML file of more wrong fixes and other solutions to try, by scenario id")
	c.Flags().StringVar(&mode, "mode", "", "run the scenarios that name no proxy mode in this one (nftables, the default, or iptables); skip those written for the other")
	c.Flags().IntVar(&parallel, "parallel", 1, "how many clusters work at once")
	return c
}

// loadAttempts reads an attempts file and checks it against the
// scenarios of src (nil: the built-in ones).
func loadAttempts(file string, src *scenario.Source) (map[string]scenario.Attempts, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--wrong-fixes-from: %w", err)
	}
	s := builtIn
	if src != nil {
		s = *src
	}
	cat, _ := scenario.Load(scenario.Options{Faults: faults.Registry()}, s)
	attempts, problems := scenario.LoadAttempts(file, data, cat)
	if err := problems.Err(); err != nil {
		return nil, fmt.Errorf("--wrong-fixes-from: %d problems:\n%w", len(problems), err)
	}
	return attempts, nil
}
