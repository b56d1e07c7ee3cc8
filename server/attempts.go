package server

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/grade"
)

// Attempt is a learner's go at a scenario, as the pages show it.
type Attempt struct {
	ID                  int64
	Learner, ScenarioID string
	Cluster             string
	// State is running, passed, errored or abandoned.
	State             string
	Started, Finished time.Time
	Score, MaxScore   int
	HintsShown        int
	// Error says why an errored attempt errored.
	Error string
}

// Attempt states the pages tell apart.
const (
	StateRunning   = "running"
	StatePassed    = "passed"
	StateErrored   = "errored"
	StateAbandoned = "abandoned"
)

// ErrNoAttempt is what Attempts.Current returns when the learner has no
// attempt at the scenario.
var ErrNoAttempt = errors.New("no attempt")

// Attempts runs and remembers learners' attempts at scenarios (lab/attempt
// is the real one, backed by SQLite, so an attempt survives page reloads
// and server restarts).
type Attempts interface {
	// Start sets the scenario up on the cluster (created when missing) and
	// records a running attempt.
	Start(ctx context.Context, learner, scenarioID, clusterName string, progress cluster.Progress) (*Attempt, error)
	// Current is the learner's latest attempt at the scenario, or
	// ErrNoAttempt.
	Current(ctx context.Context, learner, scenarioID string) (*Attempt, error)
	// List is every attempt of the learner at the scenario, newest first.
	List(ctx context.Context, learner, scenarioID string) ([]*Attempt, error)
	// Check grades the attempt and records the run.
	Check(ctx context.Context, attemptID int64) (*grade.Report, error)
	// Hint shows the next hint (1-based index).
	Hint(ctx context.Context, attemptID int64) (index int, text string, err error)
	// Answer records the learner's answer to an answer check ("" takes
	// it back); Answers reads them back, by check id.
	Answer(ctx context.Context, attemptID int64, checkID, text string) error
	Answers(ctx context.Context, attemptID int64) (map[string]string, error)
	// Solve runs the reference solution, writing what it does to out.
	Solve(ctx context.Context, attemptID int64, out io.Writer) error
	// Reset sets the scenario up afresh as a new attempt.
	Reset(ctx context.Context, attemptID int64, progress cluster.Progress) (*Attempt, error)
	// End removes the attempt's scenario from its cluster and ends the
	// attempt (abandoned, unless it passed).
	End(ctx context.Context, attemptID int64) error
	// Progress is the learner's state per scenario id (running, passed...).
	Progress(ctx context.Context, learner string) (map[string]string, error)
}
