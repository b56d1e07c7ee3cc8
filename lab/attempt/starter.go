package attempt

import (
	"context"
	"io"
	"log/slog"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/session"
)

// Starter sets scenarios up on clusters; SessionStarter (lab/session) is the
// real one.
type Starter interface {
	// EnsureCluster returns the cluster named name, creating it with shape
	// when the provider has none.
	EnsureCluster(ctx context.Context, p cluster.Provider, name string, shape scenario.ClusterShape, progress cluster.Progress) (cluster.Cluster, error)
	// Start sets s up on c and breaks it. When it fails, the Session it may
	// still return is for Abort.
	Start(ctx context.Context, s *scenario.Scenario, c cluster.Cluster, progress cluster.Progress) (Session, error)
	// Resume picks up a lab that Start set up, from its saved State.
	Resume(s *scenario.Scenario, c cluster.Cluster, state []byte) (Session, error)
	// Attach returns a lab for s as it may be set up on c, without saved
	// state: only for Teardown.
	Attach(s *scenario.Scenario, c cluster.Cluster) (Session, error)
}

// Session is a scenario set up on a cluster (a lab/session.Session).
type Session interface {
	// State is what Resume needs (the baseline).
	State() ([]byte, error)
	Grade(ctx context.Context) *grade.Report
	Solve(ctx context.Context, kubeBin string, out io.Writer) error
	Teardown(ctx context.Context, waitGone bool) error
	// Abort removes what a failed Start left.
	Abort(ctx context.Context) error
	// Generation is the life of the cluster the session was set up on
	// (cluster.Generation; "" when not known).
	Generation() string
}

// SessionStarter starts sessions with lab/session.
type SessionStarter struct {
	Faults *scenario.Registry
	Log    *slog.Logger
	// Svclab puts svclab on the PATH of solutions (session.Options.Svclab).
	Svclab []string
}

func (r SessionStarter) opts(progress cluster.Progress) session.Options {
	return session.Options{Faults: r.Faults, Progress: progress, Log: r.Log, Svclab: r.Svclab}
}

func (r SessionStarter) EnsureCluster(ctx context.Context, p cluster.Provider, name string, shape scenario.ClusterShape, progress cluster.Progress) (cluster.Cluster, error) {
	c, _, err := session.EnsureCluster(ctx, p, name, shape, progress)
	return c, err
}

func (r SessionStarter) Start(ctx context.Context, s *scenario.Scenario, c cluster.Cluster, progress cluster.Progress) (Session, error) {
	ses, err := session.Start(ctx, s, c, r.opts(progress))
	if ses == nil {
		return nil, err
	}
	return ses, err
}

func (r SessionStarter) Resume(s *scenario.Scenario, c cluster.Cluster, state []byte) (Session, error) {
	return session.Resume(s, c, state, r.opts(nil))
}

func (r SessionStarter) Attach(s *scenario.Scenario, c cluster.Cluster) (Session, error) {
	return session.Attach(s, c, r.opts(nil))
}
