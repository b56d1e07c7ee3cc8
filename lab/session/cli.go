package session

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/owner"
	"github.com/svclab/svclab/lab/cmdenv"
	"github.com/svclab/svclab/lab/faults"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/kubebin"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/scenarios"
)

// RunOptions configure one exercise run.
type RunOptions struct {
	Provider cluster.Provider
	// Source holds the scenarios (default: the ones built into svclab).
	Source *scenario.Source
	ID     string
	// Cluster is the cluster to use; it is created when it does not exist
	// (empty: a cluster of the run's own, under a random name).
	Cluster string
	// Keep leaves the cluster (and the scenario on it) in place.
	Keep bool
	// Owners, Backend and Force claim the cluster while the run uses it
	// (ExerciseOptions).
	Owners  *owner.Registry
	Backend string
	Force   bool
	// Solve runs the reference solution instead of waiting for the learner.
	Solve bool
	// KubeBin finds svclab-kube (default kubebin.Locate).
	KubeBin func(ctx context.Context) (string, error)
	In      io.Reader
	Out     io.Writer
	Log     *slog.Logger
	// Svclab runs svclab in the solution's commands (Options.Svclab).
	Svclab []string
}

// ExitError ends svclab with a code after the run printed why.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// ExitCode is the process's exit code.
func (e *ExitError) ExitCode() int { return e.Code }

// SolveGradeTimeout bounds how long a solved run waits for the checks to
// pass: the dataplane follows the fix within seconds.
const SolveGradeTimeout = time.Minute

// Run is "svclab exercise run": set the scenario up, let the learner (or
// the reference solution) fix it, grade, explain, clean up.
func Run(ctx context.Context, o RunOptions) error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	src := scenario.Source{FS: scenarios.FS, Display: "scenarios (built in)"}
	if o.Source != nil {
		src = *o.Source
	}
	reg := faults.Registry()
	cat, problems := scenario.Load(scenario.Options{Faults: reg, Logger: o.Log}, src)
	s := cat.Get(o.ID)
	if s == nil {
		if len(problems) > 0 {
			return fmt.Errorf("no valid scenario %q; svclab scenario lint shows %d problems (%v)", o.ID, len(problems), problems[0])
		}
		return fmt.Errorf("no scenario %q; the scenarios are %s (svclab scenario list)", o.ID, strings.Join(cat.IDs(), ", "))
	}
	for _, f := range s.Faults {
		if _, err := faults.Lookup(reg, f.Name); err != nil {
			return fmt.Errorf("scenario %s cannot run yet: %w", s.ID, err)
		}
	}
	if o.KubeBin == nil {
		o.KubeBin = func(ctx context.Context) (string, error) { return kubebin.Locate(ctx, nil) }
	}
	out := o.Out
	progress := cluster.NewTextProgress(out)

	fmt.Fprintf(out, "Scenario %s: %s (%s, %s, about %d minutes)\n", s.ID, s.Title, s.Domain, s.Difficulty, s.EstimatedMinutes)
	if o.Cluster == "" {
		var err error
		if o.Cluster, err = ownClusterBase(ctx, o.Provider); err != nil {
			return err
		}
	}
	lease, err := claimCluster(ctx, o.Owners, o.Backend, o.Cluster, o.Force)
	if err != nil {
		return err
	}
	defer lease.Release()
	c, created, err := EnsureCluster(ctx, o.Provider, o.Cluster, s.Cluster, progress)
	if err != nil {
		return err
	}
	ses, err := Start(ctx, s, c, Options{Faults: reg, Progress: progress, Log: o.Log, Svclab: o.Svclab})
	cleanup := func() error {
		if o.Keep {
			fmt.Fprintf(out, "\nThe cluster %s stays, with the scenario on it: svclab kubectl --name %s get pods -A\n", c.Name(), c.Name())
			return nil
		}
		// The run may have been interrupted: clean up regardless.
		ctx := context.WithoutCancel(ctx)
		if created {
			fmt.Fprintf(out, "\nDeleting cluster %s (--keep keeps it)\n", c.Name())
			return o.Provider.Delete(ctx, c.Name())
		}
		if ses == nil || ses.apply == nil {
			return nil
		}
		fmt.Fprintf(out, "\nRemoving the scenario from cluster %s (--keep keeps it)\n", c.Name())
		return ses.Teardown(ctx, false)
	}
	if err != nil {
		return errors.Join(err, cleanup())
	}

	fmt.Fprintf(out, "\n── Task ──\n\n%s\n", strings.TrimSpace(s.Task))
	fmt.Fprintf(out, "\nThe cluster is %s: svclab kubectl --name %s ...; svclab node exec --name %s %s-worker -- ...\n", c.Name(), c.Name(), c.Name(), c.Name())
	var rep *grade.Report
	if o.Solve {
		bin, err := o.KubeBin(ctx)
		if err != nil {
			return errors.Join(err, cleanup())
		}
		fmt.Fprintf(out, "\n── Reference solution ──\n\n")
		if err := ses.Solve(ctx, bin, out); err != nil {
			return errors.Join(err, cleanup())
		}
		rep = ses.GradeUntilPassed(ctx, SolveGradeTimeout)
		PrintReport(out, s, rep)
	} else {
		in := bufio.NewReader(o.In)
		for {
			fmt.Fprintf(out, "\nFix it, then press Enter to grade (q and Enter to stop): ")
			line, err := in.ReadString('\n')
			if strings.TrimSpace(line) == "q" || (err != nil && line == "") {
				break
			}
			if err := askQuestions(in, out, ses); err != nil {
				return errors.Join(err, cleanup())
			}
			rep = ses.Grade(ctx)
			PrintReport(out, s, rep)
			if rep.Passed {
				break
			}
		}
	}
	if rep != nil && rep.Passed {
		fmt.Fprintf(out, "\n── Explanation ──\n\n%s\n", strings.TrimSpace(s.Explanation))
	}
	if err := cleanup(); err != nil {
		return err
	}
	if rep == nil || !rep.Passed {
		return &ExitError{Code: 1}
	}
	return nil
}

