package attempt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/store"
)

// The learner's way through a scenario, across a restart: start, a failed
// check (which unlocks hints), a new process that finds the attempt, hints,
// the reference solution, a passing check, progress.
func TestAttemptAcrossRestart(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t)
	m, st := e.manager()
	a, err := m.Start(ctx, "", "selector-typo", "lab", nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.State != StateRunning || a.Learner != store.LocalLearner || a.Cluster != "lab" || a.Backend != "embedded" || a.ScenarioID != "selector-typo" {
		t.Fatalf("started: %+v", a)
	}
	if e.provider.Created[0] != "lab" {
		t.Errorf("clusters created: %v", e.provider.Created)
	}
	c, err := e.provider.Get(ctx, "lab")
	if err != nil {
		t.Fatal(err)
	}
	gen, err := cluster.Generation(c)
	if err != nil {
		t.Fatal(err)
	}
	wantState := fmt.Sprintf(`{"baseline":"taken-selector-typo","generation":%q}`, gen)
	if b, err := st.Baseline(ctx, a.ID); err != nil || string(b) != wantState {
		t.Errorf("stored baseline %q, %v", b, err)
	}
	rep, err := m.Check(ctx, a.ID)
	if err != nil || rep.Passed {
		t.Fatalf("check of the broken scenario: %+v, %v", rep, err)
	}
	if !slices.Equal(rep.UnlockedHints, []int{1}) { // one at a time, in order
		t.Errorf("unlocked hints %v", rep.UnlockedHints)
	}

	// A new process.
	m2, _ := e.manager()
	cur, err := m2.Current(ctx, store.LocalLearner, "selector-typo")
	if err != nil || cur == nil || cur.ID != a.ID || cur.State != StateRunning || cur.HintsShown != 1 || cur.LastCheck.IsZero() || cur.LastCheckPassed {
		t.Fatalf("current after a restart: %+v, %v", cur, err)
	}
	if cur.MaxScore != 9 || cur.Score != 0 {
		t.Errorf("score %d of %d", cur.Score, cur.MaxScore)
	}
	if i, _, err := m2.Hint(ctx, a.ID); err != nil || i != 2 {
		t.Errorf("next hint: %d %v", i, err)
	}
	// A failed check shows no hint past the next one.
	if rep, err := m2.Check(ctx, a.ID); err != nil || len(rep.UnlockedHints) != 0 {
		t.Errorf("a check after hint 2 showed hints %v (%v): no failing check names hint 3", rep.UnlockedHints, err)
	}
	i, text, err := m2.Hint(ctx, a.ID)
	if err != nil || i != 3 || !strings.Contains(text, "app=wbe") {
		t.Errorf("next hint: %d %q %v", i, text, err)
	}
	if _, _, err := m2.Hint(ctx, a.ID); !errors.Is(err, ErrNoMoreHints) || !strings.Contains(err.Error(), "all 3 hints") {
		t.Errorf("hint after the last: %v", err)
	}
	hints, err := m2.Hints(ctx, a.ID)
	if err != nil || len(hints) != 3 || hints[2].Index != 3 || hints[2].Reason != store.HintRequested || hints[0].Reason != store.HintUnlocked {
		t.Errorf("hints %+v, %v", hints, err)
	}
	var out bytes.Buffer
	if err := m2.Solve(ctx, a.ID, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "/opt/svclab-kube kubectl") {
		t.Errorf("solution output %q", out.String())
	}
	rep, err = m2.Check(ctx, a.ID)
	if err != nil || !rep.Passed {
		t.Fatalf("check after the solution: %+v, %v", rep, err)
	}
	done, _ := m2.Attempt(ctx, a.ID)
	if done.State != StatePassed || done.Finished.IsZero() || done.Score != 9 || done.SolutionUsed.IsZero() {
		t.Errorf("after passing: %+v", done)
	}
	if cur, _ := m2.Current(ctx, "", "selector-typo"); cur != nil {
		t.Errorf("a passed attempt is current: %+v", cur)
	}
	if len(e.w.resumed) != 1 || string(e.w.resumed[0]) != wantState {
		t.Errorf("resumed from %q", e.w.resumed)
	}

	runs, err := m2.History(ctx, a.ID)
	if err != nil || len(runs) != 3 || runs[0].Passed || runs[1].Passed || !runs[2].Passed || len(runs[2].Results) != 6 || runs[0].Results[0].CheckID != "slice-has-ready-endpoints" {
		t.Fatalf("history: %+v, %v", runs, err)
	}
	p, err := m2.Progress(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	got := p["selector-typo"]
	if got.State != Solved || got.Attempts != 1 || got.BestScore != 9 || got.MaxScore != 9 || got.HintsUsed != 3 || !got.LastCheckPassed || got.Solved.IsZero() {
		t.Errorf("progress: %+v", got)
	}
	if other := p["targetport-mismatch"]; other.State != NotStarted || other.Attempts != 0 {
		t.Errorf("progress of an untouched scenario: %+v", other)
	}
	want := []string{"start selector-typo on lab", "grade selector-typo on lab: false", "resume selector-typo on lab", "grade selector-typo on lab: false", "solve selector-typo on lab", "grade selector-typo on lab: true"}
	if got := e.w.Events(); !slices.Equal(got, want) {
		t.Errorf("events %q\nwant %q", got, want)
	}
}

// Attempts that svclab cannot carry out are recorded as errored with a
// message that says why, and what the setup left is removed.
func TestStartErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		id         string
		prepare    func(e *testEnv)
		cancel     bool
		want       string
		wantEvents []string
	}{
		{name: "unknown scenario", id: "no-such-thing", want: `there is no scenario "no-such-thing"; the scenarios are`},
		{name: "malformed scenario", id: "broken", prepare: func(e *testEnv) {
			e.problems = scenario.Problems{{File: "scenarios/broken/scenario.yaml", Line: 3, Field: "domain", Message: "must be one of ..."}}
		}, want: "scenario broken has problems and cannot run (svclab scenario lint shows them):\n  scenarios/broken/scenario.yaml:3: domain: must be one of"},
		{name: "cluster cannot be created", id: "selector-typo", prepare: func(e *testEnv) {
			e.provider.FailWith(errors.New("the state directory /x is not writable"))
		}, want: "the state directory /x is not writable"},
		{name: "fault does not apply", id: "selector-typo", prepare: func(e *testEnv) {
			e.w.startErr = errors.New(`injecting the faults: fault proxier-dead: node "worker3" is not in the cluster`)
		}, want: `setting up scenario selector-typo on cluster lab: injecting the faults: fault proxier-dead: node "worker3"`,
			wantEvents: []string{"start selector-typo on lab failed", "abort selector-typo on lab"}},
		{name: "interrupted", id: "selector-typo", cancel: true, want: "interrupted: context canceled",
			wantEvents: []string{"start selector-typo on lab", "abort selector-typo on lab"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t)
			if tc.prepare != nil {
				tc.prepare(e)
			}
			m, st := e.manager()
			cctx, cancel := context.WithCancel(ctx)
			if tc.cancel {
				// Cancel during the setup, as Ctrl-C would.
				m.runner = cancelingStarter{fakeStarter{e.w}, cancel}
			}
			defer cancel()
			_, err := m.Start(cctx, "", tc.id, "lab", nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			list, _ := st.Attempts(ctx, store.AttemptFilter{})
			if len(list) != 1 || list[0].State != store.Errored || !strings.Contains(list[0].Error, tc.want) || list[0].Finished.IsZero() || list[0].ScenarioID != tc.id {
				t.Errorf("recorded %+v", list)
			}
			if got := e.w.Events(); !slices.Equal(got, tc.wantEvents) {
				t.Errorf("events %q, want %q", got, tc.wantEvents)
			}
			// The errored attempt blocks nothing: a good start follows.
			e.provider.FailWith(nil)
			e.w.startErr = nil
			if e.catalog.Get(tc.id) != nil {
				m.runner = fakeStarter{e.w}
				if _, err := m.Start(ctx, "", tc.id, "lab", nil); err != nil {
					t.Errorf("starting again: %v", err)
				}
			}
			if p, _ := m.Progress(ctx, ""); p[tc.id].State == Solved || (e.catalog.Get(tc.id) == nil && p[tc.id].Attempts != 0) {
				t.Errorf("progress %+v", p[tc.id])
			}
		})
	}
}

