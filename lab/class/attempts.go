package class

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/svclab/svclab/lab/attempt"
	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/grade"
)

// The calls below run a learner's scenarios on their own lab through
// lab/attempt (Options.Attempts), authorize them, count them as activity
// in the lab and show them on the board. lab/store knows the learner by
// their id.

func (cr *Classroom) attempts() (*attempt.Manager, error) {
	if cr.opts.Attempts == nil {
		return nil, errors.New("this classroom runs no scenarios (no attempt manager)")
	}
	return cr.opts.Attempts, nil
}

func (cr *Classroom) inClass(scenarioID string) error {
	if !slices.Contains(cr.Class.Scenarios, scenarioID) {
		return fmt.Errorf("scenario %q is not part of this class: its scenarios are %s", scenarioID, strings.Join(cr.Class.Scenarios, ", "))
	}
	return nil
}

// current is the attempt p works on at scenarioID (running, or errored:
// see attempt.Manager.Current).
func (cr *Classroom) current(ctx context.Context, p Principal, scenarioID string) (*attempt.Manager, *attempt.Attempt, error) {
	if err := Authorize(p, cr.Class.ID, p.LearnerID, Write); err != nil {
		return nil, nil, err
	}
	if err := cr.inClass(scenarioID); err != nil {
		return nil, nil, err
	}
	m, err := cr.attempts()
	if err != nil {
		return nil, nil, err
	}
	a, err := m.Current(ctx, p.LearnerID, scenarioID)
	if err != nil {
		return nil, nil, err
	}
	if a == nil {
		return nil, nil, fmt.Errorf("you have not started %s yet: start it first", scenarioID)
	}
	cr.Labs.Touch(p.LearnerID)
	return m, a, nil
}

// StartScenario sets scenarioID up on p's lab cluster.
func (cr *Classroom) StartScenario(ctx context.Context, p Principal, scenarioID string, progress cluster.Progress) (*attempt.Attempt, error) {
	if err := cr.inClass(scenarioID); err != nil {
		return nil, err
	}
	m, err := cr.attempts()
	if err != nil {
		return nil, err
	}
	if cr.Class.Exam {
		if _, err := cr.StartExam(ctx, p); err != nil {
			return nil, err
		}
	}
	c, err := cr.Cluster(p, p.LearnerID, Write)
	if err != nil {
		return nil, err
	}
	if cr.opts.Store != nil {
		if name := cr.Board.learnerName(p.LearnerID); name != "" {
			if _, err := cr.opts.Store.EnsureLearner(ctx, p.LearnerID, name); err != nil {
				return nil, err
			}
		}
	}
	a, err := m.Start(ctx, p.LearnerID, scenarioID, c.Name(), progress)
	if err != nil {
		return nil, err
	}
	cr.Labs.Touch(p.LearnerID)
	return a, cr.Board.Started(ctx, p.LearnerID, scenarioID)
}

