package attempt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/clustertest"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/store"
	"github.com/svclab/svclab/scenarios"
)

// world is what the fake labs share across managers (as a real cluster
// would across processes): which scenarios are fixed, and what happened.
type world struct {
	mu sync.Mutex
	// fixed scenarios pass every check, "cluster/scenario".
	fixed map[string]bool
	// timeout makes the check with this id time out.
	timeout string
	// startErr fails Start after touching the cluster.
	startErr error
	events   []string
	// resumed are the states labs were resumed from.
	resumed [][]byte
	// answers are the answers the last grade was given.
	answers map[string]string
}

func newWorld() *world { return &world{fixed: map[string]bool{}} }

func (w *world) log(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, fmt.Sprintf(format, args...))
}

func (w *world) Events() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events)
}

// fakeStarter sets scenarios up in the world.
type fakeStarter struct{ w *world }

func (r fakeStarter) EnsureCluster(ctx context.Context, p cluster.Provider, name string, shape scenario.ClusterShape, progress cluster.Progress) (cluster.Cluster, error) {
	c, err := p.Get(ctx, name)
	if errors.Is(err, cluster.ErrNotFound) {
		return p.Create(ctx, cluster.CreateOptions{Name: name, Workers: shape.Nodes - 1, Progress: progress})
	}
	return c, err
}

func (r fakeStarter) Start(ctx context.Context, s *scenario.Scenario, c cluster.Cluster, progress cluster.Progress) (Session, error) {
	gen, err := cluster.Generation(c)
	if err != nil {
		return nil, err
	}
	l := &fakeLab{w: r.w, s: s, c: c.Name(), gen: gen, baseline: "taken-" + s.ID}
	r.w.mu.Lock()
	err = r.w.startErr
	delete(r.w.fixed, l.key())
	r.w.mu.Unlock()
	cluster.OrNop(progress).Start("Applying the setup manifests")(nil)
	if err != nil {
		r.w.log("start %s on %s failed", s.ID, c.Name())
		return l, fmt.Errorf("setting up scenario %s on cluster %s: %w", s.ID, c.Name(), err)
	}
	r.w.log("start %s on %s", s.ID, c.Name())
	return l, ctx.Err()
}

func (r fakeStarter) Resume(s *scenario.Scenario, c cluster.Cluster, state []byte) (Session, error) {
	var st struct{ Baseline, Generation string }
	if err := json.Unmarshal(state, &st); err != nil {
		return nil, err
	}
	r.w.mu.Lock()
	r.w.resumed = append(r.w.resumed, state)
	r.w.mu.Unlock()
	r.w.log("resume %s on %s", s.ID, c.Name())
	return &fakeLab{w: r.w, s: s, c: c.Name(), gen: st.Generation, baseline: st.Baseline}, nil
}

func (r fakeStarter) Attach(s *scenario.Scenario, c cluster.Cluster) (Session, error) {
	r.w.log("attach %s on %s", s.ID, c.Name())
	return &fakeLab{w: r.w, s: s, c: c.Name()}, nil
}

// fakeLab grades like lab/grade: every check passes when the scenario is
// fixed, failed checks unlock their hints.
type fakeLab struct {
	w *world
	s *scenario.Scenario
	c string
	// gen is the life of the cluster the lab was set up on.
	gen      string
	baseline string
}

func (l *fakeLab) key() string { return l.c + "/" + l.s.ID }

func (l *fakeLab) State() ([]byte, error) {
	return json.Marshal(map[string]string{"baseline": l.baseline, "generation": l.gen})
}

func (l *fakeLab) Generation() string { return l.gen }

func (l *fakeLab) Grade(ctx context.Context) *grade.Report {
	l.w.mu.Lock()
	fixed, timeout := l.w.fixed[l.key()], l.w.timeout
	l.w.answers = grade.AnswersFrom(ctx)
	l.w.mu.Unlock()
	rep := &grade.Report{Scenario: l.s.ID, Passed: true, Duration: 1200 * time.Millisecond}
	var total, passed float64
	for _, c := range l.s.Checks {
		r := grade.Result{ID: c.ID, Kind: c.Kind(), Description: c.Description, Weight: c.Weight, UnlocksHint: c.UnlocksHint, Passed: fixed, Message: c.Description, Duration: time.Millisecond}
		if l.baseline == "" && c.RightFix != nil {
			r.Passed = false // no baseline: rightFix checks cannot pass
		}
		if c.ID == timeout {
			r.Passed, r.Error = false, "the check did not finish within 30s: context deadline exceeded"
		}
		total += c.Weight
		if r.Passed {
			passed += c.Weight
		} else {
			r.Message = c.FailMessage
			if c.API != nil {
				r.Detail, r.Expected = "observed "+c.ID, "expected the value of "+c.ID
			}
			rep.Passed = false
			if c.UnlocksHint > 0 && !slices.Contains(rep.UnlockedHints, c.UnlocksHint) {
				rep.UnlockedHints = append(rep.UnlockedHints, c.UnlocksHint)
			}
		}
		rep.Results = append(rep.Results, r)
	}
	slices.Sort(rep.UnlockedHints)
	rep.Score = 100 * passed / total
	l.w.log("grade %s on %s: %v", l.s.ID, l.c, rep.Passed)
	return rep
}

func (l *fakeLab) Solve(ctx context.Context, kubeBin string, out io.Writer) error {
	fmt.Fprintf(out, "$ %s kubectl patch ...\n", kubeBin)
	l.w.mu.Lock()
	l.w.fixed[l.key()] = true
	l.w.mu.Unlock()
	l.w.log("solve %s on %s", l.s.ID, l.c)
	return nil
}

func (l *fakeLab) Teardown(ctx context.Context, waitGone bool) error {
	l.w.mu.Lock()
	delete(l.w.fixed, l.key())
	l.w.mu.Unlock()
	l.w.log("teardown %s on %s", l.s.ID, l.c)
	return nil
}

func (l *fakeLab) Abort(ctx context.Context) error {
	l.w.log("abort %s on %s", l.s.ID, l.c)
	return nil
}

// testEnv is one database, one provider and one world; manager returns a
// new Manager on them, as a new svclab process would make.
type testEnv struct {
	t        *testing.T
	path     string
	provider *clustertest.Provider
	w        *world
	catalog  *scenario.Catalog
	problems scenario.Problems
}

func newTestEnv(t *testing.T, clusters ...string) *testEnv {
	t.Helper()
	// Other scenarios may have problems while they are being written; the
	// tests need only these.
	cat, problems := scenarios.Load(scenario.Options{})
	for _, id := range []string{"selector-typo", "targetport-mismatch"} {
		if cat.Get(id) == nil {
			t.Fatalf("no scenario %s: %v", id, problems)
		}
	}
	return &testEnv{t: t, path: filepath.Join(t.TempDir(), store.FileName), provider: clustertest.NewProvider(clusters...), w: newWorld(), catalog: cat}
}

func (e *testEnv) options(st *store.Store) Options {
	return Options{Store: st, Provider: e.provider, Catalog: e.catalog, Problems: e.problems, Starter: fakeStarter{e.w},
		KubeBin: func(context.Context) (string, error) { return "/opt/svclab-kube", nil }}
}

func (e *testEnv) manager() (*Manager, *store.Store) {
	e.t.Helper()
	st, err := store.Open(context.Background(), e.path, store.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { st.Close() })
	m, err := New(e.options(st))
	if err != nil {
		e.t.Fatal(err)
	}
	return m, st
}

type (
	clusterType  = cluster.Cluster
	progressType = cluster.Progress
)