// cancelingStarter cancels the context once the setup has begun.
type cancelingStarter struct {
	fakeStarter
	cancel context.CancelFunc
}

func (r cancelingStarter) Start(ctx context.Context, s *scenario.Scenario, c clusterType, progress progressType) (Session, error) {
	r.cancel()
	return r.fakeStarter.Start(ctx, s, c, progress)
}

func TestBusyCluster(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t, "lab", "other")
	m, st := e.manager()
	if _, err := m.Start(ctx, "", "selector-typo", "lab", nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		learner, id, cluster, want string
	}{
		{"", "selector-typo", "lab", "you are already working on scenario selector-typo (attempt 1 on cluster lab): check it with 'svclab scenario check selector-typo', or start over with 'svclab scenario reset selector-typo'"},
		{"", "targetport-mismatch", "lab", "cluster lab is busy with scenario selector-typo (attempt 1): finish it, abandon it with 'svclab scenario abandon selector-typo', or use another cluster (--cluster)"},
		{"bob", "targetport-mismatch", "lab", "cluster lab is busy with scenario selector-typo (attempt 1 of local)"},
		{"", "selector-typo", "Bad_Name", "is not valid"},
		{"", "selector-typo", "other", "you are already working on scenario selector-typo (attempt 1 on cluster lab)"},
		{"", "targetport-mismatch", "other", ""},
		{"bob", "selector-typo", "stuck", "cluster stuck is busy with scenario etp-local-drop (attempt 3 of carol, being set up — or its setup was interrupted: 'svclab scenario reset etp-local-drop' starts it over)"},
	} {
		if tc.cluster == "stuck" {
			// A setup that another process runs, or that crashed: a
			// running attempt without a baseline.
			st.EnsureLearner(ctx, "carol", "")
			if _, err := st.CreateAttempt(ctx, store.NewAttempt{Learner: "carol", ScenarioID: "etp-local-drop", Cluster: "stuck", Backend: "embedded"}); err != nil {
				t.Fatal(err)
			}
		}
		_, err := m.Start(ctx, tc.learner, tc.id, tc.cluster, nil)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Start(%s, %s, %s) = %v, want %q", tc.learner, tc.id, tc.cluster, err, tc.want)
		}
	}
}