// askQuestions asks the scenario's answer checks' questions, showing the
// answer given so far; an empty line keeps it.
func askQuestions(in *bufio.Reader, out io.Writer, ses *Session) error {
	answers := ses.Answers()
	for _, c := range ses.Scenario.Checks {
		if c.Answer == nil {
			continue
		}
		fmt.Fprintf(out, "\n%s\n", strings.TrimSpace(c.Answer.Question))
		if a := answers[c.ID]; a != "" {
			fmt.Fprintf(out, "(your answer so far: %s; Enter keeps it)\n", a)
		}
		fmt.Fprint(out, "> ")
		line, err := in.ReadString('\n')
		if text := strings.TrimSpace(line); text != "" {
			if serr := ses.SetAnswer(c.ID, text); serr != nil {
				fmt.Fprintf(out, "Not taken: %v\n", serr)
			}
		}
		if err != nil {
			return nil // input ended: grade what there is
		}
	}
	return nil
}

// PrintReport writes the per-check results, the score and the hints that
// failed checks unlock.
func PrintReport(w io.Writer, s *scenario.Scenario, rep *grade.Report) {
	fmt.Fprintf(w, "\n── Grade ──\n\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range rep.Results {
		mark := "✓"
		if !r.Passed {
			mark = "✗"
		}
		fmt.Fprintf(tw, " %s\t%s\t%g\t%s\n", mark, r.ID, r.Weight, r.Message)
		if !r.Passed && r.Full() != "" {
			d := r.Full()
			if r.ExpectedAfterHint > 0 {
				d += fmt.Sprintf(" (what it should be shows once you have seen hint %d)", r.ExpectedAfterHint)
			}
			fmt.Fprintf(tw, " \t\t\t%s\n", d)
		}
	}
	tw.Flush()
	verdict := "passed"
	if !rep.Passed {
		verdict = "not yet"
	}
	fmt.Fprintf(w, "\nScore: %s — %s (graded in %s)\n", rep.ScoreText(), verdict, rep.Duration.Round(100*time.Millisecond))
	for _, h := range rep.UnlockedHints {
		if h >= 1 && h <= len(s.Hints) {
			fmt.Fprintf(w, "\nHint %d:\n%s\n", h, indent(strings.TrimSpace(s.Hints[h-1])))
		}
	}
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

// NewCommand returns "svclab exercise" with its run subcommand.
func NewCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "exercise",
		Short: "Self-graded exercise runs: set a scenario up, fix it (or let svclab), grade",
	}
	var o RunOptions
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
cluster: --cluster names the default shape's (3 nodes, nftables), the
others get a suffix (-n4, -ipt, -zXXXX). A summary table follows, and with
--junit FILE a JUnit XML report.

