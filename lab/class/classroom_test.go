package class

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/class/labs"
	"github.com/svclab/svclab/lab/cluster/clustertest"
	"github.com/svclab/svclab/lab/grade"

	"github.com/svclab/svclab/internal/pgtest"
)

type room struct {
	*Classroom
	clk        *clock
	db         *DB
	p          *clustertest.Provider
	instructor Principal
	ann, bob   Principal
	annTok     string
}

func openRoom(t *testing.T, b pgtest.Backend, spec Spec, customize ...func(*Options)) *room {
	t.Helper()
	ctx := context.Background()
	clk := newClock()
	db := openTestDB(t, b, clk.Now)
	created := newClass(t, db, spec)
	p := clustertest.NewProvider()
	o := Options{
		DB: db, Provider: p, Catalog: catalog(t), Now: clk.Now,
		Labs: labs.Config{Memory: func() (uint64, error) { return 64 << 30, nil }, TickInterval: time.Hour},
	}
	for _, c := range customize {
		c(&o)
	}
	cr, err := OpenClassroom(ctx, created.Class.ID, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cr.Shutdown(context.Background()) })
	r := &room{Classroom: cr, clk: clk, db: db, p: p}
	if r.instructor, err = cr.Authenticate(ctx, created.InstructorToken); err != nil || r.instructor.Role != InstructorRole {
		t.Fatalf("instructor: %+v, %v", r.instructor, err)
	}
	for _, name := range []string{"Ann", "Bob"} {
		j, err := cr.Join(ctx, created.Class.JoinCode, name)
		if err != nil {
			t.Fatal(err)
		}
		p, err := cr.Authenticate(ctx, j.Token)
		if err != nil || p.Role != LearnerRole || p.LearnerID != j.Learner.ID {
			t.Fatalf("%s: %+v, %v", name, p, err)
		}
		if name == "Ann" {
			r.ann, r.annTok = p, j.Token
		} else {
			r.bob = p
		}
	}
	return r
}

func (r *room) waitLab(t *testing.T, learner string, want labs.State) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, _ := r.Labs.Lab(learner)
		if l.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's lab is %+v, want %s", learner, l, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAuthorize(t *testing.T) {
	learner := Principal{Role: LearnerRole, ClassID: "c1", LearnerID: "ann"}
	instructor := Principal{Role: InstructorRole, ClassID: "c1"}
	for _, tc := range []struct {
		name    string
		p       Principal
		learner string
		access  Access
		want    error
	}{
		{"learner reads own lab", learner, "ann", Read, nil},
		{"learner writes own lab", learner, "ann", Write, nil},
		{"learner reads another's lab", learner, "bob", Read, ErrForbidden},
		{"learner writes another's lab", learner, "bob", Write, ErrForbidden},
		{"learner of another class", Principal{Role: LearnerRole, ClassID: "c2", LearnerID: "ann"}, "ann", Read, ErrForbidden},
		{"learner without id", Principal{Role: LearnerRole, ClassID: "c1"}, "", Read, ErrForbidden},
		{"instructor reads", instructor, "bob", Read, nil},
		{"instructor types into a terminal", instructor, "bob", Write, ErrForbidden},
		{"instructor of another class", Principal{Role: InstructorRole, ClassID: "c2"}, "bob", Read, ErrForbidden},
		{"anonymous", Principal{Role: Anonymous}, "ann", Read, ErrUnauthenticated},
		{"zero principal", Principal{}, "ann", Read, ErrUnauthenticated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Authorize(tc.p, "c1", tc.learner, tc.access)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Authorize = %v, want %v", err, tc.want)
			}
			if want := map[error]int{nil: 200, ErrForbidden: 403, ErrUnauthenticated: 401}[tc.want]; HTTPStatus(err) != want {
				t.Errorf("HTTPStatus = %d, want %d", HTTPStatus(err), want)
			}
		})
	}
	if err := AuthorizeInstructor(learner, "c1"); !errors.Is(err, ErrForbidden) {
		t.Errorf("a learner as instructor: %v", err)
	}
	if err := AuthorizeInstructor(Principal{}, "c1"); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("anonymous as instructor: %v", err)
	}
}