// A check that times out makes the attempt errored, with the cluster left
// as it is; the next check that runs through makes it running again.
func TestCheckTimeout(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t)
	m, _ := e.manager()
	a, err := m.Start(ctx, "", "selector-typo", "lab", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.w.timeout = "clusterip-answers"
	rep, err := m.Check(ctx, a.ID)
	if rep == nil || err == nil || !strings.Contains(err.Error(), "grading timed out (check clusterip-answers: the check did not finish within 30s") {
		t.Fatalf("%v", err)
	}
	got, _ := m.Attempt(ctx, a.ID)
	if got.State != StateErrored || !strings.Contains(got.Error, "the cluster is as you left it") {
		t.Errorf("after a timeout: %+v", got)
	}
	if slices.Contains(e.w.Events(), "teardown selector-typo on lab") {
		t.Error("the scenario was torn down")
	}
	e.w.timeout = ""
	if _, err := m.Check(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Attempt(ctx, a.ID); got.State != StateRunning || got.Error != "" {
		t.Errorf("after a check that ran through: %+v", got)
	}
}

// A running attempt whose cluster went away, or was deleted and created
// again, lost its scenario with it: the attempt is errored with a message
// that says so and how to go on (in the process that started it, and in
// another one), and starting over sets it up on a cluster without trying to
// remove the old scenario from the new one.
func TestClusterGone(t *testing.T) {
	const (
		gone    = "cluster lab of attempt 1 is gone: start the scenario again with 'svclab scenario reset selector-typo'"
		created = "cluster lab of attempt 1 was deleted and created again since the scenario was set up, and what it set up went with it: start the scenario again with 'svclab scenario reset selector-typo'"
	)
	for _, tc := range []struct {
		name                  string
		createAgain, sameProc bool
		want                  string
	}{
		{"deleted, another process", false, false, gone},
		{"deleted, same process", false, true, gone},
		{"created again, another process", true, false, created},
		{"created again, same process", true, true, created},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newTestEnv(t)
			m, _ := e.manager()
			a, err := m.Start(ctx, "", "selector-typo", "lab", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Check(ctx, a.ID); err != nil {
				t.Fatal(err)
			}
			e.provider.Delete(ctx, "lab")
			if tc.createAgain {
				if _, err := e.provider.Create(ctx, cluster.CreateOptions{Name: "lab", Workers: 2}); err != nil {
					t.Fatal(err)
				}
			}
			if !tc.sameProc {
				m, _ = e.manager()
			}
			before := len(e.w.Events())
			if _, err = m.Check(ctx, a.ID); err == nil || err.Error() != tc.want {
				t.Fatalf("check: err = %v", err)
			}
			if got, _ := m.Attempt(ctx, a.ID); got.State != StateErrored || got.Error != tc.want {
				t.Errorf("%+v", got)
			}
			na, err := m.Reset(ctx, a.ID, nil)
			if err != nil || na.State != StateRunning || na.ID == a.ID {
				t.Fatalf("reset: %+v, %v", na, err)
			}
			if got, _ := m.Attempt(ctx, a.ID); got.State != StateAbandoned {
				t.Errorf("old attempt %+v", got)
			}
			events := e.w.Events()[before:]
			if slices.ContainsFunc(events, func(ev string) bool { return strings.HasPrefix(ev, "teardown") || strings.HasPrefix(ev, "attach") }) {
				t.Errorf("the reset removed the old scenario from the new cluster: %q", events)
			}
			if !slices.Contains(events, "start selector-typo on lab") {
				t.Errorf("events %q", events)
			}
			if _, err := m.Check(ctx, na.ID); err != nil {
				t.Errorf("the new attempt: %v", err)
			}
		})
	}
}

