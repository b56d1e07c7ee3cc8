package class

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/svclab/svclab/lab/attempt"
	"github.com/svclab/svclab/lab/class/labs"
	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/store"

	"github.com/svclab/svclab/internal/pgtest"
)

// fakeStarter stands in for lab/session behind attempt.Manager: setting a
// scenario up does nothing, grading returns what the test says.
type fakeStarter struct {
	mu     sync.Mutex
	passed bool
	// timeout makes the first check time out.
	timeout bool
}

func (r *fakeStarter) setPassed(v bool) {
	r.mu.Lock()
	r.passed = v
	r.mu.Unlock()
}

func (r *fakeStarter) EnsureCluster(ctx context.Context, p cluster.Provider, name string, _ scenario.ClusterShape, _ cluster.Progress) (cluster.Cluster, error) {
	return p.Get(ctx, name)
}

func (r *fakeStarter) Start(context.Context, *scenario.Scenario, cluster.Cluster, cluster.Progress) (attempt.Session, error) {
	return &fakeLab{r}, nil
}

func (r *fakeStarter) Resume(*scenario.Scenario, cluster.Cluster, []byte) (attempt.Session, error) {
	return &fakeLab{r}, nil
}

func (r *fakeStarter) Attach(*scenario.Scenario, cluster.Cluster) (attempt.Session, error) {
	return &fakeLab{r}, nil
}

type fakeLab struct{ r *fakeStarter }

func (l *fakeLab) State() ([]byte, error) { return []byte(`{}`), nil }

func (l *fakeLab) Grade(context.Context) *grade.Report {
	l.r.mu.Lock()
	defer l.r.mu.Unlock()
	rep := &grade.Report{Scenario: "selector-typo", Passed: l.r.passed}
	for i, c := range cat.Get("selector-typo").Checks {
		ok := l.r.passed || i == 0
		rep.Results = append(rep.Results, grade.Result{ID: c.ID, Kind: c.Kind(), Weight: c.Weight, Passed: ok, Message: c.Description})
	}
	if l.r.timeout {
		rep.Results[0].Passed, rep.Results[0].Error = false, "the check did not finish within 30s: context deadline exceeded"
	}
	if rep.Passed {
		rep.Score = 100
	}
	return rep
}

func (l *fakeLab) Solve(context.Context, string, io.Writer) error { l.r.setPassed(true); return nil }
func (l *fakeLab) Teardown(context.Context, bool) error           { return nil }
func (l *fakeLab) Abort(context.Context) error                    { return nil }
func (l *fakeLab) Generation() string                             { return "" }

// TestAttempts runs a learner's scenario through lab/attempt on their own
// lab, with lab/store in the same database file as the class tables.
func TestAttempts(t *testing.T) { pgtest.ForEachBackend(t, DBFileName, testAttempts) }

func testAttempts(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	runner := &fakeStarter{}
	var st *store.Store
	r := openRoom(t, b, Spec{Name: "cka", Scenarios: []string{"selector-typo"}, Capacity: 2, PoolSize: 1}, func(o *Options) {
		var err error
		st, err = store.Open(ctx, o.DB.location, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		m, err := attempt.New(attempt.Options{Store: st, Provider: o.Provider, Catalog: o.Catalog, Starter: runner,
			KubeBin: func(context.Context) (string, error) { return "/bin/true", nil }})
		if err != nil {
			t.Fatal(err)
		}
		o.Attempts, o.Store = m, st
	})
	if _, err := r.StartScenario(ctx, r.ann, "selector-typo", nil); !errors.Is(err, labs.ErrNoLab) {
		t.Errorf("a scenario before the lab: %v", err)
	}
	r.StartLab(r.ann)
	r.waitLab(t, r.ann.LearnerID, labs.Ready)
	for _, tc := range []struct {
		name string
		p    Principal
		scen string
		want string
	}{
		{"anonymous", Principal{Role: Anonymous}, "selector-typo", "join the class first"},
		{"instructor", r.instructor, "selector-typo", "read-only"},
		{"not the class's scenario", r.ann, "etp-local-drop", "not part of this class"},
		{"bob has no lab", r.bob, "selector-typo", "no lab yet"},
	} {
		if _, err := r.StartScenario(ctx, tc.p, tc.scen, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	a, err := r.StartScenario(ctx, r.ann, "selector-typo", nil)
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := r.Labs.Lab(r.ann.LearnerID); a.Cluster != l.Cluster || a.Learner != r.ann.LearnerID {
		t.Errorf("attempt %+v on lab %+v", a, l)
	}
	if _, err := r.Check(ctx, r.bob, "selector-typo"); err == nil || !strings.Contains(err.Error(), "not started") {
		t.Errorf("bob checks: %v", err)
	}
	rep, err := r.Check(ctx, r.ann, "selector-typo")
	if err != nil || rep.Passed {
		t.Fatalf("check: %+v, %v", rep, err)
	}
	// A check that times out (a busy machine) errors the attempt, which
	// stays hers to check again.
	runner.mu.Lock()
	runner.timeout = true
	runner.mu.Unlock()
	if _, err := r.Check(ctx, r.ann, "selector-typo"); err == nil || !strings.Contains(err.Error(), "grading timed out") {
		t.Errorf("a check that timed out: %v", err)
	}
	runner.mu.Lock()
	runner.timeout = false
	runner.mu.Unlock()
	if rep, err := r.Check(ctx, r.ann, "selector-typo"); err != nil || rep.Passed {
		t.Fatalf("the check after a timeout: %+v, %v", rep, err)
	}
	if n, text, err := r.Hint(ctx, r.ann, "selector-typo"); err != nil || n < 1 || text == "" {
		t.Errorf("hint: %d %q %v", n, text, err)
	}
	if err := r.Solve(ctx, r.ann, "selector-typo", io.Discard); err != nil {
		t.Fatal(err)
	}
	if rep, err = r.Check(ctx, r.ann, "selector-typo"); err != nil || !rep.Passed {
		t.Fatalf("check after solving: %+v, %v", rep, err)
	}
	snap, _ := r.Snapshot(ctx, r.instructor)
	c := snap.Rows[0].Cells[0]
	if c.State != Solved || c.Checks != 3 || c.HintsUsed < 1 {
		t.Errorf("board cell %+v", c)
	}
	// lab/store recorded the same in the shared database, under the
	// learner's name.
	if l, err := st.Learner(ctx, r.ann.LearnerID); err != nil || l.DisplayName != "Ann" {
		t.Errorf("stored learner %+v, %v", l, err)
	}
	att, err := st.Attempts(ctx, store.AttemptFilter{})
	if err != nil || len(att) != 1 || att[0].State != store.Passed {
		t.Errorf("stored attempts %+v, %v", att, err)
	}
	// Ann's attempts (for replay) are hers and the instructor's to list.
	for _, tc := range []struct {
		name string
		p    Principal
		n    int
		err  bool
	}{{"ann", r.ann, 1, false}, {"instructor", r.instructor, 1, false}, {"bob", r.bob, 0, true}, {"anonymous", Principal{Role: Anonymous}, 0, true}} {
		list, err := r.Attempts(ctx, tc.p, r.ann.LearnerID, "selector-typo")
		if (err != nil) != tc.err || len(list) != tc.n || (tc.n > 0 && list[0].ID != a.ID) {
			t.Errorf("%s lists Ann's attempts: %+v, %v", tc.name, list, err)
		}
	}
}
