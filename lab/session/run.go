package session

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/owner"
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

// ErrNotPassed is Run's error when the scenario was not passed; the run
// has printed the grade already.
var ErrNotPassed = errors.New("the scenario was not passed")

// SolveGradeTimeout bounds how long a solved run waits for the checks to
// pass: the dataplane follows the fix within seconds.
const SolveGradeTimeout = time.Minute

// Run is "svclab exercise run": set the scenario up, let the learner (or
// the reference solution) fix it, grade, explain, clean up.
func Run(ctx context.Context, o RunOptions) error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	src := scenarios.Source()
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
		return ErrNotPassed
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