func TestResetAndAbandon(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t)
	m, _ := e.manager()
	a, err := m.Start(ctx, "", "selector-typo", "lab", nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Hint(ctx, a.ID)
	m2, _ := e.manager()
	b, err := m2.Reset(ctx, a.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.ID == a.ID || b.State != StateRunning || b.HintsShown != 0 || b.Cluster != "lab" {
		t.Errorf("after reset: %+v", b)
	}
	if old, _ := m2.Attempt(ctx, a.ID); old.State != StateAbandoned || old.Finished.IsZero() {
		t.Errorf("the reset attempt: %+v", old)
	}
	want := []string{"start selector-typo on lab", "resume selector-typo on lab", "teardown selector-typo on lab", "start selector-typo on lab"}
	if got := e.w.Events(); !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	if err := m2.Abandon(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := m2.Attempt(ctx, b.ID); got.State != StateAbandoned {
		t.Errorf("abandoned: %+v", got)
	}
	if _, err := m2.Check(ctx, b.ID); err == nil || !strings.Contains(err.Error(), "was abandoned: start the scenario again with 'svclab scenario start selector-typo'") {
		t.Errorf("check of an abandoned attempt: %v", err)
	}
	if err := m2.Solve(ctx, b.ID, &bytes.Buffer{}); err == nil {
		t.Error("solve of an abandoned attempt")
	}
	if err := m2.Abandon(ctx, b.ID); err != nil {
		t.Errorf("abandoning twice: %v", err)
	}
	if _, err := m2.Check(ctx, 999); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown attempt: %v", err)
	}
	p, _ := m2.Progress(ctx, "")
	if st := p["selector-typo"]; st.State != NotStarted || st.Attempts != 2 {
		t.Errorf("progress after abandoning: %+v", st)
	}
}

// An attempt whose setup failed, found by a later process: it cannot be
// graded (no baseline), keeps the error that stopped it, and a reset
// removes what may be left (without saved state) and starts again.
func TestErroredSetupThenReset(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t, "lab")
	e.w.startErr = errors.New("Pods never became ready")
	m, _ := e.manager()
	if _, err := m.Start(ctx, "", "selector-typo", "lab", nil); err == nil {
		t.Fatal("start succeeded")
	}
	e.w.startErr = nil
	m2, _ := e.manager()
	a, _ := m2.Latest(ctx, "", "selector-typo")
	_, err := m2.Check(ctx, a.ID)
	if err == nil || !strings.Contains(err.Error(), "attempt 1 never finished setting up (setting up scenario selector-typo on cluster lab: Pods never became ready)") {
		t.Fatalf("check: %v", err)
	}
	if got, _ := m2.Attempt(ctx, a.ID); !strings.HasPrefix(got.Error, "setting up scenario") {
		t.Errorf("the setup's error was replaced: %q", got.Error)
	}
	if _, err := m2.Reset(ctx, a.ID, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"start selector-typo on lab failed", "abort selector-typo on lab", "attach selector-typo on lab", "teardown selector-typo on lab", "start selector-typo on lab"}
	if got := e.w.Events(); !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// Continuous evaluation records runs without deciding the attempt:
// progress says "checks passing" until the learner checks.
func TestEvaluate(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t)
	m, _ := e.manager()
	a, _ := m.Start(ctx, "", "selector-typo", "lab", nil)
	if p, _ := m.Progress(ctx, ""); p["selector-typo"].State != Working {
		t.Errorf("progress after start: %+v", p["selector-typo"])
	}
	if rep, err := m.Evaluate(ctx, a.ID); err != nil || len(rep.UnlockedHints) == 0 {
		t.Fatal(rep, err)
	}
	if got, _ := m.Attempt(ctx, a.ID); got.HintsShown != 0 {
		t.Errorf("an evaluation counted %d hints as shown", got.HintsShown)
	}
	e.w.fixed["lab/selector-typo"] = true
	rep, err := m.Evaluate(ctx, a.ID)
	if err != nil || !rep.Passed {
		t.Fatal(rep, err)
	}
	if got, _ := m.Attempt(ctx, a.ID); got.State != StateRunning || !got.LastCheckPassed {
		t.Errorf("after evaluating: %+v", got)
	}
	if p, _ := m.Progress(ctx, ""); p["selector-typo"].State != ChecksPassing {
		t.Errorf("progress: %+v", p["selector-typo"])
	}
	runs, _ := m.History(ctx, a.ID)
	if len(runs) != 2 || runs[1].Trigger != store.TriggerAuto {
		t.Errorf("runs %+v", runs)
	}
	m.Check(ctx, a.ID)
	if p, _ := m.Progress(ctx, ""); p["selector-typo"].State != Solved {
		t.Errorf("progress after checking: %+v", p["selector-typo"])
	}
}

