package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/svclab/svclab/internal/pgtest"
	"github.com/svclab/svclab/lab/store/sqldb"
)

// forEachBackend runs test on SQLite and on PostgreSQL (a throwaway
// server; skipped, saying why, where none can run).
func forEachBackend(t *testing.T, test func(*testing.T, pgtest.Backend)) {
	pgtest.ForEachBackend(t, FileName, test)
}

var sqliteBackend = pgtest.SQLite(FileName)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func openTest(t *testing.T, b pgtest.Backend) *Store {
	t.Helper()
	s, err := Open(context.Background(), b.Location(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// schema is the database's schema: every table, index and column, as the
// database reports them.
func schema(t *testing.T, s *Store) string {
	t.Helper()
	if s.Dialect() == sqldb.Postgres {
		return pgSchema(t, s)
	}
	rows, err := s.db.Raw().Query(`SELECT type, name, tbl_name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	var tables []string
	for rows.Next() {
		var typ, name, tbl string
		if err := rows.Scan(&typ, &name, &tbl); err != nil {
			t.Fatal(err)
		}
		b.WriteString(typ + " " + name + " on " + tbl + "\n")
		if typ == "table" {
			tables = append(tables, name)
		}
	}
	for _, tbl := range tables {
		cols, err := s.db.Raw().Query(`SELECT name, type, "notnull", COALESCE(dflt_value, ''), pk FROM pragma_table_info(?) ORDER BY name`, tbl)
		if err != nil {
			t.Fatal(err)
		}
		for cols.Next() {
			var name, typ, dflt string
			var notnull, pk int
			if err := cols.Scan(&name, &typ, &notnull, &dflt, &pk); err != nil {
				t.Fatal(err)
			}
			b.WriteString("  " + tbl + "." + name + " " + typ + " notnull=" + string(rune('0'+notnull)) + " default=" + dflt + " pk=" + string(rune('0'+pk)) + "\n")
		}
		cols.Close()
	}
	return b.String()
}

// pgSchema is schema on PostgreSQL: its indexes (with their definitions)
// and columns.
func pgSchema(t *testing.T, s *Store) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT tablename || ' ' || indexname || ': ' || indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY tablename, indexname`,
		`SELECT table_name || '.' || column_name || ' ' || data_type || ' nullable=' || is_nullable || ' identity=' || is_identity || ' default=' || COALESCE(column_default, '')
			FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY table_name, column_name`,
	} {
		rows, err := s.db.Raw().Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			b.WriteString(line + "\n")
		}
		rows.Close()
	}
	return b.String()
}

// seeds write data that is valid at each schema version, for the upgrade
// test to find again afterwards.
var seeds = map[int][]string{
	1: {
		`INSERT INTO learners (id, name, display_name, created_at) VALUES (1, 'local', 'Local learner', 1000)`,
		`INSERT INTO attempts (id, learner_id, scenario_id, cluster, backend, started_at, finished_at, state, score, max_score, error)
			VALUES (1, 1, 'selector-typo', 'lab', 'embedded', 2000, 3000, 'passed', 9, 9, '')`,
		`INSERT INTO check_runs (id, attempt_id, at, duration_ms, passed, score, max_score) VALUES (1, 1, 2500, 1200, 1, 9, 9)`,
		`INSERT INTO check_results (check_run_id, seq, check_id, kind, weight, passed, message, detail, error, duration_ms)
			VALUES (1, 0, 'slice-has-ready-endpoints', 'api', 2, 1, 'ok', '', '', 10)`,
	},
	2: {
		`INSERT INTO hints_shown (attempt_id, hint, shown_at, reason) VALUES (1, 1, 2200, 'requested')`,
		`INSERT INTO attempt_baselines (attempt_id, taken_at, data) VALUES (1, 2100, '{"scenario":"selector-typo"}')`,
	},
	3: {
		`INSERT INTO web_sessions (id, learner_id, created_at, last_seen_at) VALUES ('sess', 1, 4000, 4000)`,
	},
}

// A database of every earlier schema version (and a new one) migrates to
// the current version, keeps its data, and ends with the same schema as a
// database created at the current version.
func TestMigrateFromEachVersion(t *testing.T) { forEachBackend(t, testMigrateFromEachVersion) }

func testMigrateFromEachVersion(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	want := schema(t, openTest(t, b))
	for from := 0; from < SchemaVersion(); from++ {
		t.Run("from version "+string(rune('0'+from)), func(t *testing.T) {
			path := b.Location(t)
			old, err := open(ctx, path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := old.migrate(ctx, migrations, from); err != nil {
				t.Fatal(err)
			}
			if v, err := old.Version(ctx); err != nil || v != from {
				t.Fatalf("version %d, %v; want %d", v, err, from)
			}
			for v := 1; v <= from; v++ {
				for _, stmt := range seeds[v] {
					if _, err := old.db.ExecContext(ctx, stmt); err != nil {
						t.Fatalf("seed of version %d: %v", v, err)
					}
				}
			}
			old.Close()

			s, err := Open(ctx, path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if v, err := s.Version(ctx); err != nil || v != SchemaVersion() {
				t.Fatalf("after migrating: version %d, %v; want %d", v, err, SchemaVersion())
			}
			if got := schema(t, s); got != want {
				t.Errorf("schema after migrating from %d:\n%s\nwant:\n%s", from, got, want)
			}
			if from == 0 {
				return
			}
			a, err := s.Attempt(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if a.Learner != "local" || a.ScenarioID != "selector-typo" || a.State != Passed || a.Score != 9 || a.CheckRuns != 1 || !a.LastCheckPassed {
				t.Errorf("attempt after migrating: %+v", a)
			}
			runs, err := s.CheckRuns(ctx, 1)
			if err != nil || len(runs) != 1 || runs[0].Trigger != TriggerLearner || len(runs[0].Results) != 1 {
				t.Errorf("check runs after migrating: %+v, %v", runs, err)
			}
			if from >= 2 {
				if b, err := s.Baseline(ctx, 1); err != nil || string(b) != `{"scenario":"selector-typo"}` {
					t.Errorf("baseline after migrating: %q, %v", b, err)
				}
			}
			if from >= 3 {
				if ws, err := s.WebSession(ctx, "sess"); err != nil || ws.Learner != "local" {
					t.Errorf("web session after migrating: %+v, %v", ws, err)
				}
			}
			// Opening again changes nothing.
			s.Close()
			s2, err := Open(ctx, path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			if got := schema(t, s2); got != want {
				t.Errorf("schema after opening again:\n%s", got)
			}
		})
	}
}

func TestMigrationsNumbered(t *testing.T) {
	for i, m := range migrations {
		if m.Version != i+1 || m.Name == "" || len(m.SQL) == 0 {
			t.Errorf("migration %d: %+v", i, m)
		}
	}
}

// A migration that fails leaves the database at the version before it,
// with none of its statements applied.
func TestFailedMigrationRollsBack(t *testing.T) { forEachBackend(t, testFailedMigrationRollsBack) }

func testFailedMigrationRollsBack(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	path := b.Location(t)
	s, err := open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bad := []migration{
		migrations[0],
		{Version: 2, Name: "broken", SQL: []string{`CREATE TABLE half (id INTEGER)`, `CREATE TABLE learners (id INTEGER)`}},
	}
	err = s.migrate(ctx, bad, 2)
	if err == nil || !strings.Contains(err.Error(), "migrating the schema to version 2 (broken)") || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("err = %v", err)
	}
	if v, _ := s.Version(ctx); v != 1 {
		t.Errorf("version %d after a failed migration, want 1", v)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM half`).Scan(&n); err == nil {
		t.Error("the failed migration's first statement was kept")
	}
}

func TestNewerDatabaseRefused(t *testing.T) { forEachBackend(t, testNewerDatabaseRefused) }

func testNewerDatabaseRefused(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	path := b.Location(t)
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'from the future', 0)`, SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = Open(ctx, path, Options{})
	if err == nil || !strings.Contains(err.Error(), "written by a newer svclab") || !strings.Contains(err.Error(), sqldb.Display(path)) {
		t.Fatalf("err = %v", err)
	}
}

func TestNotADatabase(t *testing.T) {
	b := sqliteBackend
	path := b.Location(t)
	if err := os.WriteFile(path, []byte(strings.Repeat("not sqlite at all\n", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(context.Background(), path, Options{})
	if err == nil || !strings.Contains(err.Error(), "not a usable svclab database") || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v", err)
	}
	if data, _ := os.ReadFile(path); !strings.HasPrefix(string(data), "not sqlite") {
		t.Error("the file was changed")
	}
}

func TestUnwritableDirectory(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	os.WriteFile(blocker, nil, 0o600)
	_, err := Open(context.Background(), filepath.Join(blocker, FileName), Options{})
	if err == nil || !strings.Contains(err.Error(), "--state-dir") {
		t.Fatalf("err = %v", err)
	}
}

func TestNewFileIsPrivate(t *testing.T) {
	b := sqliteBackend
	s := openTest(t, b)
	fi, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
}

// Several processes (here: stores) opening a new database at once all
// succeed: the migrations run once.
func TestConcurrentOpen(t *testing.T) { forEachBackend(t, testConcurrentOpen) }

func testConcurrentOpen(t *testing.T, b pgtest.Backend) {
	path := b.Location(t)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(context.Background(), path, Options{})
			if err == nil {
				_, err = s.EnsureLearner(context.Background(), LocalLearner, "")
				s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// holdLock takes the database's write lock from another connection (as
// another svclab process would) and releases it after d.
func holdLock(t *testing.T, path string, d time.Duration) <-chan struct{} {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		time.Sleep(d)
		conn.ExecContext(context.Background(), "ROLLBACK")
		conn.Close()
		db.Close()
		close(released)
	}()
	return released
}

// A database locked for longer than the busy timeout: writes are retried
// until the lock goes; when it stays, the error says what happened.
func TestLockedDatabase(t *testing.T) {
	b := sqliteBackend
	ctx := context.Background()
	path := b.Location(t)
	s, err := Open(ctx, path, Options{BusyTimeout: 20 * time.Millisecond, RetryFor: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	released := holdLock(t, path, 300*time.Millisecond)
	if _, err := s.EnsureLearner(ctx, LocalLearner, ""); err != nil {
		t.Fatalf("write while locked for a moment: %v", err)
	}
	<-released

	impatient, err := Open(ctx, path, Options{BusyTimeout: 20 * time.Millisecond, RetryFor: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer impatient.Close()
	released = holdLock(t, path, 2*time.Second)
	defer func() { <-released }()
	_, err = impatient.EnsureLearner(ctx, "someone", "")
	var se *Error
	if !errors.As(err, &se) || se.Tries < 2 || !strings.Contains(err.Error(), "locked by another svclab process") ||
		!strings.Contains(err.Error(), "recording learner someone") || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v", err)
	}
}

func TestLearners(t *testing.T) { forEachBackend(t, testLearners) }

func testLearners(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	s := openTest(t, b)
	l, err := s.EnsureLearner(ctx, LocalLearner, "")
	if err != nil || l.Name != LocalLearner || l.DisplayName != LocalLearner || l.ID == 0 {
		t.Fatalf("%+v, %v", l, err)
	}
	again, err := s.EnsureLearner(ctx, LocalLearner, "ignored")
	if err != nil || again.ID != l.ID || again.DisplayName != LocalLearner {
		t.Errorf("second EnsureLearner: %+v, %v", again, err)
	}
	if err := s.SetDisplayName(ctx, LocalLearner, "Ada"); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.Learner(ctx, LocalLearner); l.DisplayName != "Ada" {
		t.Errorf("display name %q", l.DisplayName)
	}
	if _, err := s.Learner(ctx, "nobody"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown learner: %v", err)
	}
	if err := s.SetDisplayName(ctx, "nobody", "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("renaming an unknown learner: %v", err)
	}
	if _, err := s.EnsureLearner(ctx, " ", ""); err == nil {
		t.Error("a learner with a blank name")
	}
	s.EnsureLearner(ctx, "bob", "Bob")
	list, err := s.Learners(ctx)
	if err != nil || len(list) != 2 || list[0].Name != LocalLearner || list[0].DisplayName != "Ada" || list[1].DisplayName != "Bob" {
		t.Errorf("learners %+v, %v", list, err)
	}
}

func TestAttempts(t *testing.T) { forEachBackend(t, testAttempts) }

func testAttempts(t *testing.T, be pgtest.Backend) {
	ctx := context.Background()
	now := time.UnixMilli(1_700_000_000_000)
	s, err := Open(ctx, be.Location(t), Options{Now: func() time.Time { now = now.Add(time.Second); return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CreateAttempt(ctx, NewAttempt{Learner: "ghost", ScenarioID: "x", Cluster: "lab", Backend: "embedded"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("attempt of an unknown learner: %v", err)
	}
	s.EnsureLearner(ctx, LocalLearner, "")
	s.EnsureLearner(ctx, "bob", "Bob")
	a, err := s.CreateAttempt(ctx, NewAttempt{Learner: LocalLearner, ScenarioID: "selector-typo", Cluster: "lab", Backend: "embedded"})
	if err != nil {
		t.Fatal(err)
	}
	if a.State != Running || !a.Finished.IsZero() || a.Started.IsZero() || a.Learner != LocalLearner || a.Backend != "embedded" {
		t.Errorf("new attempt: %+v", a)
	}
	b, _ := s.CreateAttempt(ctx, NewAttempt{Learner: "bob", ScenarioID: "selector-typo", Cluster: "bob", Backend: "embedded"})
	c, _ := s.CreateAttempt(ctx, NewAttempt{Learner: LocalLearner, ScenarioID: "etp-local-drop", Cluster: "lab2", Backend: "embedded"})

	// Baselines.
	if _, err := s.Baseline(ctx, a.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("baseline before one was set: %v", err)
	}
	s.SetBaseline(ctx, a.ID, []byte("one"))
	s.SetBaseline(ctx, a.ID, []byte("two"))
	if data, err := s.Baseline(ctx, a.ID); err != nil || string(data) != "two" {
		t.Errorf("baseline %q, %v", data, err)
	}

	// Check runs.
	failed := CheckRun{AttemptID: a.ID, Duration: 1500 * time.Millisecond, Score: 2, MaxScore: 9, Results: []CheckResult{
		{CheckID: "a", Kind: "api", Weight: 2, Passed: true, Message: "fine", Duration: 20 * time.Millisecond},
		{CheckID: "b", Kind: "probe", Weight: 7, Message: "refused", Detail: "20 of 20 refused", Error: ""},
	}}
	run, err := s.RecordCheckRun(ctx, failed, "", "")
	if err != nil || run.ID == 0 {
		t.Fatalf("%+v, %v", run, err)
	}
	auto := failed
	auto.Trigger, auto.Passed, auto.Score = TriggerAuto, true, 9
	if _, err := s.RecordCheckRun(ctx, auto, "", ""); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Attempt(ctx, a.ID)
	if got.State != Running || got.Score != 9 || got.MaxScore != 9 || got.CheckRuns != 2 || !got.LastCheckPassed || got.LastCheck.IsZero() {
		t.Errorf("after two check runs: %+v", got)
	}
	passed := failed
	passed.Passed, passed.Score = true, 9
	if _, err := s.RecordCheckRun(ctx, passed, Passed, ""); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Attempt(ctx, a.ID)
	if got.State != Passed || got.Finished.IsZero() {
		t.Errorf("after passing: %+v", got)
	}
	runs, err := s.CheckRuns(ctx, a.ID)
	if err != nil || len(runs) != 3 {
		t.Fatalf("%d runs, %v", len(runs), err)
	}
	r0 := runs[0]
	if r0.Passed || r0.Score != 2 || r0.Duration != 1500*time.Millisecond || r0.Trigger != TriggerLearner || len(r0.Results) != 2 ||
		r0.Results[1] != failed.Results[1] || r0.Results[0] != failed.Results[0] {
		t.Errorf("first run read back: %+v", r0)
	}
	if runs[1].Trigger != TriggerAuto {
		t.Errorf("second run: %+v", runs[1])
	}
	if runs, _ := s.CheckRuns(ctx, b.ID); len(runs) != 0 {
		t.Errorf("attempt b has runs: %+v", runs)
	}
	// A re-check of a passed attempt is recorded but changes neither its
	// state nor its score.
	finished := got.Finished
	if _, err := s.RecordCheckRun(ctx, failed, "", ""); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Attempt(ctx, a.ID)
	if got.State != Passed || got.Score != 9 || got.Finished != finished || got.LastCheckPassed {
		t.Errorf("after re-checking a passed attempt: %+v", got)
	}

	// Hints.
	for _, h := range []struct {
		n      int
		reason HintReason
		added  bool
	}{{2, HintUnlocked, true}, {1, HintRequested, true}, {2, HintRequested, false}} {
		added, err := s.RecordHint(ctx, c.ID, h.n, h.reason)
		if err != nil || added != h.added {
			t.Errorf("hint %d: added %v, %v", h.n, added, err)
		}
	}
	hints, _ := s.Hints(ctx, c.ID)
	if len(hints) != 2 || hints[0].Hint != 2 || hints[0].Reason != HintUnlocked || hints[1].Hint != 1 {
		t.Errorf("hints %+v", hints)
	}
	if got, _ := s.Attempt(ctx, c.ID); got.HintsShown != 2 {
		t.Errorf("hints shown %d", got.HintsShown)
	}
	if _, err := s.RecordHint(ctx, 999, 1, HintRequested); !errors.Is(err, ErrNotFound) {
		t.Errorf("hint of an unknown attempt: %v", err)
	}

	// Listing.
	for _, tc := range []struct {
		f    AttemptFilter
		want []int64
	}{
		{AttemptFilter{}, []int64{c.ID, b.ID, a.ID}},
		{AttemptFilter{Learner: LocalLearner}, []int64{c.ID, a.ID}},
		{AttemptFilter{Learner: LocalLearner, ScenarioID: "selector-typo"}, []int64{a.ID}},
		{AttemptFilter{States: []State{Running}}, []int64{c.ID, b.ID}},
		{AttemptFilter{States: []State{Running, Passed}, Limit: 2}, []int64{c.ID, b.ID}},
		{AttemptFilter{Learner: "nobody"}, nil},
	} {
		list, err := s.Attempts(ctx, tc.f)
		var ids []int64
		for _, a := range list {
			ids = append(ids, a.ID)
		}
		if err != nil || !equal(ids, tc.want) {
			t.Errorf("Attempts(%+v) = %v, %v; want %v", tc.f, ids, err, tc.want)
		}
	}

	if err := s.MarkSolutionUsed(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Attempt(ctx, c.ID); got.SolutionUsed.IsZero() {
		t.Error("solution use not recorded")
	}
	if err := s.MarkSolutionUsed(ctx, 999); !errors.Is(err, ErrNotFound) {
		t.Errorf("solution of an unknown attempt: %v", err)
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestStateTransitions(t *testing.T) { forEachBackend(t, testStateTransitions) }

func testStateTransitions(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	s := openTest(t, b)
	s.EnsureLearner(ctx, LocalLearner, "")
	for _, tc := range []struct {
		path []State
		bad  bool
	}{
		{path: []State{Passed}},
		{path: []State{Errored}},
		{path: []State{Abandoned}},
		{path: []State{Errored, Running, Passed}},
		{path: []State{Errored, Errored, Abandoned}},
		{path: []State{Passed, Errored}, bad: true},
		{path: []State{Passed, Running}, bad: true},
		{path: []State{Abandoned, Running}, bad: true},
		{path: []State{Abandoned, Abandoned}, bad: true},
		{path: []State{"bogus"}, bad: true},
	} {
		a, err := s.CreateAttempt(ctx, NewAttempt{Learner: LocalLearner, ScenarioID: "x", Cluster: fmt.Sprint(tc.path), Backend: "embedded"})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range tc.path {
			if err = s.SetState(ctx, a.ID, st, "setup failed"); err != nil {
				break
			}
		}
		var se *StateError
		if tc.bad != errors.As(err, &se) {
			t.Errorf("%v: %v", tc.path, err)
			continue
		}
		got, _ := s.Attempt(ctx, a.ID)
		last := tc.path[len(tc.path)-1]
		if tc.bad || got.State != last {
			continue
		}
		if (last == Running) != got.Finished.IsZero() {
			t.Errorf("%v: finished %v", tc.path, got.Finished)
		}
		if (last == Errored) != (got.Error == "setup failed") {
			t.Errorf("%v: error %q", tc.path, got.Error)
		}
	}
	if err := s.SetState(ctx, 999, Passed, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown attempt: %v", err)
	}
	a, _ := s.CreateAttempt(ctx, NewAttempt{Learner: LocalLearner, ScenarioID: "x", Cluster: "last", Backend: "embedded"})
	s.SetState(ctx, a.ID, Abandoned, "")
	if _, err := s.RecordCheckRun(ctx, CheckRun{AttemptID: a.ID}, "", ""); err == nil {
		t.Error("a check run of an abandoned attempt was recorded")
	}
}

func TestWebSessions(t *testing.T) { forEachBackend(t, testWebSessions) }

func testWebSessions(t *testing.T, be pgtest.Backend) {
	ctx := context.Background()
	now := time.UnixMilli(1_700_000_000_000)
	s, err := Open(ctx, be.Location(t), Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CreateWebSession(ctx, LocalLearner); !errors.Is(err, ErrNotFound) {
		t.Fatalf("session of an unknown learner: %v", err)
	}
	s.EnsureLearner(ctx, LocalLearner, "")
	a, err := s.CreateWebSession(ctx, LocalLearner)
	if err != nil || len(a.ID) < 40 {
		t.Fatalf("%+v, %v", a, err)
	}
	b, _ := s.CreateWebSession(ctx, LocalLearner)
	if a.ID == b.ID {
		t.Fatal("two sessions with one id")
	}
	now = now.Add(time.Hour)
	got, err := s.WebSession(ctx, a.ID)
	if err != nil || got.Learner != LocalLearner || !got.LastSeen.Equal(now) || got.Created.Equal(now) {
		t.Errorf("%+v, %v", got, err)
	}
	n, err := s.ExpireWebSessions(ctx, now.Add(-time.Minute))
	if err != nil || n != 1 {
		t.Errorf("expired %d, %v", n, err)
	}
	if _, err := s.WebSession(ctx, b.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("expired session: %v", err)
	}
	if err := s.DeleteWebSession(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WebSession(ctx, a.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted session: %v", err)
	}
}

// One cluster runs one attempt at a time, also when two processes start at
// once: the database refuses the second.
func TestOneRunningAttemptPerCluster(t *testing.T) {
	forEachBackend(t, testOneRunningAttemptPerCluster)
}

func testOneRunningAttemptPerCluster(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	s := openTest(t, b)
	s.EnsureLearner(ctx, LocalLearner, "")
	a, err := s.CreateAttempt(ctx, NewAttempt{Learner: LocalLearner, ScenarioID: "x", Cluster: "lab", Backend: "embedded"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateAttempt(ctx, NewAttempt{Learner: LocalLearner, ScenarioID: "y", Cluster: "lab", Backend: "embedded"})
	var busy *BusyError
	if !errors.As(err, &busy) || busy.Attempt.ID != a.ID || busy.Attempt.ScenarioID != "x" || !strings.Contains(err.Error(), "cluster lab is busy with attempt 1 (local at x)") {
		t.Fatalf("second attempt on one cluster: %v", err)
	}
	if _, err := s.CreateAttempt(ctx, NewAttempt{Learner: LocalLearner, ScenarioID: "y", Cluster: "lab", Backend: "kind"}); err != nil {
		t.Errorf("a kind cluster of the same name: %v", err)
	}
	s.SetState(ctx, a.ID, Errored, "setup failed")
	if _, err := s.CreateAttempt(ctx, NewAttempt{Learner: LocalLearner, ScenarioID: "y", Cluster: "lab", Backend: "embedded"}); err != nil {
		t.Errorf("after the first errored: %v", err)
	}
}

// Databases of earlier versions could hold two running attempts on one
// cluster; migrating keeps the newest running.
func TestMigrateDuplicateRunning(t *testing.T) { forEachBackend(t, testMigrateDuplicateRunning) }

func testMigrateDuplicateRunning(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	path := b.Location(t)
	old, err := open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.migrate(ctx, migrations, 3); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`INSERT INTO learners (id, name, display_name, created_at) VALUES (1, 'local', 'local', 1000)`,
		`INSERT INTO attempts (id, learner_id, scenario_id, cluster, backend, started_at, state) VALUES (1, 1, 'a', 'lab', 'embedded', 2000, 'running')`,
		`INSERT INTO attempts (id, learner_id, scenario_id, cluster, backend, started_at, state) VALUES (2, 1, 'b', 'lab', 'embedded', 3000, 'running')`,
		`INSERT INTO attempts (id, learner_id, scenario_id, cluster, backend, started_at, state) VALUES (3, 1, 'c', 'other', 'embedded', 3000, 'running')`,
	} {
		if _, err := old.db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for id, want := range map[int64]State{1: Abandoned, 2: Running, 3: Running} {
		if a, err := s.Attempt(ctx, id); err != nil || a.State != want || (want == Abandoned && a.Finished.IsZero()) {
			t.Errorf("attempt %d: %+v, %v; want %s", id, a, err, want)
		}
	}
}

func TestTimeline(t *testing.T) { forEachBackend(t, testTimeline) }

func testTimeline(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	s := openTest(t, b)
	if _, err := s.EnsureLearner(ctx, LocalLearner, ""); err != nil {
		t.Fatal(err)
	}
	a, err := s.CreateAttempt(ctx, NewAttempt{Learner: LocalLearner, ScenarioID: "selector-typo", Cluster: "lab", Backend: "embedded"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.UnixMilli(1_700_000_000_000)
	long := strings.Repeat("é", MaxEventText) // cut mid-rune must stay valid UTF-8
	batches := [][]Event{
		{{At: at, Kind: "command", Source: "lab-control-plane", Text: "kubectl -n shop get svc"}},
		{{At: at.Add(time.Second), Kind: "k8s", Source: "endpointslice-controller", Level: "info", Text: "slice updated"},
			{At: at.Add(2 * time.Second), Kind: "check", Level: "warning", Text: long, Source: strings.Repeat("s", 1<<20)}},
		nil,
	}
	for _, batch := range batches {
		if err := s.AppendEvents(ctx, a.ID, batch); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Events(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Text != "kubectl -n shop get svc" || got[0].Source != "lab-control-plane" || !got[1].At.Equal(at.Add(time.Second)) ||
		got[2].Kind != "check" || !utf8.ValidString(got[2].Text) || len(got[2].Text) > MaxEventText+len("…") || len(got[2].Source) > MaxEventSource+len("…") ||
		!(got[0].Seq < got[1].Seq && got[1].Seq < got[2].Seq) {
		t.Fatalf("timeline: %+v", got)
	}
	if err := s.AppendEvents(ctx, a.ID+100, []Event{{Kind: "command", Text: "x"}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("events of a missing attempt: %v", err)
	}
	if evs, err := s.Events(ctx, a.ID+100); err != nil || len(evs) != 0 {
		t.Errorf("timeline of a missing attempt: %v %v", evs, err)
	}
}

// Processes starting attempts on one cluster at once: exactly one gets
// it, the others are told who has it — also on PostgreSQL, where the
// writes run at once (serializable, retried on conflicts).
func TestConcurrentCreateAttempt(t *testing.T) { forEachBackend(t, testConcurrentCreateAttempt) }

func testConcurrentCreateAttempt(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	loc := b.Location(t)
	first := openTest2(t, loc)
	if _, err := first.EnsureLearner(ctx, LocalLearner, ""); err != nil {
		t.Fatal(err)
	}
	const n = 6
	stores := []*Store{first}
	for len(stores) < n {
		stores = append(stores, openTest2(t, loc))
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.CreateAttempt(ctx, NewAttempt{Learner: LocalLearner, ScenarioID: fmt.Sprint("s", i), Cluster: "lab", Backend: "embedded"})
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		var busy *BusyError
		switch {
		case err == nil:
			won++
		case !errors.As(err, &busy):
			t.Errorf("a loser's error: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d attempts got the cluster: %v", won, errs)
	}
	if running, err := first.Attempts(ctx, AttemptFilter{States: []State{Running}}); err != nil || len(running) != 1 {
		t.Errorf("running attempts %+v, %v", running, err)
	}
}

func openTest2(t *testing.T, location string) *Store {
	t.Helper()
	s, err := Open(context.Background(), location, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A PostgreSQL server that goes away for a moment: what svclab does then
// fails with an error that says so, and works again once the server is
// back, with nothing lost. A write begun during the outage is retried
// until the server is back.
func TestPostgresOutage(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	loc := srv.NewDatabase(t)
	s, err := Open(ctx, loc, Options{RetryFor: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	patient, err := Open(ctx, loc, Options{RetryFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer patient.Close()
	s.EnsureLearner(ctx, LocalLearner, "")
	before, err := s.CreateAttempt(ctx, NewAttempt{Learner: LocalLearner, ScenarioID: "x", Cluster: "lab", Backend: "embedded"})
	if err != nil {
		t.Fatal(err)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	impatient, _ := Open(ctx, loc, Options{RetryFor: -1})
	if impatient != nil {
		t.Fatal("opened a database whose server is down")
	}
	_, err = s.Attempt(ctx, before.ID)
	var se *Error
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "cannot reach the PostgreSQL server") ||
		!strings.Contains(err.Error(), "reading attempt") || !strings.Contains(err.Error(), sqldb.Display(loc)) || strings.Contains(err.Error(), srvPassword(loc)) {
		t.Fatalf("reading while the server is down: %v", err)
	}
	t.Logf("the error while the server is down: %v", err)

	// A write while the server is down waits for it.
	done := make(chan error, 1)
	go func() {
		_, err := patient.RecordCheckRun(ctx, CheckRun{AttemptID: before.ID, Passed: true, Score: 1, MaxScore: 1}, Passed, "")
		done <- err
	}()
	time.Sleep(time.Second)
	select {
	case err := <-done:
		t.Fatalf("the write ended while the server was down: %v", err)
	default:
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the write begun while the server was down: %v", err)
	}
	a, err := s.Attempt(ctx, before.ID)
	if err != nil || a.State != Passed || a.CheckRuns != 1 || a.Learner != LocalLearner {
		t.Fatalf("after the server is back: %+v, %v", a, err)
	}
	if runs, err := s.CheckRuns(ctx, before.ID); err != nil || len(runs) != 1 {
		t.Errorf("check runs after the outage: %+v, %v", runs, err)
	}
}

func srvPassword(loc string) string {
	u, _ := url.Parse(loc)
	pw, _ := u.User.Password()
	return pw
}

// A --database-url that PostgreSQL refuses fails at once, saying why and
// without the password.
func TestPostgresRefusedURL(t *testing.T) {
	loc := pgtest.Postgres.Location(t)
	u, _ := url.Parse(loc)
	wrongPassword := *u
	wrongPassword.User = url.UserPassword("postgres", "not-the-password")
	noDatabase := *u
	noDatabase.Path = "/no_such_database"
	for _, tc := range []struct {
		name, url, want string
	}{
		{"wrong password", wrongPassword.String(), "PostgreSQL refused the user or password of --database-url"},
		{"no database", noDatabase.String(), "the database of --database-url does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := Open(context.Background(), tc.url, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "not-the-password") || strings.Contains(err.Error(), srvPassword(loc)) {
				t.Fatalf("err = %v", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v: retried an error that stays", d)
			}
			t.Log(err)
		})
	}
}

// An attempt holds its cluster while it runs, or after an error once its
// setup finished; another process asks through AttemptHoldsCluster.
func TestHoldsCluster(t *testing.T) { forEachBackend(t, testHoldsCluster) }

func testHoldsCluster(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	loc := b.Location(t)
	s, err := Open(ctx, loc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.EnsureLearner(ctx, LocalLearner, "")
	holds := func(id int64) bool {
		t.Helper()
		mine, err := s.HoldsCluster(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := AttemptHoldsCluster(ctx, loc, id, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if mine != theirs {
			t.Fatalf("attempt %d: this store says %v, another process %v", id, mine, theirs)
		}
		return mine
	}
	newAttempt := func(cluster string) int64 {
		a, err := s.CreateAttempt(ctx, NewAttempt{Learner: LocalLearner, ScenarioID: "x", Cluster: cluster, Backend: "embedded"})
		if err != nil {
			t.Fatal(err)
		}
		return a.ID
	}
	running := newAttempt("a")
	if !holds(running) {
		t.Error("a running attempt (being set up) does not hold its cluster")
	}
	failedSetup := newAttempt("b")
	s.SetState(ctx, failedSetup, Errored, "setup failed")
	if holds(failedSetup) {
		t.Error("an attempt whose setup failed holds its cluster")
	}
	timedOut := newAttempt("c")
	s.SetBaseline(ctx, timedOut, []byte("{}"))
	s.SetState(ctx, timedOut, Errored, "a check timed out")
	if !holds(timedOut) {
		t.Error("an attempt errored after its setup does not hold its cluster")
	}
	for _, to := range []State{Passed, Abandoned} {
		id := newAttempt("d")
		s.SetBaseline(ctx, id, []byte("{}"))
		if err := s.SetState(ctx, id, to, ""); err != nil {
			t.Fatal(err)
		}
		if holds(id) {
			t.Errorf("a %s attempt holds its cluster", to)
		}
	}
	if holds(9999) {
		t.Error("an attempt that does not exist holds its cluster")
	}
	if !sqldb.IsURL(loc) {
		gone := filepath.Join(t.TempDir(), "gone.db")
		if h, err := AttemptHoldsCluster(ctx, gone, 1, Options{}); h || err != nil {
			t.Errorf("a database that is gone: %v, %v", h, err)
		}
		if _, err := os.Stat(gone); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("asking created the database: %v", err)
		}
	}
}

func TestAnswers(t *testing.T) { forEachBackend(t, testAnswers) }

// An attempt's answers: recorded, replaced, taken back, gone with the
// attempt's learner; an unknown attempt is not found.
func testAnswers(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	s := openTest(t, b)
	s.EnsureLearner(ctx, "ann", "Ann")
	a, err := s.CreateAttempt(ctx, NewAttempt{Learner: "ann", ScenarioID: "debugging-sequence", Cluster: "lab", Backend: "embedded"})
	if err != nil {
		t.Fatal(err)
	}
	answers := func() map[string]string {
		t.Helper()
		m, err := s.Answers(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := answers(); len(m) != 0 {
		t.Errorf("answers of a new attempt: %v", m)
	}
	for _, set := range [][2]string{{"step", "5"}, {"step", "step 6 — the traffic policy"}, {"field", "externalTrafficPolicy"}} {
		if err := s.SetAnswer(ctx, a.ID, set[0], set[1]); err != nil {
			t.Fatal(err)
		}
	}
	if m := answers(); len(m) != 2 || m["step"] != "step 6 — the traffic policy" || m["field"] != "externalTrafficPolicy" {
		t.Errorf("answers %v", m)
	}
	if err := s.SetAnswer(ctx, a.ID, "field", ""); err != nil {
		t.Fatal(err)
	}
	if m := answers(); len(m) != 1 || m["field"] != "" {
		t.Errorf("after taking one back: %v", m)
	}
	if err := s.SetAnswer(ctx, 999, "step", "6"); !errors.Is(err, ErrNotFound) {
		t.Errorf("answer of an unknown attempt: %v", err)
	}
}
