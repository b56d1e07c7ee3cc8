package server

import (
	"context"
	"errors"
	"io"

	"github.com/svclab/svclab/lab/attempt"
	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/grade"
)

// AttemptManager is lab/attempt's Manager as the pages use it: attempts
// recorded in SQLite, so a learner's attempt survives page reloads and
// server restarts.
type AttemptManager struct{ M *attempt.Manager }

var _ Attempts = AttemptManager{}

func fromAttempt(a *attempt.Attempt) *Attempt {
	if a == nil {
		return nil
	}
	return &Attempt{ID: a.ID, Learner: a.Learner, ScenarioID: a.ScenarioID, Cluster: a.Cluster, State: a.State,
		Started: a.Started, Finished: a.Finished, Score: a.Score, MaxScore: a.MaxScore, HintsShown: a.HintsShown, Error: a.Error}
}

func fromAttempts(list []*attempt.Attempt) []*Attempt {
	out := make([]*Attempt, len(list))
	for i, a := range list {
		out[i] = fromAttempt(a)
	}
	return out
}

func (m AttemptManager) Start(ctx context.Context, learner, scenarioID, clusterName string, p cluster.Progress) (*Attempt, error) {
	a, err := m.M.Start(ctx, learner, scenarioID, clusterName, p)
	return fromAttempt(a), err
}

// Current is the learner's latest attempt in any state (a passed one shows
// its explanation).
func (m AttemptManager) Current(ctx context.Context, learner, scenarioID string) (*Attempt, error) {
	a, err := m.M.Latest(ctx, learner, scenarioID)
	if err != nil {
		return nil, err
	}
	if a == nil {
		return nil, ErrNoAttempt
	}
	return fromAttempt(a), nil
}

func (m AttemptManager) List(ctx context.Context, learner, scenarioID string) ([]*Attempt, error) {
	list, err := m.M.List(ctx, learner, scenarioID)
	return fromAttempts(list), err
}

func (m AttemptManager) Check(ctx context.Context, id int64) (*grade.Report, error) {
	return m.M.Check(ctx, id)
}

func (m AttemptManager) Hint(ctx context.Context, id int64) (int, string, error) {
	i, text, err := m.M.Hint(ctx, id)
	if errors.Is(err, attempt.ErrNoMoreHints) {
		return 0, "", errors.New("you have seen every hint of this scenario")
	}
	return i, text, err
}

func (m AttemptManager) Answer(ctx context.Context, id int64, checkID, text string) error {
	return m.M.Answer(ctx, id, checkID, text)
}

func (m AttemptManager) Answers(ctx context.Context, id int64) (map[string]string, error) {
	return m.M.Answers(ctx, id)
}

func (m AttemptManager) Solve(ctx context.Context, id int64, out io.Writer) error {
	return m.M.Solve(ctx, id, out)
}

func (m AttemptManager) Reset(ctx context.Context, id int64, p cluster.Progress) (*Attempt, error) {
	a, err := m.M.Reset(ctx, id, p)
	return fromAttempt(a), err
}

func (m AttemptManager) End(ctx context.Context, id int64) error { return m.M.Abandon(ctx, id) }

// Active lists the learner's attempts that hold a cluster.
func (m AttemptManager) Active(ctx context.Context, learner string) ([]*Attempt, error) {
	list, err := m.M.Active(ctx, learner)
	return fromAttempts(list), err
}

// Progress is the learner's mark per scenario (see progressMarks).
func (m AttemptManager) Progress(ctx context.Context, learner string) (map[string]string, error) {
	st, err := m.M.Progress(ctx, learner)
	if err != nil {
		return nil, err
	}
	return progressMarks(st), nil
}
