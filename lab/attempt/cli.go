package attempt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/owner"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/session"
	"github.com/svclab/svclab/lab/store"
)

// Env is what the commands take from svclab's root command.
type Env struct {
	// StateDir is the state directory (the database is svclab.db in it).
	StateDir func() string
	// DatabaseURL, when set and not empty, is the PostgreSQL database
	// (--database-url) to use instead of svclab.db in the state directory.
	DatabaseURL func() string
	// Provider is the cluster backend.
	Provider func() (cluster.Provider, error)
	Log      func() *slog.Logger
	// Customize, when set, adjusts the manager's options (tests use it
	// to put fakes in).
	Customize func(*Options)
}

// AddCommands adds the learner's commands (start, check, hint, solve, reset,
// abandon, status, history) to "svclab scenario".
func AddCommands(parent *cobra.Command, env Env) {
	var (
		learner string
		force   bool
	)
	open := func(cmd *cobra.Command) (*Manager, func(), error) {
		log := env.Log()
		databaseURL := ""
		if env.DatabaseURL != nil {
			databaseURL = env.DatabaseURL()
		}
		st, err := store.Open(cmd.Context(), store.Location(env.StateDir(), databaseURL), store.Options{Log: log})
		if err != nil {
			return nil, nil, err
		}
		p, err := env.Provider()
		if err != nil {
			st.Close()
			return nil, nil, err
		}
		owners, err := owner.New(owner.Options{Command: cmd.CommandPath(), StateDir: env.StateDir()})
		if err != nil {
			st.Close()
			return nil, nil, err
		}
		opts := Options{Store: st, Provider: p, Log: log, StateDir: env.StateDir(), Owners: owners, TakeOver: force}
		if env.Customize != nil {
			env.Customize(&opts)
		}
		m, err := New(opts)
		if err != nil {
			st.Close()
			return nil, nil, err
		}
		return m, func() { st.Close() }, nil
	}
	// run wraps a command's body with the manager.
	run := func(body func(ctx context.Context, m *Manager, out io.Writer, args []string) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			m, done, err := open(cmd)
			if err != nil {
				return err
			}
			defer done()
			return body(cmd.Context(), m, cmd.OutOrStdout(), args)
		}
	}
	cmd := func(use, short, long string, args cobra.PositionalArgs, body func(ctx context.Context, m *Manager, out io.Writer, args []string) error) *cobra.Command {
		c := &cobra.Command{Use: use, Short: short, Long: long, Args: args, SilenceUsage: true, RunE: run(body)}
		c.Flags().StringVar(&learner, "learner", store.LocalLearner, "whose attempt (classrooms; the local learner by default)")
		return c
	}

	var clusterName string
	start := cmd("start ID", "Set a scenario up on a lab cluster, break it and print the task",
		`Set scenario ID up on cluster --cluster (created with the scenario's shape
when it does not exist), inject its faults and print the task. The attempt is
recorded: check, hint, solve and reset work on it from any later svclab
process.`, cobra.ExactArgs(1),
		func(ctx context.Context, m *Manager, out io.Writer, args []string) error {
			s, err := m.Scenario(args[0])
			if err == nil {
				fmt.Fprintf(out, "Scenario %s: %s (%s, %s, about %d minutes)\n", s.ID, s.Title, s.Domain, s.Difficulty, s.EstimatedMinutes)
			}
			a, err := m.Start(ctx, learner, args[0], clusterName, cluster.NewTextProgress(out))
			if err != nil {
				return inUseAdvice(err, "--cluster NAME uses another; ")
			}
			printTask(out, s, a)
			return nil
		})
	start.Flags().StringVar(&clusterName, "cluster", "lab", "the cluster to use; created with the scenario's shape when it does not exist")
	start.Flags().BoolVar(&force, "force", false, "take the cluster over when another svclab process or attempt holds it (theirs stops)")

	check := cmd("check ID", "Grade your fix: each check, the score and the hints failed checks unlock",
		`Grade your attempt at scenario ID against what the cluster really does, print
each check's result, the score and the hints that failed checks unlock, and the
explanation once every check passes. The check run is recorded. Exits 0 only
when every check passed.`, cobra.ExactArgs(1),
		func(ctx context.Context, m *Manager, out io.Writer, args []string) error {
			a, s, err := active(ctx, m, learner, args[0])
			if err != nil {
				return err
			}
			rep, err := m.Check(ctx, a.ID)
			if rep != nil {
				session.PrintReport(out, s, rep)
				if rep.Passed {
					fmt.Fprintf(out, "\n── Explanation ──\n\n%s\n", strings.TrimSpace(s.Explanation))
				}
			}
			if err != nil {
				return err
			}
			if !rep.Passed {
				fmt.Fprintf(out, "\nNot there yet. Stuck? svclab scenario hint %s\n", s.ID)
				return session.ErrNotPassed
			}
			return nil
		})

	hint := cmd("hint ID", "Show the next hint", `Show the next hint of your attempt at scenario ID that you have not seen
(hints that failed checks unlocked count as seen), and record it.`, cobra.ExactArgs(1),
		func(ctx context.Context, m *Manager, out io.Writer, args []string) error {
			a, s, err := active(ctx, m, learner, args[0])
			if err != nil {
				return err
			}
			i, text, err := m.Hint(ctx, a.ID)
			if errors.Is(err, ErrNoMoreHints) {
				fmt.Fprintf(out, "You have seen all %d hints. Here they are again:\n", len(s.Hints))
				for i, h := range s.Hints {
					fmt.Fprintf(out, "\nHint %d of %d:\n%s\n", i+1, len(s.Hints), indent(h))
				}
				fmt.Fprintf(out, "\nStill stuck? svclab scenario solve %s applies the reference solution.\n", s.ID)
				return nil
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "Hint %d of %d:\n%s\n", i, len(s.Hints), indent(text))
			return nil
		})

	solve := cmd("solve ID", "Apply the reference solution", `Run the reference solution of scenario ID on your attempt's cluster, showing
each command and its output; then grade it with svclab scenario check ID. The
attempt records that the solution was used.`, cobra.ExactArgs(1),
		func(ctx context.Context, m *Manager, out io.Writer, args []string) error {
			a, s, err := active(ctx, m, learner, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "── Reference solution of %s on cluster %s ──\n\n", s.ID, a.Cluster)
			if err := m.Solve(ctx, a.ID, out); err != nil {
				return err
			}
			fmt.Fprintf(out, "\nNow grade it: svclab scenario check %s\n", s.ID)
			return nil
		})

	reset := cmd("reset ID", "Start a scenario over: remove it and set it up again", `Remove your attempt at scenario ID from its cluster (it is recorded as
abandoned, unless it passed) and set the scenario up again, broken, as a new
attempt.`, cobra.ExactArgs(1),
		func(ctx context.Context, m *Manager, out io.Writer, args []string) error {
			a, s, err := active(ctx, m, learner, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "Scenario %s: %s\n", s.ID, s.Title)
			na, err := m.Reset(ctx, a.ID, cluster.NewTextProgress(out))
			if err != nil {
				return inUseAdvice(err, "")
			}
			printTask(out, s, na)
			return nil
		})
	reset.Flags().BoolVar(&force, "force", false, "take the cluster over when another svclab process or attempt holds it (theirs stops)")

	abandon := cmd("abandon ID", "Stop working on a scenario and remove it from its cluster", `Remove your attempt at scenario ID from its cluster (reverting its faults)
and record it as abandoned. The cluster stays.`, cobra.ExactArgs(1),
		func(ctx context.Context, m *Manager, out io.Writer, args []string) error {
			a, _, err := active(ctx, m, learner, args[0])
			if err != nil {
				return err
			}
			if err := m.Abandon(ctx, a.ID); err != nil {
				return err
			}
			fmt.Fprintf(out, "Attempt %d at %s abandoned and removed from cluster %s.\n", a.ID, a.ScenarioID, a.Cluster)
			return nil
		})

	status := cmd("status", "Your progress: each scenario's state, best score and hints used", "", cobra.NoArgs,
		func(ctx context.Context, m *Manager, out io.Writer, _ []string) error {
			p, err := m.Progress(ctx, learner)
			if err != nil {
				return err
			}
			return printStatus(out, m.Catalog(), p, time.Now())
		})

	history := cmd("history ID", "The check runs of your latest attempt at a scenario", "", cobra.ExactArgs(1),
		func(ctx context.Context, m *Manager, out io.Writer, args []string) error {
			a, _, err := active(ctx, m, learner, args[0])
			if err != nil {
				return err
			}
			runs, err := m.History(ctx, a.ID)
			if err != nil {
				return err
			}
			printHistory(out, a, runs)
			return nil
		})

	parent.AddCommand(start, check, hint, solve, reset, abandon, status, history)
}

