package class

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/scenario"

	"github.com/svclab/svclab/internal/pgtest"
	"github.com/svclab/svclab/lab/store"
	"github.com/svclab/svclab/lab/store/sqldb"
)

var (
	catOnce sync.Once
	cat     *scenario.Catalog
)

func catalog(t *testing.T) *scenario.Catalog {
	t.Helper()
	catOnce.Do(func() { cat = Catalog(nil) })
	if cat.Get("selector-typo") == nil || cat.Get("targetport-mismatch") == nil {
		t.Fatalf("the built-in scenarios are missing: %v", cat.IDs())
	}
	return cat
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)} }

func openTestDB(t *testing.T, b pgtest.Backend, now func() time.Time) *DB {
	t.Helper()
	db, err := OpenDB(context.Background(), b.Location(t), now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestSpecNormalize(t *testing.T) {
	cat := catalog(t)
	for _, tc := range []struct {
		name string
		spec Spec
		want string
	}{
		{"ok", Spec{Name: "cka", Scenarios: []string{"selector-typo", "targetport-mismatch"}}, ""},
		{"no name", Spec{Scenarios: []string{"selector-typo"}}, "needs a name"},
		{"long name", Spec{Name: strings.Repeat("x", 61), Scenarios: []string{"selector-typo"}}, "at most 60"},
		{"no scenarios", Spec{Name: "c"}, "needs scenarios: --scenarios ID,ID (the scenarios are "},
		{"unknown scenario", Spec{Name: "c", Scenarios: []string{"nope"}}, `no scenario "nope": the scenarios are `},
		{"twice", Spec{Name: "c", Scenarios: []string{"selector-typo", "selector-typo"}}, "listed twice"},
		{"capacity", Spec{Name: "c", Scenarios: []string{"selector-typo"}, Capacity: -1}, "--capacity -1"},
		{"pool above capacity", Spec{Name: "c", Scenarios: []string{"selector-typo"}, Capacity: 2, PoolSize: 3}, "--warm-pool 3: use 0 to 2"},
		{"short time limit", Spec{Name: "c", Scenarios: []string{"selector-typo"}, TimeLimit: time.Second}, "--time-limit 1s"},
		{"weights without exam", Spec{Name: "c", Scenarios: []string{"selector-typo"}, Weights: map[string]float64{"selector-typo": 1}}, "add --exam"},
		{"weight of another scenario", Spec{Name: "c", Exam: true, Scenarios: []string{"selector-typo"}, Weights: map[string]float64{"targetport-mismatch": 1}}, "not one of the class's scenarios"},
		{"zero weight", Spec{Name: "c", Exam: true, Scenarios: []string{"selector-typo"}, Weights: map[string]float64{"selector-typo": 0}}, "must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shape, err := tc.spec.Normalize(cat)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("err = %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if shape.Workers != 2 || tc.spec.Capacity != DefaultCapacity || tc.spec.IdleTimeout != DefaultIdleTimeout {
				t.Errorf("shape %+v, spec %+v", shape, tc.spec)
			}
		})
	}
	// The labs' proxy mode: the class's, or iptables when every scenario
	// is written for it. Scenarios of both modes share a class (a
	// scenario's set-up switches its lab).
	for _, tc := range []struct {
		mode      string
		scenarios []string
		want      string
	}{
		{"", []string{"selector-typo", "four-step-chain"}, "nftables"},
		{"", []string{"four-step-chain"}, "nftables"},
		{"", []string{"kube-proxy-mode-switch", "localhost-nodeport-nftables"}, "iptables"},
		{"", []string{"kube-proxy-mode-switch", "selector-typo"}, "nftables"},
		{"iptables", []string{"selector-typo", "four-step-chain"}, "iptables"},
		{"nftables", []string{"kube-proxy-mode-switch"}, "nftables"},
		{"ipvs", []string{"four-step-chain"}, `--proxy-mode "ipvs": give nftables or iptables`},
	} {
		spec := Spec{Name: "m", Scenarios: tc.scenarios, ProxyMode: tc.mode}
		shape, err := spec.Normalize(cat)
		got := shape.ProxyMode
		if err != nil {
			got = err.Error()
		}
		if got != tc.want || (err == nil && spec.ProxyMode != tc.want) {
			t.Errorf("class of %v in mode %q: labs in %q (spec %q), want %q", tc.scenarios, tc.mode, got, spec.ProxyMode, tc.want)
		}
	}
	exam := Spec{Name: "e", Exam: true, Scenarios: []string{"selector-typo", "targetport-mismatch"}, Weights: map[string]float64{"selector-typo": 3}}
	if _, err := exam.Normalize(cat); err != nil || exam.Weights["targetport-mismatch"] != 1 || exam.Weights["selector-typo"] != 3 {
		t.Errorf("exam weights %v, %v", exam.Weights, err)
	}
}

func TestParseWeights(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want map[string]float64
		err  string
	}{
		{[]string{"a=30", "b=70.5"}, map[string]float64{"a": 30, "b": 70.5}, ""},
		{[]string{"a"}, nil, "use SCENARIO=WEIGHT"},
		{[]string{"a=x"}, nil, "use SCENARIO=WEIGHT"},
		{[]string{"=3"}, nil, "use SCENARIO=WEIGHT"},
		{[]string{"a=1", "a=2"}, nil, "twice"},
	} {
		got, err := ParseWeights(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err %v", tc.in, err)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) || got["a"] != tc.want["a"] || got["b"] != tc.want["b"] {
			t.Errorf("%v: %v, %v", tc.in, got, err)
		}
	}
}