func TestAuthenticate(t *testing.T) { pgtest.ForEachBackend(t, DBFileName, testAuthenticate) }

func testAuthenticate(t *testing.T, b pgtest.Backend) {
	r := openRoom(t, b, Spec{Name: "cka", Scenarios: []string{"selector-typo"}})
	other := newClass(t, r.db, Spec{Name: "other", Scenarios: []string{"selector-typo"}})
	j, _, err := r.db.Join(context.Background(), other.Class.JoinCode, "Eve")
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{
		"empty": "", "garbage": "hello", "wrong instructor token": InstructorTokenPrefix + "x",
		"another class's instructor": other.InstructorToken, "another class's learner": j.Token,
	} {
		p, err := r.Authenticate(context.Background(), tok)
		if err != nil || p.Role != Anonymous {
			t.Errorf("%s: %+v, %v", name, p, err)
		}
	}
	// A code of another class does not join this one.
	if _, err := r.Join(context.Background(), other.Class.JoinCode, "Mallory"); !errors.Is(err, ErrBadCode) {
		t.Errorf("join with another class's code: %v", err)
	}
}

// TestLearnerScopedCalls runs every learner-scoped call of a Classroom as
// the learner, another learner, the instructor and nobody.
func TestLearnerScopedCalls(t *testing.T) {
	pgtest.ForEachBackend(t, DBFileName, testLearnerScopedCalls)
}

func testLearnerScopedCalls(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	r := openRoom(t, b, Spec{Name: "cka", Exam: true, Scenarios: []string{"selector-typo"}, Capacity: 2, PoolSize: 1})
	if _, err := r.StartLab(r.ann); err != nil {
		t.Fatal(err)
	}
	if _, err := r.StartExam(ctx, r.ann); err != nil {
		t.Fatal(err)
	}
	r.Labs.Request(r.bob.LearnerID) // bob's lab exists too
	r.waitLab(t, r.ann.LearnerID, labs.Ready)
	ann := r.ann.LearnerID
	calls := map[string]func(p Principal) error{
		"lab":     func(p Principal) error { _, err := r.Lab(p, ann); return err },
		"cluster": func(p Principal) error { _, err := r.Cluster(p, ann, Read); return err },
		"terminal input": func(p Principal) error {
			_, err := r.Cluster(p, ann, Write)
			return err
		},
		"exam":   func(p Principal) error { _, err := r.Exam(ctx, p, ann); return err },
		"review": func(p Principal) error { _, err := r.Review(ctx, p, ann); return err },
	}
	anon := Principal{Role: Anonymous}
	for name, call := range calls {
		for who, tc := range map[string]struct {
			p    Principal
			want error
		}{
			"ann":       {r.ann, nil},
			"bob":       {r.bob, ErrForbidden},
			"anonymous": {anon, ErrUnauthenticated},
		} {
			err := call(tc.p)
			if name == "review" && who == "ann" {
				// Allowed, but not before the exam ends.
				if err == nil || !strings.Contains(err.Error(), "the review opens when the exam ends") {
					t.Errorf("%s as %s: %v", name, who, err)
				}
				continue
			}
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("%s as %s: %v, want %v", name, who, err, tc.want)
			}
		}
	}
	if _, err := r.Cluster(r.instructor, ann, Read); err != nil {
		t.Errorf("the instructor's read-only view: %v", err)
	}
	if _, err := r.Cluster(r.instructor, ann, Write); !errors.Is(err, ErrForbidden) {
		t.Errorf("the instructor typing into ann's lab: %v", err)
	}
	// Instructor-only calls.
	for who, p := range map[string]Principal{"ann": r.ann, "anonymous": anon} {
		if _, err := r.Extend(p, ann, time.Minute); err == nil {
			t.Errorf("extend as %s", who)
		}
		if _, err := r.Reset(p, ann); err == nil {
			t.Errorf("reset as %s", who)
		}
		if _, err := r.Push(ctx, p, "", "message", "", "hi"); err == nil {
			t.Errorf("push as %s", who)
		}
	}
	if _, err := r.Subscribe(anon, 1); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("anonymous stream: %v", err)
	}
	if _, err := r.Snapshot(ctx, anon); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("anonymous snapshot: %v", err)
	}
	s, err := r.Snapshot(ctx, r.bob)
	if err != nil || len(s.Rows) != 1 || s.Rows[0].Learner.ID != r.bob.LearnerID {
		t.Errorf("bob's snapshot: %+v, %v", s, err)
	}
	if _, err := r.StartLab(anon); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("anonymous start: %v", err)
	}
}