Afterwards a cluster is deleted if the run created it, or the scenario
removed from it; --keep leaves both. Exits 1 unless every check (or step)
passed.

The run holds its clusters while it runs: another svclab process (a web UI
on the same cluster, another run) is refused them, and the run refuses a
cluster somebody else holds, saying who (--force takes it over).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := cmdenv.Of(cmd)
			if err != nil {
				return err
			}
			stateDir := env.StateDir
			o.Log = env.Log
			if o.Provider, err = env.Provider(); err != nil {
				return err
			}
			o.In, o.Out = os.Stdin, cmd.OutOrStdout()
			if exe, err := os.Executable(); err == nil {
				o.Svclab = []string{exe, "--state-dir", stateDir}
			}
			if dir != "" {
				src := scenario.DirSource(dir)
				o.Source = &src
			}
			if o.Cluster != "" {
				if err := cluster.ValidateName(o.Cluster); err != nil {
					return err
				}
			}
			owners, err := owner.New(owner.Options{Command: cmd.CommandPath(), StateDir: stateDir})
			if err != nil {
				return err
			}
			o.Owners, o.Backend = owners, env.Backend
			if parallel < 1 || parallel > 8 {
				return fmt.Errorf("--parallel %d: give 1 to 8 clusters", parallel)
			}
			if len(args) == 1 && !all && !o.Solve && !wrongFixes {
				if junit != "" {
					return errors.New("--junit needs a run that grades by itself: add --solve or --wrong-fixes")
				}
				o.ID = args[0]
				return Run(cmd.Context(), o)
			}
			outcomes, err := Exercise(cmd.Context(), ExerciseOptions{
				Provider: o.Provider, Source: o.Source, IDs: args, All: all, Cluster: o.Cluster, Keep: o.Keep,
				Solve: o.Solve, WrongFixes: wrongFixes, NoResets: noResets, Out: o.Out, Log: o.Log, Svclab: o.Svclab,
				Owners: o.Owners, Backend: o.Backend, Force: o.Force, Parallel: parallel,
			})
			if len(outcomes) > 0 {
				PrintSummary(o.Out, outcomes)
				if junit != "" {
					if jerr := writeJUnitFile(junit, outcomes); jerr != nil {
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
		},
	}
	run.Flags().StringVar(&o.Cluster, "cluster", "", "the cluster to run on (the base name with several shapes); created (and deleted afterwards) when it does not exist (default: clusters of the run's own, ex-XXXXX)")
	run.Flags().BoolVar(&o.Force, "force", false, "take the clusters over when another svclab process or attempt holds them (theirs stops)")
	run.Flags().BoolVar(&o.Keep, "keep", false, "keep the clusters and the scenario when done")
	run.Flags().BoolVar(&o.Solve, "solve", false, "run the reference solution instead of waiting for you")
	run.Flags().BoolVar(&all, "all", false, "run every scenario (with --solve and/or --wrong-fixes)")
	run.Flags().BoolVar(&wrongFixes, "wrong-fixes", false, "try each scenario's plausible wrong fixes: the checks must reject them")
	run.Flags().BoolVar(&noResets, "no-resets", false, "skip what needs a scenario set up a second time (wrong fixes without an undo, other solutions): a quicker run")
	run.Flags().StringVar(&junit, "junit", "", "write a JUnit XML report to this file")
	run.Flags().StringVar(&dir, "dir", "", "take the scenarios from this directory instead of the built-in ones")
	run.Flags().IntVar(&parallel, "parallel", 1, "how many clusters work at once: the scenarios of a shape are dealt out to that many clusters of it (each about 1 GiB and a share of the CPU)")
	c.AddCommand(run)
	return c
}
