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

// Runner sets scenarios up on clusters; SessionRunner (lab/session) is the
// real one.
type Runner interface {
	// EnsureCluster returns the cluster named name, creating it with shape
	// when the provider has none.
	EnsureCluster(ctx context.Context, p cluster.Provider, name string, shape scenario.ClusterShape, progress cluster.Progress) (cluster.Cluster, error)
	// Start sets s up on c and breaks it. When it fails, the Lab it may
	// still return is for Abort.
	Start(ctx context.Context, s *scenario.Scenario, c cluster.Cluster, progress cluster.Progress) (Lab, error)
	// Resume picks up a lab that Start set up, from its saved State.
	Resume(s *scenario.Scenario, c cluster.Cluster, state []byte) (Lab, error)
	// Attach returns a lab for s as it may be set up on c, without saved
	// state: only for Teardown.
	Attach(s *scenario.Scenario, c cluster.Cluster) (Lab, error)
}

// Lab is a scenario set up on a cluster.
type Lab interface {
	// State is what Resume needs (the baseline).
	State() ([]byte, error)
	Grade(ctx context.Context) *grade.Report
	Solve(ctx context.Context, kubeBin string, out io.Writer) error
	Teardown(ctx context.Context, waitGone bool) error
	// Abort removes what a failed Start left.
	Abort(ctx context.Context) error
}

// SessionRunner runs scenarios with lab/session.
type SessionRunner struct {
	Faults *scenario.Registry
	Log    *slog.Logger
	// Svclab puts svclab on the PATH of solutions (session.Options.Svclab).
	Svclab []string
}

func (r SessionRunner) opts(progress cluster.Progress) session.Options {
	return session.Options{Faults: r.Faults, Progress: progress, Log: r.Log, Svclab: r.Svclab}
}

func (r SessionRunner) EnsureCluster(ctx context.Context, p cluster.Provider, name string, shape scenario.ClusterShape, progress cluster.Progress) (cluster.Cluster, error) {
	c, _, err := session.EnsureCluster(ctx, p, name, shape, progress)
	return c, err
}

func (r SessionRunner) Start(ctx context.Context, s *scenario.Scenario, c cluster.Cluster, progress cluster.Progress) (Lab, error) {
	ses, err := session.Start(ctx, s, c, r.opts(progress))
	if ses == nil {
		return nil, err
	}
	return ses, err
}

func (r SessionRunner) Resume(s *scenario.Scenario, c cluster.Cluster, state []byte) (Lab, error) {
	return session.Resume(s, c, state, r.opts(nil))
}

func (r SessionRunner) Attach(s *scenario.Scenario, c cluster.Cluster) (Lab, error) {
	return session.Attach(s, c, r.opts(nil))
}