func report(results ...bool) *grade.Report {
	rep := &grade.Report{Scenario: "selector-typo", Passed: true}
	var got, total float64
	for i, ok := range results {
		rep.Results = append(rep.Results, grade.Result{ID: fmt.Sprintf("c%d", i+1), Weight: float64(i + 1), Passed: ok, Message: fmt.Sprintf("check %d", i+1)})
		total += float64(i + 1)
		if ok {
			got += float64(i + 1)
		} else {
			rep.Passed = false
		}
	}
	rep.Score = 100 * got / total
	return rep
}

func TestBoard(t *testing.T) { pgtest.ForEachBackend(t, DBFileName, testBoard) }

func testBoard(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	r := openRoom(t, b, Spec{Name: "cka", Scenarios: []string{"selector-typo", "targetport-mismatch"}, Capacity: 2})
	all, _ := r.Subscribe(r.instructor, 100)
	annS, _ := r.Subscribe(r.ann, 100)
	bobS, _ := r.Subscribe(r.bob, 100)
	slow, _ := r.Subscribe(r.instructor, 1)
	ann, bob := r.ann.LearnerID, r.bob.LearnerID

	type step struct {
		do        func() error
		learner   string
		scenario  string
		wantState CellState
		wantHints int
	}
	for i, s := range []step{
		{func() error { return r.Board.Started(ctx, ann, "selector-typo") }, ann, "selector-typo", Working, 0},
		{func() error {
			r.clk.Advance(time.Minute)
			return r.Board.Checked(ctx, ann, "selector-typo", report(false, false))
		}, ann, "selector-typo", Working, 0},
		{func() error { return r.Board.HintUsed(ctx, ann, "selector-typo", 2) }, ann, "selector-typo", Working, 2},
		{func() error { return r.Board.HintUsed(ctx, ann, "selector-typo", 1) }, ann, "selector-typo", Working, 2},
		{func() error { return r.Board.Checked(ctx, ann, "selector-typo", report(true, false)) }, ann, "selector-typo", Passing, 2},
		{func() error {
			r.clk.Advance(time.Minute)
			return r.Board.Checked(ctx, ann, "selector-typo", report(true, true))
		}, ann, "selector-typo", Solved, 2},
		{func() error { return r.Board.Checked(ctx, ann, "selector-typo", report(false, true)) }, ann, "selector-typo", Solved, 2},
		{func() error { return r.Board.Checked(ctx, bob, "targetport-mismatch", report(true, false)) }, bob, "targetport-mismatch", Passing, 0},
	} {
		if err := s.do(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		snap, _ := r.Snapshot(ctx, r.instructor)
		var cell Cell
		for _, row := range snap.Rows {
			for _, c := range row.Cells {
				if row.Learner.ID == s.learner && c.Scenario == s.scenario {
					cell = c
				}
			}
		}
		if cell.State != s.wantState || cell.HintsUsed != s.wantHints {
			t.Errorf("step %d: cell %+v, want %s with %d hints", i, cell, s.wantState, s.wantHints)
		}
	}
	snap, _ := r.Snapshot(ctx, r.instructor)
	c := snap.Rows[0].Cells[0]
	if c.TimeSpent != 2*time.Minute || c.Checks != 4 || c.LastCheck == nil || c.LastCheck.Passed || len(c.LastCheck.Results) != 2 {
		t.Errorf("ann's selector-typo cell %+v", c)
	}
	if snap.Rows[0].Cells[1].State != NotStarted {
		t.Errorf("an untouched cell %+v", snap.Rows[0].Cells[1])
	}
	// Bad input.
	if err := r.Board.Started(ctx, ann, "nope"); err == nil || !strings.Contains(err.Error(), "not one of the class's") {
		t.Errorf("unknown scenario: %v", err)
	}
	if err := r.Board.Started(ctx, "ghost", "selector-typo"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown learner: %v", err)
	}
	// Messages: one to ann, one to all, a hint to bob.
	if _, err := r.Push(ctx, r.instructor, ann, "message", "", "Look at the selector."); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Push(ctx, r.instructor, "", "message", "", "Ten minutes left."); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Push(ctx, r.instructor, bob, "hint", "targetport-mismatch", "Compare targetPort with the container port."); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ to, kind, scenario, body, want string }{
		{"", "message", "", "  ", "empty"},
		{"", "shout", "", "x", "unknown kind"},
		{"", "hint", "nope", "x", "a hint needs"},
		{"ghost", "message", "", "x", "not in the class"},
		{"", "message", "", strings.Repeat("x", MaxMessage+1), "keep it under"},
	} {
		if _, err := r.Push(ctx, r.instructor, bad.to, bad.kind, bad.scenario, bad.body); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("push %+v: %v", bad, err)
		}
	}
	// The streams: the instructor saw everything, each learner their own
	// updates and the messages for them, the slow subscriber dropped.
	count := func(s <-chan Update, check func(Update)) int {
		n := 0
		for len(s) > 0 {
			u := <-s
			check(u)
			n++
		}
		return n
	}
	if n := count(all.C, func(Update) {}); n != 11 {
		t.Errorf("the instructor's stream had %d updates, want 11", n)
	}
	var annMsgs, bobMsgs []string
	count(annS.C, func(u Update) {
		if u.Learner != ann && !(u.Kind == UpdateMessage && u.Learner == "") {
			t.Errorf("ann's stream carries %+v", u)
		}
		if u.Message != nil {
			annMsgs = append(annMsgs, u.Message.Body)
		}
	})
	count(bobS.C, func(u Update) {
		if u.Learner != bob && !(u.Kind == UpdateMessage && u.Learner == "") {
			t.Errorf("bob's stream carries %+v", u)
		}
		if u.Message != nil {
			bobMsgs = append(bobMsgs, u.Message.Body)
		}
	})
	if strings.Join(annMsgs, "|") != "Look at the selector.|Ten minutes left." || strings.Join(bobMsgs, "|") != "Ten minutes left.|Compare targetPort with the container port." {
		t.Errorf("ann got %q, bob got %q", annMsgs, bobMsgs)
	}
	if slow.Dropped() != 10 {
		t.Errorf("the slow subscriber dropped %d, want 10", slow.Dropped())
	}
	// Messages and progress are stored: a learner's page after a reload,
	// and the board after a restart.
	s, _ := r.Snapshot(ctx, r.bob)
	if len(s.Messages) != 2 || s.Messages[1].Kind != "hint" || s.Messages[1].Scenario != "targetport-mismatch" {
		t.Errorf("bob's messages %+v", s.Messages)
	}
	b2, err := newBoard(ctx, r.db, r.Class, r.clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := b2.Snapshot(ctx)
	if s2.Rows[0].Cells[0].State != Solved || s2.Rows[1].Cells[1].State != Passing || len(s2.Messages) != 3 {
		t.Errorf("reloaded board %+v", s2)
	}
}