// Progress sums up several attempts per scenario and learners apart.
func TestProgress(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t, "lab", "bob")
	m, _ := e.manager()
	// local: a passed attempt at selector-typo (two hints), then a reset
	// one working again.
	a, _ := m.Start(ctx, "", "selector-typo", "lab", nil)
	m.Hint(ctx, a.ID)
	m.Hint(ctx, a.ID)
	e.w.fixed["lab/selector-typo"] = true
	m.Check(ctx, a.ID)
	b, err := m.Reset(ctx, a.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Check(ctx, b.ID)
	// bob: working on targetport-mismatch.
	c, _ := m.Start(ctx, "bob", "targetport-mismatch", "bob", nil)
	m.Check(ctx, c.ID)

	p, err := m.Progress(ctx, store.LocalLearner)
	if err != nil {
		t.Fatal(err)
	}
	st := p["selector-typo"]
	if st.State != Solved || st.Attempts != 2 || st.Latest.ID != b.ID || st.HintsUsed != 2 || st.BestScore != st.MaxScore || st.MaxScore == 0 || st.LastCheckPassed {
		t.Errorf("local, selector-typo: %+v", st)
	}
	if st := p["targetport-mismatch"]; st.State != NotStarted {
		t.Errorf("local, targetport-mismatch: %+v", st)
	}
	pb, _ := m.Progress(ctx, "bob")
	if st := pb["targetport-mismatch"]; st.State != Working || st.Attempts != 1 || st.BestScore >= st.MaxScore {
		t.Errorf("bob, targetport-mismatch: %+v", st)
	}
	if st := pb["selector-typo"]; st.State != NotStarted {
		t.Errorf("bob, selector-typo: %+v", st)
	}
}

