package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/session"
)

// newExerciseCommand returns "svclab exercise" with its run subcommand.
func newExerciseCommand(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "exercise",
		Short: "Self-graded exercise runs: set a scenario up, fix it (or let svclab), grade",
	}
	var ro session.RunOptions
	var dir, junit string
	var all, wrongFixes, noResets bool
	var parallel int
	run := &cobra.Command{
		Use:          "run [ID... | --all]",
		Short:        "Run scenarios on lab clusters and grade the fix",
		SilenceUsage: true,
		Long: `With one scenario ID and no --solve or --wrong-fixes: set scenario ID up on
a cluster of the run's own (or on --cluster, created with the scenario's
shape when it does not exist),
break it with the scenario's faults and print the task. Then wait for Enter
and grade what you did: each check, the score, the hints that failed checks
unlock, and the explanation once every check passes.

With --solve and/or --wrong-fixes (any number of IDs, or --all): grade
without you. For each scenario: set up → every check must not pass →
(--wrong-fixes) each of the scenario's plausible wrong fixes must be
rejected by the checks it names → (--solve) the reference solution must
pass every check → tear down. Scenarios of one cluster shape share a
cluster: --cluster names the default shape's (3 nodes), the others get a
suffix (-n4, -zXXXX); a scenario whose proxy mode the cluster does not run
switches kube-proxy for its run. A summary table follows, and with
--junit FILE a JUnit XML report.

Afterwards a cluster is deleted if the run created it, or the scenario
removed from it; --keep leaves both. Exits 1 unless every check (or step)
passed.

The run holds its clusters while it runs: another svclab process (a web UI
on the same cluster, another run) is refused them, and the run refuses a
cluster somebody else holds, saying who (--force takes it over).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := fillRunOptions(cmd, e, &ro, dir, parallel); err != nil {
				return err
			}
			if len(args) == 1 && !all && !ro.Solve && !wrongFixes {
				if junit != "" {
					return errors.New("--junit needs a run that grades by itself: add --solve or --wrong-fixes")
				}
				ro.ID = args[0]
				return session.Run(cmd.Context(), ro)
			}
			return exercise(cmd, session.ExerciseOptions{
				Provider: ro.Provider, Source: ro.Source, IDs: args, All: all, Cluster: ro.Cluster, Keep: ro.Keep,
				Solve: ro.Solve, WrongFixes: wrongFixes, NoResets: noResets, Out: ro.Out, Log: ro.Log, Svclab: ro.Svclab,
				Owners: ro.Owners, Backend: ro.Backend, Force: ro.Force, Parallel: parallel,
			}, junit)
		},
	}
	run.Flags().StringVar(&ro.Cluster, "cluster", "", "the cluster to run on (the base name with several shapes); created (and deleted afterwards) when it does not exist (default: clusters of the run's own, ex-XXXXX)")
	run.Flags().BoolVar(&ro.Force, "force", false, "take the clusters over when another svclab process or attempt holds them (theirs stops)")
	run.Flags().BoolVar(&ro.Keep, "keep", false, "keep the clusters and the scenario when done")
	run.Flags().BoolVar(&ro.Solve, "solve", false, "run the reference solution instead of waiting for you")
	run.Flags().BoolVar(&all, "all", false, "run every scenario (with --solve and/or --wrong-fixes)")
	run.Flags().BoolVar(&wrongFixes, "wrong-fixes", false, "try each scenario's plausible wrong fixes: the checks must reject them")
	run.Flags().BoolVar(&noResets, "no-resets", false, "skip what needs a scenario set up a second time (wrong fixes without an undo, other solutions): a quicker run")
	run.Flags().StringVar(&junit, "junit", "", "write a JUnit XML report to this file")
	run.Flags().StringVar(&dir, "dir", "", "take the scenarios from this directory instead of the built-in ones")
	run.Flags().IntVar(&parallel, "parallel", 1, "how many clusters work at once: the scenarios of a shape are dealt out to that many clusters of it (each about 1 GiB and a share of the CPU)")
	c.AddCommand(run)
	return c
}

// exercise runs o and prints its summary (and writes a JUnit report to
// junit, when named); it fails with status 1 unless every scenario passed.
func exercise(cmd *cobra.Command, o session.ExerciseOptions, junit string) error {
	outcomes, err := session.Exercise(cmd.Context(), o)
	if len(outcomes) > 0 {
		session.PrintSummary(o.Out, outcomes)
		if junit != "" {
			if jerr := session.WriteJUnitFile(junit, outcomes); jerr != nil {
				err = errors.Join(err, jerr)
			} else {
				fmt.Fprintf(o.Out, "JUnit report: %s\n", junit)
			}
		}
	}
	if err != nil {
		return err
	}
	for _, out := range outcomes {
		if !out.Passed() {
			return &ExitError{Code: 1}
		}
	}
	return nil
}

// fillRunOptions sets what every exercise run takes from the command line
// and svclab's environment: the provider, the log, the terminal, svclab
// itself, the scenarios' directory, the cluster claims; it checks the
// cluster name and the number of clusters at once.
func fillRunOptions(cmd *cobra.Command, e *env, ro *session.RunOptions, dir string, parallel int) error {
	var err error
	ro.Log = e.log
	if ro.Provider, err = e.provider(); err != nil {
		return err
	}
	ro.In, ro.Out = os.Stdin, cmd.OutOrStdout()
	if exe, err := os.Executable(); err == nil {
		ro.Svclab = []string{exe, "--state-dir", e.stateDir}
	}
	if dir != "" {
		src := scenario.DirSource(dir)
		ro.Source = &src
	}
	if ro.Cluster != "" {
		if err := cluster.ValidateName(ro.Cluster); err != nil {
			return err
		}
	}
	if ro.Owners, err = e.owners(cmd); err != nil {
		return err
	}
	ro.Backend = e.backend
	if parallel < 1 || parallel > 8 {
		return fmt.Errorf("--parallel %d: give 1 to 8 clusters", parallel)
	}
	return nil
}
