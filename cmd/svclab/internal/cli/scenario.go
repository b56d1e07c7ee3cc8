package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/attempt"
	"github.com/svclab/svclab/lab/cluster/owner"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/store"
	"github.com/svclab/svclab/scenarios"
)

// newScenarioCommand returns "svclab scenario": lint and list, and the
// learner's commands on attempts (start, check, hint, solve, reset, ...).
func newScenarioCommand(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "scenario",
		Short: "Scenarios: list and lint them; start, check, hint, solve and reset attempts",
	}
	c.AddCommand(newScenarioLint(e), newScenarioList(e), newScenarioTest(e))
	c.AddCommand(newAttemptCommands(e)...)
	return c
}

// scenariosDir is where "svclab scenario lint" looks without arguments.
const scenariosDir = "scenarios"

// builtIn is the scenarios built into svclab.
var builtIn = scenarios.Source()

// lintSources are the directories given, or the scenarios directory of
// the working tree if there is one, or the scenarios built into svclab.
func lintSources(dirs []string) []scenario.Source {
	if len(dirs) == 0 {
		if fi, err := os.Stat(scenariosDir); err == nil && fi.IsDir() {
			return []scenario.Source{scenario.DirSource(scenariosDir)}
		}
		return []scenario.Source{builtIn}
	}
	out := make([]scenario.Source, len(dirs))
	for i, d := range dirs {
		out[i] = scenario.DirSource(d)
	}
	return out
}

func newScenarioLint(e *env) *cobra.Command {
	return &cobra.Command{
		Use:           "lint [DIR...]",
		SilenceUsage:  true,
		SilenceErrors: true,
		Short:         "Check scenarios: the format, the manifests, faults and checks",
		Long: `Check every scenario in each DIR (a directory of scenario directories, or a
single scenario directory) and print every problem as FILE:LINE: FIELD: MESSAGE.
Without DIR it checks ./scenarios, or the scenarios built into svclab when
there is no such directory. Exits 1 when there are problems.`,
		RunE: func(c *cobra.Command, args []string) error {
			cat, problems := scenario.Load(scenario.Options{Logger: e.log}, lintSources(args)...)
			return lintReport(c.OutOrStdout(), cat, problems)
		},
	}
}

// lintReport prints the problems, one a line, and a summary; an
// ExitError when there are problems.
func lintReport(w io.Writer, cat *scenario.Catalog, problems scenario.Problems) error {
	for _, p := range problems {
		fmt.Fprintln(w, p)
	}
	if len(problems) > 0 {
		n := plural(len(problems), "problem")
		fmt.Fprintf(w, "%s; %s clean\n", n, plural(len(cat.Scenarios), "scenario"))
		return &ExitError{Code: 1, Msg: n}
	}
	fmt.Fprintf(w, "%s, no problems\n", plural(len(cat.Scenarios), "scenario"))
	return nil
}

// plural is "1 noun" or "N nouns".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func newScenarioList(e *env) *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:          "list",
		SilenceUsage: true,
		Short:        "List the scenarios",
		Args:         cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			src := builtIn
			if dir != "" {
				src = scenario.DirSource(dir)
			}
			cat, problems := scenario.Load(scenario.Options{Logger: e.log}, src)
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tDOMAIN\tDIFFICULTY\tMINUTES\tTITLE")
			for _, s := range cat.Scenarios {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", s.ID, s.Domain, s.Difficulty, s.EstimatedMinutes, s.Title)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(problems) > 0 {
				fmt.Fprintf(c.ErrOrStderr(), "%d problems hide the scenarios that have them; see svclab scenario lint\n", len(problems))
			}
			return nil
		},
	}
	c.Flags().StringVar(&dir, "dir", "", "list the scenarios in this directory instead of the built-in ones")
	return c
}