// A failed check's expected value stays hidden until the learner has seen
// the hint that names it: selector-typo's selector-matches-pods names hint
// 2, whose expected value is the fix.
func TestExpectedValuesWaitForTheirHint(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t)
	m, _ := e.manager()
	a, err := m.Start(ctx, "", "selector-typo", "lab", nil)
	if err != nil {
		t.Fatal(err)
	}
	expected := func(rep *grade.Report, id string) grade.Result {
		r, _ := rep.Result(id)
		return r
	}
	rep, err := m.Check(ctx, a.ID) // shows hint 1
	if err != nil {
		t.Fatal(err)
	}
	if r := expected(rep, "slice-has-ready-endpoints"); r.Expected == "" || r.ExpectedAfterHint != 0 {
		t.Errorf("named by hint 1, which the check showed: %+v", r)
	}
	if r := expected(rep, "selector-matches-pods"); r.Expected != "" || r.ExpectedAfterHint != 2 || r.Detail != "observed selector-matches-pods" {
		t.Errorf("named by hint 2, not shown yet: %+v", r)
	}
	if _, _, err := m.Hint(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	rep, _ = m.Check(ctx, a.ID)
	if r := expected(rep, "selector-matches-pods"); r.Expected != "expected the value of selector-matches-pods" || r.ExpectedAfterHint != 0 {
		t.Errorf("after hint 2: %+v", r)
	}
	// What the instructor and the history keep is whole.
	runs, _ := m.History(ctx, a.ID)
	if d := runs[0].Results[1].Detail; d != "observed selector-matches-pods; expected the value of selector-matches-pods" {
		t.Errorf("recorded detail %q", d)
	}
}

// Answers: recorded per attempt, refused for a question the scenario does
// not ask or when too long, given to every grade, and the reference
// answers recorded when the reference solution is used.
func TestAnswers(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t)
	m, _ := e.manager()
	a, err := m.Start(ctx, "", "debugging-sequence", "lab", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Answer(ctx, a.ID, "step-named", "  7 "); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ check, text string }{
		{"worker2-orders-reach-inventory", "6"},
		{"nope", "6"},
		{"step-named", strings.Repeat("x", scenario.MaxAnswerLength+1)},
	} {
		if err := m.Answer(ctx, a.ID, tc.check, tc.text); !errors.Is(err, ErrBadAnswer) {
			t.Errorf("answer %s: %v, want ErrBadAnswer", tc.check, err)
		}
	}
	m.Check(ctx, a.ID)
	if got := e.w.answers; got["step-named"] != "7" || len(got) != 1 {
		t.Errorf("the grade was given the answers %v", got)
	}
	m.Evaluate(ctx, a.ID)
	if got := e.w.answers; got["step-named"] != "7" {
		t.Errorf("the evaluation was given the answers %v", got)
	}
	if err := m.Solve(ctx, a.ID, io.Discard); err != nil {
		t.Fatal(err)
	}
	got, err := m.Answers(ctx, a.ID)
	if err != nil || got["step-named"] != "6" || !strings.HasPrefix(got["what-it-showed"], "internalTrafficPolicy") {
		t.Errorf("after the reference solution: %v %v", got, err)
	}
}