// active is the learner's latest attempt at scenario id, unless there is
// none or it was abandoned.
func active(ctx context.Context, m *Manager, learner, id string) (*Attempt, *scenario.Scenario, error) {
	s, err := m.Scenario(id)
	if err != nil {
		return nil, nil, err
	}
	a, err := m.Latest(ctx, learner, id)
	switch {
	case err != nil:
		return nil, nil, err
	case a == nil:
		return nil, nil, fmt.Errorf("you have not started scenario %s: svclab scenario start %s", id, id)
	case a.State == StateAbandoned:
		return nil, nil, fmt.Errorf("your last attempt at %s (%d) was abandoned: svclab scenario start %s", id, a.ID, id)
	}
	return a, s, nil
}

func indent(s string) string { return "  " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n  ") }

func printTask(w io.Writer, s *scenario.Scenario, a *Attempt) {
	fmt.Fprintf(w, "\n── Task ──\n\n%s\n", strings.TrimSpace(s.Task))
	fmt.Fprintf(w, "\nAttempt %d on cluster %s: svclab kubectl --name %s ...; svclab node exec --name %s %s-worker -- ...\n", a.ID, a.Cluster, a.Cluster, a.Cluster, a.Cluster)
	fmt.Fprintf(w, "When you think it is fixed: svclab scenario check %s. Stuck? svclab scenario hint %s\n", s.ID, s.ID)
}

// printStatus writes a table of the learner's progress, one scenario a row
// in catalog order, then any other scenario they attempted.
func printStatus(w io.Writer, cat *scenario.Catalog, p map[string]Status, now time.Time) error {
	ids := cat.IDs()
	var extra []string
	for id := range p {
		if cat.Get(id) == nil {
			extra = append(extra, id)
		}
	}
	sort.Strings(extra)
	ids = append(ids, extra...)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var errs []string
	fmt.Fprintln(tw, "SCENARIO\tSTATE\tBEST SCORE\tHINTS\tATTEMPTS\tLAST CHECK\tCLUSTER")
	for _, id := range ids {
		st := p[id]
		score, last, where := "-", "-", "-"
		if st.MaxScore > 0 {
			score = grade.FormatScore(float64(st.BestScore), float64(st.MaxScore))
		}
		if !st.LastCheck.IsZero() {
			verdict := "failed"
			if st.LastCheckPassed {
				verdict = "passed"
			}
			last = fmt.Sprintf("%s ago, %s", ago(now.Sub(st.LastCheck)), verdict)
		}
		state := st.State
		if state == "" {
			state = NotStarted
		}
		if st.Latest != nil {
			where = st.Latest.Cluster
			if st.Latest.State == StateErrored {
				state += " (errored)"
				errs = append(errs, fmt.Sprintf("%s: %s", id, orUnknown(st.Latest.Error)))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", id, state, score, st.HintsUsed, st.Attempts, last, where)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(errs) > 0 {
		fmt.Fprintf(w, "\nErrored attempts (svclab scenario reset ID starts over):\n  %s\n", strings.Join(errs, "\n  "))
	}
	return nil
}

func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func printHistory(w io.Writer, a *Attempt, runs []CheckRun) {
	fmt.Fprintf(w, "Attempt %d at %s on cluster %s: %s", a.ID, a.ScenarioID, a.Cluster, a.State)
	if a.Error != "" {
		fmt.Fprintf(w, " (%s)", a.Error)
	}
	fmt.Fprintln(w)
	if len(runs) == 0 {
		fmt.Fprintln(w, "No check runs yet.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tWHEN\tBY\tSCORE\tRESULT\tFAILED CHECKS")
	for i, r := range runs {
		verdict := "failed"
		if r.Passed {
			verdict = "passed"
		}
		var failed []string
		for _, c := range r.Results {
			if !c.Passed {
				failed = append(failed, c.CheckID)
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", i+1, r.At.UTC().Format(time.DateTime), r.Trigger, grade.FormatScore(r.Score, r.MaxScore), verdict, strings.Join(failed, " "))
	}
	tw.Flush()
}

// inUseAdvice adds the command line's ways out to an error that says
// somebody else holds the cluster.
func inUseAdvice(err error, other string) error {
	if !owner.IsInUse(err) {
		return err
	}
	return fmt.Errorf("%w (%s--force takes this one over, and the holder's work there stops)", err, other)
}