// newAttemptCommands returns the learner's commands: start, check, hint,
// solve, reset, abandon, status and history (package attempt does the
// work; each command opens the store and a Manager, as a new process).
func newAttemptCommands(e *env) []*cobra.Command {
	var (
		learner, clusterName string
		force                bool
	)
	type body func(ctx context.Context, m *attempt.Manager, out io.Writer, args []string) error
	cmd := func(use, short, long string, args cobra.PositionalArgs, run body) *cobra.Command {
		c := &cobra.Command{Use: use, Short: short, Long: long, Args: args, SilenceUsage: true, RunE: func(cmd *cobra.Command, args []string) error {
			a, err := e.openAttempts(cmd, force)
			if err != nil {
				return err
			}
			defer a.close()
			return run(cmd.Context(), a.manager, cmd.OutOrStdout(), args)
		}}
		c.Flags().StringVar(&learner, "learner", store.LocalLearner, "whose attempt (classrooms; the local learner by default)")
		return c
	}

	start := cmd("start ID", "Set a scenario up on a lab cluster, break it and print the task",
		`Set scenario ID up on cluster --cluster (created with the scenario's shape
when it does not exist), inject its faults and print the task. The attempt is
recorded: check, hint, solve and reset work on it from any later svclab
process.`, cobra.ExactArgs(1),
		func(ctx context.Context, m *attempt.Manager, out io.Writer, args []string) error {
			return inUseAdvice(attempt.RunStart(ctx, m, out, learner, args[0], clusterName), "--cluster NAME uses another; ")
		})
	start.Flags().StringVar(&clusterName, "cluster", "lab", "the cluster to use; created with the scenario's shape when it does not exist")
	start.Flags().BoolVar(&force, "force", false, "take the cluster over when another svclab process or attempt holds it (theirs stops)")

	check := cmd("check ID", "Grade your fix: each check, the score and the hints failed checks unlock",
		`Grade your attempt at scenario ID against what the cluster really does, print
each check's result, the score and the hints that failed checks unlock, and the
explanation once every check passes. The check run is recorded. Exits 0 only
when every check passed.`, cobra.ExactArgs(1),
		func(ctx context.Context, m *attempt.Manager, out io.Writer, args []string) error {
			return attempt.RunCheck(ctx, m, out, learner, args[0])
		})

	hint := cmd("hint ID", "Show the next hint", `Show the next hint of your attempt at scenario ID that you have not seen
(hints that failed checks unlocked count as seen), and record it.`, cobra.ExactArgs(1),
		func(ctx context.Context, m *attempt.Manager, out io.Writer, args []string) error {
			return attempt.RunHint(ctx, m, out, learner, args[0])
		})

	solve := cmd("solve ID", "Apply the reference solution", `Run the reference solution of scenario ID on your attempt's cluster, showing
each command and its output; then grade it with svclab scenario check ID. The
attempt records that the solution was used.`, cobra.ExactArgs(1),
		func(ctx context.Context, m *attempt.Manager, out io.Writer, args []string) error {
			return attempt.RunSolve(ctx, m, out, learner, args[0])
		})

	reset := cmd("reset ID", "Start a scenario over: remove it and set it up again", `Remove your attempt at scenario ID from its cluster (it is recorded as
abandoned, unless it passed) and set the scenario up again, broken, as a new
attempt.`, cobra.ExactArgs(1),
		func(ctx context.Context, m *attempt.Manager, out io.Writer, args []string) error {
			return inUseAdvice(attempt.RunReset(ctx, m, out, learner, args[0]), "")
		})
	reset.Flags().BoolVar(&force, "force", false, "take the cluster over when another svclab process or attempt holds it (theirs stops)")

	abandon := cmd("abandon ID", "Stop working on a scenario and remove it from its cluster", `Remove your attempt at scenario ID from its cluster (reverting its faults)
and record it as abandoned. The cluster stays.`, cobra.ExactArgs(1),
		func(ctx context.Context, m *attempt.Manager, out io.Writer, args []string) error {
			return attempt.RunAbandon(ctx, m, out, learner, args[0])
		})

	status := cmd("status", "Your progress: each scenario's state, best score and hints used", "", cobra.NoArgs,
		func(ctx context.Context, m *attempt.Manager, out io.Writer, _ []string) error {
			return attempt.RunStatus(ctx, m, out, learner)
		})

	history := cmd("history ID", "The check runs of your latest attempt at a scenario", "", cobra.ExactArgs(1),
		func(ctx context.Context, m *attempt.Manager, out io.Writer, args []string) error {
			return attempt.RunHistory(ctx, m, out, learner, args[0])
		})

	return []*cobra.Command{start, check, hint, solve, reset, abandon, status, history}
}

// inUseAdvice adds the command line's ways out to an error that says
// somebody else holds the cluster.
func inUseAdvice(err error, other string) error {
	if !owner.IsInUse(err) {
		return err
	}
	return fmt.Errorf("%w (%s--force takes this one over, and the holder's work there stops)", err, other)
}