func TestBoardShowsLabs(t *testing.T) { pgtest.ForEachBackend(t, DBFileName, testBoardShowsLabs) }

func testBoardShowsLabs(t *testing.T, b pgtest.Backend) {
	r := openRoom(t, b, Spec{Name: "cka", Scenarios: []string{"selector-typo"}, Capacity: 1, PoolSize: 0})
	bobS, _ := r.Subscribe(r.bob, 100)
	r.StartLab(r.ann)
	if l, err := r.StartLab(r.bob); err != nil || l.State != labs.Queued || l.Position != 1 {
		t.Fatalf("bob: %+v, %v", l, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, _ := r.Snapshot(context.Background(), r.instructor)
		if s.Rows[0].Lab.State == labs.Ready && s.Rows[1].Lab.State == labs.Queued {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("board labs: %+v / %+v", s.Rows[0].Lab, s.Rows[1].Lab)
		}
		time.Sleep(10 * time.Millisecond)
	}
	u := <-bobS.C
	if u.Kind != UpdateLab || u.LabEvent == nil || u.LabEvent.Kind != labs.EventQueued || !strings.Contains(u.LabEvent.Message, "number 1 in the queue") {
		t.Errorf("bob's first update %+v", u)
	}
}

func TestExam(t *testing.T) { pgtest.ForEachBackend(t, DBFileName, testExam) }

func testExam(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	r := openRoom(t, b, Spec{Name: "exam", Exam: true, Scenarios: []string{"selector-typo", "targetport-mismatch"}, Weights: map[string]float64{"selector-typo": 30, "targetport-mismatch": 70}, TimeLimit: time.Hour})
	if _, err := r.Review(ctx, r.ann, r.ann.LearnerID); !errors.Is(err, ErrNotFound) {
		t.Errorf("review before the exam: %v", err)
	}
	e, err := r.StartExam(ctx, r.ann)
	if err != nil || e.Remaining(r.clk.Now()) != time.Hour {
		t.Fatalf("start: %+v, %v", e, err)
	}
	r.clk.Advance(10 * time.Minute)
	if again, _ := r.StartExam(ctx, r.ann); !again.StartedAt.Equal(e.StartedAt) {
		t.Errorf("starting again restarted the clock: %+v", again)
	}
	sel := catalog(t).Get("selector-typo")
	// ann passes every selector-typo check but the first.
	var results []grade.Result
	var total, passed float64
	for i, c := range sel.Checks {
		results = append(results, grade.Result{ID: c.ID, Weight: c.Weight, Passed: i > 0, Message: "m"})
		total += c.Weight
		if i > 0 {
			passed += c.Weight
		}
	}
	r.Board.Checked(ctx, r.ann.LearnerID, "selector-typo", &grade.Report{Results: results})
	if _, err := r.Review(ctx, r.ann, r.ann.LearnerID); err == nil || !strings.Contains(err.Error(), "50m0s left") {
		t.Errorf("review during the exam: %v", err)
	}
	// Time runs out: the exam is scored by the deadline check.
	r.clk.Advance(time.Hour)
	r.FinishDueExams(ctx, true)
	e, err = r.Exam(ctx, r.instructor, r.ann.LearnerID)
	if err != nil || e.Score == nil || !e.FinishedAt.Equal(e.Deadline) {
		t.Fatalf("after the deadline: %+v, %v", e, err)
	}
	want := round2(30 * passed / total)
	if e.Score.Points != want || e.Score.Max != 100 || e.Score.Percent != want {
		t.Errorf("score %+v, want %g points of 100", e.Score, want)
	}
	tp := e.Score.Tasks[1]
	if tp.Checked || tp.Points != 0 || len(tp.Checks) != len(catalog(t).Get("targetport-mismatch").Checks) || tp.Checks[0].Message != "not checked" {
		t.Errorf("unchecked task %+v", tp)
	}
	rev, err := r.Review(ctx, r.ann, r.ann.LearnerID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rev.Items) != 2 || rev.Items[0].Explanation != sel.Explanation || len(rev.Items[0].Solution) == 0 || rev.Items[0].TaskText != sel.Task || rev.Items[0].Checks[0].Description != sel.Checks[0].Description {
		t.Errorf("review %+v", rev.Items[0])
	}
	// bob submits early; a final grading counts.
	r.StartExam(ctx, r.bob)
	r.opts.FinalGrade = func(_ context.Context, learner, scen string) (*grade.Report, error) {
		if scen == "targetport-mismatch" {
			return nil, errors.New("cluster gone")
		}
		var res []grade.Result
		for _, c := range sel.Checks {
			res = append(res, grade.Result{ID: c.ID, Weight: c.Weight, Passed: true})
		}
		return &grade.Report{Results: res, Passed: true}, nil
	}
	e, err = r.FinishExam(ctx, r.bob)
	if err != nil || e.Score == nil || e.Score.Points != 30 || e.FinishedAt.After(e.Deadline) {
		t.Errorf("bob: %+v, %v", e, err)
	}
	if _, err := r.StartExam(ctx, Principal{Role: Anonymous}); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("anonymous exam: %v", err)
	}
}

