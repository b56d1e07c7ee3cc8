package attempt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/session"
)

// The learner's commands ("svclab scenario start|check|hint|solve|reset|
// abandon|status|history", which cmd/svclab/internal/cli builds) as text:
// each Run function does what its Manager method does for the learner's
// latest attempt at a scenario and writes the outcome to out as the
// command line shows it.

// RunStart sets scenario id up on cluster clusterName (created with the
// scenario's shape when it does not exist), breaks it and prints the task,
// with the progress on the way.
func RunStart(ctx context.Context, m *Manager, out io.Writer, learner, id, clusterName string) error {
	s, err := m.Scenario(id)
	if err == nil {
		fmt.Fprintf(out, "Scenario %s: %s (%s, %s, about %d minutes)\n", s.ID, s.Title, s.Domain, s.Difficulty, s.EstimatedMinutes)
	}
	a, err := m.Start(ctx, learner, id, clusterName, cluster.NewTextProgress(out))
	if err != nil {
		return err
	}
	printTask(out, s, a)
	return nil
}

// RunCheck grades the attempt and prints each check's result, the score,
// the hints failed checks unlock, and the explanation once every check
// passes. It returns session.ErrNotPassed when a check did not pass.
func RunCheck(ctx context.Context, m *Manager, out io.Writer, learner, id string) error {
	a, s, err := active(ctx, m, learner, id)
	if err != nil {
		return err
	}
	rep, err := m.Check(ctx, a.ID)
	if rep != nil {
		session.PrintReport(out, s, rep)
		if rep.Passed {
			fmt.Fprintf(out, "\n── Explanation ──\n\n%s\n", strings.TrimSpace(s.Explanation))
			if len(s.Sources) > 0 {
				fmt.Fprintf(out, "\nSources:\n")
				for _, src := range s.Sources {
					fmt.Fprintf(out, "  %s: %s\n", src.For, src.URL)
				}
			}
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
}

// RunHint prints the next hint the learner has not seen, or all of them
// again when they have seen every one.
func RunHint(ctx context.Context, m *Manager, out io.Writer, learner, id string) error {
	a, s, err := active(ctx, m, learner, id)
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
}

// RunSolve runs the reference solution on the attempt's cluster, showing
// each command and its output.
func RunSolve(ctx context.Context, m *Manager, out io.Writer, learner, id string) error {
	a, s, err := active(ctx, m, learner, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "── Reference solution of %s on cluster %s ──\n\n", s.ID, a.Cluster)
	if err := m.Solve(ctx, a.ID, out); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nNow grade it: svclab scenario check %s\n", s.ID)
	return nil
}

// RunReset removes the attempt from its cluster and sets the scenario up
// again as a new attempt, printing the task.
func RunReset(ctx context.Context, m *Manager, out io.Writer, learner, id string) error {
	a, s, err := active(ctx, m, learner, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Scenario %s: %s\n", s.ID, s.Title)
	na, err := m.Reset(ctx, a.ID, cluster.NewTextProgress(out))
	if err != nil {
		return err
	}
	printTask(out, s, na)
	return nil
}

// RunAbandon removes the attempt from its cluster and records it as
// abandoned.
func RunAbandon(ctx context.Context, m *Manager, out io.Writer, learner, id string) error {
	a, _, err := active(ctx, m, learner, id)
	if err != nil {
		return err
	}
	if err := m.Abandon(ctx, a.ID); err != nil {
		return err
	}
	fmt.Fprintf(out, "Attempt %d at %s abandoned and removed from cluster %s.\n", a.ID, a.ScenarioID, a.Cluster)
	return nil
}

// RunStatus prints the learner's progress: each scenario's state, best
// score and hints used.
func RunStatus(ctx context.Context, m *Manager, out io.Writer, learner string) error {
	p, err := m.Progress(ctx, learner)
	if err != nil {
		return err
	}
	return printStatus(out, m.Catalog(), p, time.Now())
}

// RunHistory prints the check runs of the learner's latest attempt at
// scenario id.
func RunHistory(ctx context.Context, m *Manager, out io.Writer, learner, id string) error {
	a, _, err := active(ctx, m, learner, id)
	if err != nil {
		return err
	}
	runs, err := m.History(ctx, a.ID)
	if err != nil {
		return err
	}
	printHistory(out, a, runs)
	return nil
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
