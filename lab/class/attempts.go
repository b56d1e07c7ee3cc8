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

// current is p's running attempt at scenarioID.
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

// finalGrade grades learner's running attempt at scenarioID once more
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
	return cr.opts.Attempts.Evaluate(ctx, a.ID)
}