// Check grades p's attempt at scenarioID.
func (cr *Classroom) Check(ctx context.Context, p Principal, scenarioID string) (*grade.Report, error) {
	m, a, err := cr.current(ctx, p, scenarioID)
	if err != nil {
		return nil, err
	}
	rep, err := m.Check(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	return rep, cr.Board.Checked(ctx, p.LearnerID, scenarioID, rep)
}

// Hint shows p the next hint of scenarioID.
func (cr *Classroom) Hint(ctx context.Context, p Principal, scenarioID string) (int, string, error) {
	m, a, err := cr.current(ctx, p, scenarioID)
	if err != nil {
		return 0, "", err
	}
	n, text, err := m.Hint(ctx, a.ID)
	if err != nil {
		return 0, "", err
	}
	return n, text, cr.Board.HintUsed(ctx, p.LearnerID, scenarioID, n)
}

// Answer records p's answer to the answer check checkID of scenarioID.
func (cr *Classroom) Answer(ctx context.Context, p Principal, scenarioID, checkID, text string) error {
	m, a, err := cr.current(ctx, p, scenarioID)
	if err != nil {
		return err
	}
	return m.Answer(ctx, a.ID, checkID, text)
}

// Answers returns the answers of attempt id, to those who may read it (its
// learner, the instructor).
func (cr *Classroom) Answers(ctx context.Context, p Principal, id int64) (map[string]string, error) {
	if _, err := cr.Attempt(ctx, p, id, Read); err != nil {
		return nil, err
	}
	m, err := cr.attempts()
	if err != nil {
		return nil, err
	}
	return m.Answers(ctx, id)
}

// Solve applies scenarioID's reference solution to p's lab; not during an
// exam (the review shows the solutions afterwards).
func (cr *Classroom) Solve(ctx context.Context, p Principal, scenarioID string, out io.Writer) error {
	if cr.Class.Exam {
		return errors.New("the reference solutions open in the review, once the exam is over")
	}
	m, a, err := cr.current(ctx, p, scenarioID)
	if err != nil {
		return err
	}
	return m.Solve(ctx, a.ID, out)
}

// finalGrade grades learner's current attempt at scenarioID once more
// when their exam ends.
func (cr *Classroom) finalGrade(ctx context.Context, learner, scenarioID string) (*grade.Report, error) {
	if cr.opts.FinalGrade != nil {
		return cr.opts.FinalGrade(ctx, learner, scenarioID)
	}
	if cr.opts.Attempts == nil {
		return nil, errors.New("no attempt manager")
	}
	a, err := cr.opts.Attempts.Current(ctx, learner, scenarioID)
	if err != nil || a == nil {
		return nil, fmt.Errorf("no running attempt at %s (%v)", scenarioID, err)
	}
	return cr.opts.Attempts.FinalGrade(ctx, a.ID)
}

// Latest is learnerID's latest attempt at scenarioID in any state, for p
// (nil when there is none): the learner's own, or any learner's for the
// instructor.
func (cr *Classroom) Latest(ctx context.Context, p Principal, learnerID, scenarioID string) (*attempt.Attempt, error) {
	m, err := cr.readable(p, learnerID, scenarioID)
	if err != nil {
		return nil, err
	}
	return m.Latest(ctx, learnerID, scenarioID)
}

// Attempts is every attempt of learnerID at scenarioID, newest first, for
// p, as Latest.
func (cr *Classroom) Attempts(ctx context.Context, p Principal, learnerID, scenarioID string) ([]*attempt.Attempt, error) {
	m, err := cr.readable(p, learnerID, scenarioID)
	if err != nil {
		return nil, err
	}
	return m.List(ctx, learnerID, scenarioID)
}

// readable authorizes p to read learnerID's attempts at scenarioID, one of
// the class's scenarios.
func (cr *Classroom) readable(p Principal, learnerID, scenarioID string) (*attempt.Manager, error) {
	if err := Authorize(p, cr.Class.ID, learnerID, Read); err != nil {
		return nil, err
	}
	if err := cr.inClass(scenarioID); err != nil {
		return nil, err
	}
	return cr.attempts()
}

// Attempt returns attempt id for p with access a, refusing attempts that
// are not the learner's or not of this class's scenarios (ErrForbidden,
// whether or not the attempt exists).
func (cr *Classroom) Attempt(ctx context.Context, p Principal, id int64, a Access) (*attempt.Attempt, error) {
	m, err := cr.attempts()
	if err != nil {
		return nil, err
	}
	at, err := m.Attempt(ctx, id)
	if err != nil {
		return nil, notYours
	}
	if err := Authorize(p, cr.Class.ID, at.Learner, a); err != nil {
		return nil, err
	}
	if cr.inClass(at.ScenarioID) != nil {
		return nil, notYours
	}
	return at, nil
}

// ResetScenario sets scenarioID up afresh on p's lab cluster as a new
// attempt: the running one is abandoned first.
func (cr *Classroom) ResetScenario(ctx context.Context, p Principal, scenarioID string, progress cluster.Progress) (*attempt.Attempt, error) {
	m, a, err := cr.current(ctx, p, scenarioID)
	if err != nil {
		return nil, err
	}
	done := cluster.OrNop(progress).Start(fmt.Sprintf("Removing attempt %d from your lab", a.ID))
	err = m.Abandon(ctx, a.ID)
	done(err)
	if err != nil {
		// Starting again removes what the old attempt left anyway.
		cr.opts.Log.Warn("reset: removing the old attempt failed", "attempt", a.ID, "err", err)
	}
	return cr.StartScenario(ctx, p, scenarioID, progress)
}

// EndScenario removes scenarioID from p's lab cluster and ends p's
// attempt at it; the lab stays for the next scenario.
func (cr *Classroom) EndScenario(ctx context.Context, p Principal, scenarioID string) error {
	m, a, err := cr.current(ctx, p, scenarioID)
	if err != nil {
		return err
	}
	return m.Abandon(ctx, a.ID)
}

// Progress is learnerID's status per scenario of the class, for p.
func (cr *Classroom) Progress(ctx context.Context, p Principal, learnerID string) (map[string]attempt.Status, error) {
	if err := Authorize(p, cr.Class.ID, learnerID, Read); err != nil {
		return nil, err
	}
	m, err := cr.attempts()
	if err != nil {
		return nil, err
	}
	all, err := m.Progress(ctx, learnerID)
	if err != nil {
		return nil, err
	}
	out := map[string]attempt.Status{}
	for _, id := range cr.Class.Scenarios {
		if st, ok := all[id]; ok {
			out[id] = st
		}
	}
	return out, nil
}