func TestScoreExamPartialCredit(t *testing.T) {
	cat := catalog(t)
	tasks := []Task{{Scenario: "a", Weight: 40}, {Scenario: "b", Weight: 60}, {Scenario: "c", Weight: 0}}
	for _, tc := range []struct {
		name string
		last map[string]*CheckRun
		want float64
	}{
		{"nothing checked", nil, 0},
		{"all of a", map[string]*CheckRun{"a": {Results: []CheckResult{{ID: "x", Weight: 1, Passed: true}}}}, 40},
		{"a quarter of b", map[string]*CheckRun{"b": {Results: []CheckResult{{ID: "x", Weight: 1, Passed: true}, {ID: "y", Weight: 3}}}}, 15},
		{"a third of a", map[string]*CheckRun{"a": {Results: []CheckResult{{ID: "x", Weight: 1, Passed: true}, {ID: "y", Weight: 2}}}}, 13.33},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ScoreExam(tasks, tc.last, cat)
			if s.Points != tc.want || s.Max != 100 {
				t.Errorf("score %+v, want %g of 100", s, tc.want)
			}
		})
	}
}

func TestExamGradedAfterACrash(t *testing.T) {
	pgtest.ForEachBackend(t, DBFileName, testExamGradedAfterACrash)
}

// testExamGradedAfterACrash: the server dies (no shutdown) during an exam
// whose time then runs out; the next start grades the exam on the lab it
// left before sweeping that lab away, and serves.
func testExamGradedAfterACrash(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	r := openRoom(t, b, Spec{Name: "cka-exam", Exam: true, Scenarios: []string{"selector-typo"}, TimeLimit: time.Hour})
	if _, err := r.StartExam(ctx, r.ann); err != nil {
		t.Fatal(err)
	}
	leftover := r.Class.ClusterPrefix() + "-ab12"
	if err := r.db.Ledger(r.Class.ID).Record(ctx, leftover); err != nil {
		t.Fatal(err)
	}
	// kill -9: nothing is shut down. An hour later svclab starts again.
	r.clk.Advance(61 * time.Minute)
	p := clustertest.NewProvider(leftover)
	sel := catalog(t).Get("selector-typo")
	var gradedWhile []string
	o := Options{DB: r.db, Provider: p, Catalog: catalog(t), Now: r.clk.Now,
		Labs: labs.Config{Memory: func() (uint64, error) { return 64 << 30, nil }, TickInterval: time.Hour},
		FinalGrade: func(_ context.Context, learner, scen string) (*grade.Report, error) {
			gradedWhile = p.Names()
			var res []grade.Result
			for _, c := range sel.Checks {
				res = append(res, grade.Result{ID: c.ID, Weight: c.Weight, Passed: true})
			}
			return &grade.Report{Results: res, Passed: true}, nil
		}}
	again, err := OpenClassroom(ctx, r.Class.ID, o)
	if err != nil {
		t.Fatalf("starting again after the crash: %v", err)
	}
	defer again.Shutdown(context.Background())
	if !slices.Contains(gradedWhile, leftover) {
		t.Errorf("the exam was graded with the clusters %v: the learner's lab %s was swept first", gradedWhile, leftover)
	}
	e, err := again.Exam(ctx, r.instructor, r.ann.LearnerID)
	if err != nil || e.Score == nil || e.Score.Percent != 100 || !e.FinishedAt.Equal(e.Deadline) {
		t.Errorf("the exam after the restart: %+v, %v", e, err)
	}
	if slices.Contains(p.Names(), leftover) {
		t.Error("the leftover lab was not swept after the grading")
	}
}