func TestCodesAndNames(t *testing.T) {
	for in, want := range map[string]string{"abcd-efgh": "ABCD-EFGH", " abcd efgh ": "ABCD-EFGH", "ABCDEFGH": "ABCD-EFGH", "abc": "ABC"} {
		if got := NormalizeCode(in); got != want {
			t.Errorf("NormalizeCode(%q) = %q, want %q", in, got, want)
		}
	}
	code := newJoinCode()
	if len(code) != 9 || NormalizeCode(strings.ToLower(code)) != code || strings.ContainsAny(code, "01IO") {
		t.Errorf("join code %q", code)
	}
	for in, want := range map[string]string{"  Ann   Lee ": "Ann Lee", "": "enter a name", strings.Repeat("a", 41): "at most 40", "a\x00b": "letters, digits"} {
		got, err := CleanName(in)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, want) {
			t.Errorf("CleanName(%q) = %q, want %q", in, got, want)
		}
	}
}

func newClass(t *testing.T, db *DB, spec Spec) Created {
	t.Helper()
	if _, err := spec.Normalize(catalog(t)); err != nil {
		t.Fatal(err)
	}
	c, err := db.CreateClass(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCreateAndJoin(t *testing.T) { pgtest.ForEachBackend(t, DBFileName, testCreateAndJoin) }

func testCreateAndJoin(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	clk := newClock()
	db := openTestDB(t, b, clk.Now)
	cr := newClass(t, db, Spec{Name: "cka", Scenarios: []string{"selector-typo"}, Seats: 2, CodeTTL: time.Hour})
	if _, err := db.CreateClass(ctx, cr.Class.Spec); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("same name twice: %v", err)
	}
	closed := newClass(t, db, Spec{Name: "old", Scenarios: []string{"selector-typo"}})
	if err := db.CloseClass(ctx, closed.Class.ID); err != nil {
		t.Fatal(err)
	}
	code := cr.Class.JoinCode
	type step struct {
		advance    time.Duration
		code, name string
		want       error
		wantText   string
	}
	for _, s := range []step{
		{code: "AAAA-AAAA", name: "Ann", want: ErrBadCode},
		{code: "", name: "Ann", want: ErrBadCode},
		{code: closed.Class.JoinCode, name: "Ann", want: ErrClassClosed},
		{code: code, name: "  ", wantText: "enter a name"},
		{code: strings.ToLower(code), name: "Ann"},
		{code: code, name: "ANN", want: ErrNameTaken},
		{code: code, name: "Bob"},
		{code: code, name: "Cid", want: ErrClassFull},
		{advance: time.Hour, code: code, name: "Dan", want: ErrCodeExpired},
	} {
		clk.Advance(s.advance)
		j, _, err := db.Join(ctx, s.code, s.name)
		switch {
		case s.want != nil:
			if !errors.Is(err, s.want) {
				t.Errorf("join %q as %q: %v, want %v", s.code, s.name, err, s.want)
			}
		case s.wantText != "":
			if err == nil || !strings.Contains(err.Error(), s.wantText) {
				t.Errorf("join %q as %q: %v, want %q", s.code, s.name, err, s.wantText)
			}
		default:
			if err != nil {
				t.Fatalf("join %q as %q: %v", s.code, s.name, err)
			}
			if !strings.HasPrefix(j.Token, LearnerTokenPrefix) || j.Learner.ClassID != cr.Class.ID {
				t.Errorf("joined %+v", j)
			}
			got, err := db.LearnerByToken(ctx, j.Token)
			if err != nil || got != j.Learner {
				t.Errorf("LearnerByToken = %+v, %v; want %+v", got, err, j.Learner)
			}
		}
	}
	ls, _ := db.Learners(ctx, cr.Class.ID)
	if len(ls) != 2 || ls[0].Name != "Ann" || ls[1].Name != "Bob" {
		t.Errorf("learners %+v", ls)
	}
	for _, bad := range []string{"", "svl_", "svl_nope", cr.InstructorToken} {
		if _, err := db.LearnerByToken(ctx, bad); !errors.Is(err, ErrNotFound) {
			t.Errorf("LearnerByToken(%q): %v", bad, err)
		}
	}
}

func TestInstructorToken(t *testing.T) { pgtest.ForEachBackend(t, DBFileName, testInstructorToken) }

func testInstructorToken(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	db := openTestDB(t, b, nil)
	cr := newClass(t, db, Spec{Name: "cka", Scenarios: []string{"selector-typo"}})
	c, err := db.Class(ctx, cr.Class.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cr.InstructorToken, InstructorTokenPrefix) || len(cr.InstructorToken) < 30 {
		t.Errorf("token %q", cr.InstructorToken)
	}
	if c.tokenHash == cr.InstructorToken || strings.Contains(c.tokenHash, cr.InstructorToken[4:]) {
		t.Error("the token is stored, not its hash")
	}
	for tok, want := range map[string]bool{cr.InstructorToken: true, cr.InstructorToken + "x": false, "": false, strings.ToUpper(cr.InstructorToken): false} {
		if got := c.CheckInstructorToken(tok); got != want {
			t.Errorf("CheckInstructorToken(%q) = %v", tok, got)
		}
	}
	if (&Class{}).CheckInstructorToken("") {
		t.Error("an empty hash matched")
	}
}

func TestMigrationsAreIdempotentAndShareTheFile(t *testing.T) {
	pgtest.ForEachBackend(t, DBFileName, testMigrationsAreIdempotentAndShareTheFile)
}

func testMigrationsAreIdempotentAndShareTheFile(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	path := b.Location(t)
	db, err := OpenDB(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Another package's tables and migration history in the same file
	// (lab/store's schema_migrations) are left alone.
	if _, err := db.db.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	db.db.ExecContext(ctx, `INSERT INTO schema_migrations VALUES (7, 'theirs', 0)`)
	newClass(t, db, Spec{Name: "cka", Scenarios: []string{"selector-typo"}})
	db.Close()
	db, err = OpenDB(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n, theirs int
	db.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM class_schema_migrations`).Scan(&n)
	db.db.QueryRowContext(ctx, `SELECT version FROM schema_migrations`).Scan(&theirs)
	if n != len(migrations) || theirs != 7 {
		t.Errorf("class migrations %d, theirs %d", n, theirs)
	}
	if cs, err := db.Classes(ctx); err != nil || len(cs) != 1 {
		t.Errorf("classes after reopening: %v, %v", cs, err)
	}
	// A newer svclab's class tables are refused.
	db.db.ExecContext(ctx, `INSERT INTO class_schema_migrations VALUES (99, 'future', 0)`)
	db.Close()
	if _, err := OpenDB(ctx, path, nil); err == nil || !strings.Contains(err.Error(), "newer svclab") {
		t.Errorf("open a newer database: %v", err)
	}
}

func TestLedger(t *testing.T) { pgtest.ForEachBackend(t, DBFileName, testLedger) }

func testLedger(t *testing.T, be pgtest.Backend) {
	ctx := context.Background()
	db := openTestDB(t, be, nil)
	a := newClass(t, db, Spec{Name: "a", Scenarios: []string{"selector-typo"}})
	b := newClass(t, db, Spec{Name: "b", Scenarios: []string{"selector-typo"}})
	la, lb := db.Ledger(a.Class.ID), db.Ledger(b.Class.ID)
	la.Record(ctx, "x-1")
	la.Record(ctx, "x-1")
	la.Record(ctx, "x-2")
	lb.Record(ctx, "y-1")
	lb.Forget(ctx, "x-2") // not b's
	la.Forget(ctx, "x-1")
	if got, _ := la.Owned(ctx); strings.Join(got, ",") != "x-2" {
		t.Errorf("a owns %v", got)
	}
	if got, _ := lb.Owned(ctx); strings.Join(got, ",") != "y-1" {
		t.Errorf("b owns %v", got)
	}
}

func TestTransient(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), DBFileName)
	db, err := OpenDB(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Another process holds the write lock; a connection that does not
	// wait gets SQLITE_BUSY, which is worth retrying.
	holder, err := db.db.Raw().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	impatient, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer impatient.Close()
	_, err = impatient.ExecContext(ctx, `INSERT INTO class_clusters (name, class_id, recorded_at) VALUES ('x', 'y', 0)`)
	if err == nil || !sqldb.Transient(err) {
		t.Errorf("a locked database: %v, transient %v", err, sqldb.Transient(err))
	}
	holder.ExecContext(ctx, `ROLLBACK`)
	if sqldb.Transient(errors.New("no such table")) || sqldb.Transient(ErrClassFull) {
		t.Error("a permanent error is transient")
	}
}

// A PostgreSQL server that restarts under a class: a learner joining
// meanwhile waits and gets in once it is back; with no time to wait, the
// error says the server is unreachable (and never shows the password).
func TestPostgresRestart(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	loc := srv.NewDatabase(t)
	db, err := OpenDB(ctx, loc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := newClass(t, db, Spec{Name: "cka", Scenarios: []string{"selector-typo"}})
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := db.Join(ctx, c.Class.JoinCode, "Ann")
		done <- err
	}()
	time.Sleep(time.Second)
	select {
	case err := <-done:
		t.Fatalf("joined while the server was down: %v", err)
	default:
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("joining across the restart: %v", err)
	}
	if ls, err := db.Learners(ctx, c.Class.ID); err != nil || len(ls) != 1 || ls[0].Name != "Ann" {
		t.Errorf("learners after the restart: %+v, %v", ls, err)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	_, err = db.Classes(short)
	u, _ := url.Parse(loc)
	pw, _ := u.User.Password()
	if err == nil || !strings.Contains(err.Error(), "cannot reach the PostgreSQL server") || !strings.Contains(err.Error(), "listing classes") || strings.Contains(err.Error(), pw) {
		t.Fatalf("listing classes while the server is down: %v", err)
	}
	t.Logf("while the server is down: %v", err)
}

// Processes opening a new database at once — svclab serve (lab/store)
// and class commands (lab/class) — all succeed: each package's
// migrations run once.
func TestConcurrentOpen(t *testing.T) { pgtest.ForEachBackend(t, DBFileName, testConcurrentOpen) }

func testConcurrentOpen(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	loc := b.Location(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				st, err := store.Open(ctx, loc, store.Options{})
				if err == nil {
					st.Close()
				}
				errs[i] = err
				return
			}
			db, err := OpenDB(ctx, loc, nil)
			if err == nil {
				_, err = db.Classes(ctx)
				db.Close()
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
	db := openTestDBAt(t, loc)
	var n int
	if err := db.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM class_schema_migrations`).Scan(&n); err != nil || n != len(migrations) {
		t.Errorf("class migrations recorded: %d, %v", n, err)
	}
}

func openTestDBAt(t *testing.T, location string) *DB {
	t.Helper()
	db, err := OpenDB(context.Background(), location, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Learners joining at once through different processes never take more
// seats than the class has (on PostgreSQL: the serializable transaction
// that counts the seats and adds the learner is retried on a conflict).
func TestConcurrentJoin(t *testing.T) { pgtest.ForEachBackend(t, DBFileName, testConcurrentJoin) }

func testConcurrentJoin(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	loc := b.Location(t)
	c := newClass(t, openTestDBAt(t, loc), Spec{Name: "cka", Scenarios: []string{"selector-typo"}, Seats: 2})
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, 8)
	for i := range errs {
		db := openTestDBAt(t, loc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, _, errs[i] = db.Join(ctx, c.Class.JoinCode, fmt.Sprint("learner ", i))
		}()
	}
	close(start)
	wg.Wait()
	joined := 0
	for _, err := range errs {
		switch {
		case err == nil:
			joined++
		case !errors.Is(err, ErrClassFull):
			t.Errorf("join: %v", err)
		}
	}
	ls, err := openTestDBAt(t, loc).Learners(ctx, c.Class.ID)
	if joined != 2 || err != nil || len(ls) != 2 {
		t.Errorf("%d joined, %d learners (%v); the class has 2 seats: %v", joined, len(ls), err, errs)
	}
}

func TestInstructorSessions(t *testing.T) {
	pgtest.ForEachBackend(t, DBFileName, testInstructorSessions)
}

// testInstructorSessions: a session needs the right token, is stored by
// its hash, belongs to its class, and ends at sign-out or by itself.
func testInstructorSessions(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	db := openTestDB(t, b, func() time.Time { return now })
	cr := newClass(t, db, Spec{Name: "cka", Scenarios: []string{"selector-typo"}})
	other := newClass(t, db, Spec{Name: "ckad", Scenarios: []string{"selector-typo"}})
	c, _ := db.Class(ctx, cr.Class.ID)
	oc, _ := db.Class(ctx, other.Class.ID)
	if _, _, err := db.NewInstructorSession(ctx, c, other.InstructorToken); !errors.Is(err, ErrBadToken) {
		t.Errorf("another class's token: %v", err)
	}
	tok, exp, err := db.NewInstructorSession(ctx, c, cr.InstructorToken)
	if err != nil || !strings.HasPrefix(tok, SessionTokenPrefix) || !exp.Equal(now.Add(InstructorSessionTTL)) {
		t.Fatalf("a session: %q %v %v", tok, exp, err)
	}
	if p, _ := Authenticate(ctx, db, c, tok); p.Role != InstructorRole {
		t.Errorf("the session is %v", p.Role)
	}
	if p, _ := Authenticate(ctx, db, oc, tok); p.Role != Anonymous {
		t.Errorf("the session in another class is %v", p.Role)
	}
	now = now.Add(InstructorSessionTTL)
	if p, _ := Authenticate(ctx, db, c, tok); p.Role != Anonymous {
		t.Errorf("an expired session is %v", p.Role)
	}
	now = now.Add(-time.Hour)
	if err := db.EndInstructorSession(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if p, _ := Authenticate(ctx, db, c, tok); p.Role != Anonymous {
		t.Errorf("a session signed out is %v", p.Role)
	}
}
