package owner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/store"
)

// attempts is the attempts' databases of a test: which attempts hold.
type attempts struct {
	mu    sync.Mutex
	holds map[int64]bool
	err   error
}

func (a *attempts) set(id int64, holds bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.holds[id] = holds
}

func (a *attempts) check(_ context.Context, at Attempt) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.holds[at.ID], a.err
}

func newRegistries(t *testing.T, n int) ([]*Registry, *attempts) {
	t.Helper()
	dir := t.TempDir()
	db := &attempts{holds: map[int64]bool{}}
	var out []*Registry
	for i := range n {
		r, err := New(Options{Dir: dir, Command: fmt.Sprintf("svclab test%d", i), StateDir: fmt.Sprintf("/state/%d", i), AttemptHolds: db.check})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out, db
}

func inUse(t *testing.T, err error, want ...string) *InUseError {
	t.Helper()
	var e *InUseError
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want an InUseError", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not say %q", err, w)
		}
	}
	return e
}

func TestProcessClaims(t *testing.T) {
	ctx := context.Background()
	rs, _ := newRegistries(t, 2)
	a, b := rs[0], rs[1]
	l, err := a.Acquire(ctx, Claim{Backend: "embedded", Cluster: "lab"}, false)
	if err != nil {
		t.Fatal(err)
	}
	// The other registry stands for another process: the lock file is held
	// by another open file.
	_, err = b.Acquire(ctx, Claim{Backend: "embedded", Cluster: "lab"}, false)
	inUse(t, err, "cluster lab is in use by svclab test0", fmt.Sprintf("pid %d", os.Getpid()), "state directory /state/0")
	if err := b.Busy(ctx, "embedded", "lab"); err == nil {
		t.Error("Busy: nil for another process's cluster")
	}
	if err := a.Busy(ctx, "embedded", "lab"); err != nil {
		t.Errorf("Busy for the holder itself: %v", err)
	}
	// Another backend's cluster of that name, and another name, are free.
	for _, c := range []Claim{{Backend: "kind", Cluster: "lab"}, {Backend: "embedded", Cluster: "lab2"}} {
		l2, err := b.Acquire(ctx, c, false)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		l2.Release()
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l, err = b.Acquire(ctx, Claim{Backend: "embedded", Cluster: "lab"}, false)
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	l.Release()
	assertEmpty(t, a.Dir())
}

// A process that dies holds nothing: its claim goes stale and the next
// process takes the cluster without --force.
func TestCrashedHolder(t *testing.T) {
	if os.Getenv("OWNER_TEST_HOLD") != "" {
		r, err := New(Options{Dir: os.Getenv("OWNER_TEST_HOLD"), Command: "svclab exercise run"})
		if err != nil {
			os.Exit(2)
		}
		if _, err := r.Acquire(context.Background(), Claim{Backend: "embedded", Cluster: "lab"}, false); err != nil {
			os.Exit(3)
		}
		fmt.Println("held")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	ctx := context.Background()
	rs, _ := newRegistries(t, 1)
	r := rs[0]
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashedHolder$")
	cmd.Env = append(os.Environ(), "OWNER_TEST_HOLD="+r.Dir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	buf := make([]byte, 4)
	if _, err := out.Read(buf); err != nil || string(buf) != "held" {
		t.Fatalf("the holder did not start: %q %v", buf, err)
	}
	_, err = r.Acquire(ctx, Claim{Backend: "embedded", Cluster: "lab"}, false)
	inUse(t, err, "svclab exercise run", fmt.Sprintf("pid %d", cmd.Process.Pid))
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if c, err := r.Holder(ctx, "embedded", "lab"); c != nil || err != nil {
		t.Fatalf("after the holder was killed: %+v, %v", c, err)
	}
	l, err := r.Acquire(ctx, Claim{Backend: "embedded", Cluster: "lab"}, false)
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	l.Release()
	assertEmpty(t, r.Dir())
}

func TestAttemptClaims(t *testing.T) {
	ctx := context.Background()
	rs, db := newRegistries(t, 2)
	a, b := rs[0], rs[1]
	at := Attempt{ID: 5, Store: "/state/0/svclab.db", Scenario: "selector-typo", Learner: "local"}
	l, err := a.Acquire(ctx, Claim{Backend: "embedded", Cluster: "lab"}, false)
	if err != nil {
		t.Fatal(err)
	}
	db.set(5, true)
	if err := l.Bind(ctx, at); err != nil {
		t.Fatal(err)
	}
	// "svclab scenario start" ends; its attempt holds the cluster.
	l.Close()
	_, err = b.Acquire(ctx, Claim{Backend: "embedded", Cluster: "lab"}, false)
	inUse(t, err, "scenario selector-typo (attempt 5 of learner local), started by svclab test0")
	if err := a.Check(ctx, "embedded", "lab", at); err != nil {
		t.Errorf("Check of the holder: %v", err)
	}
	// The same attempt claims its cluster again (a reset, a resumed lab).
	l, err = b.Acquire(ctx, Claim{Backend: "embedded", Cluster: "lab", Attempt: &at}, false)
	if err != nil {
		t.Fatalf("the holding attempt itself: %v", err)
	}
	l.Close()
	// The attempt ends: the cluster is free, and the stale claim goes.
	db.set(5, false)
	list, err := b.List(ctx)
	if err != nil || len(list) != 0 {
		t.Fatalf("List after the attempt ended: %+v, %v", list, err)
	}
	assertEmpty(t, a.Dir())

	// A database svclab cannot ask is taken to hold the cluster.
	db.set(6, true)
	at6 := Attempt{ID: 6, Store: "/state/0/svclab.db", Scenario: "scale-to-zero"}
	l, _ = a.Acquire(ctx, Claim{Backend: "embedded", Cluster: "lab", Attempt: &at6}, false)
	l.Close()
	db.err = errors.New("database is locked")
	_, err = b.Acquire(ctx, Claim{Backend: "embedded", Cluster: "lab"}, false)
	if e := inUse(t, err, "could not tell whether it still is: database is locked"); e.Unverified == nil {
		t.Error("Unverified is not set")
	}
	db.err = nil
	if err := a.ReleaseAttempt(ctx, "embedded", "lab", Attempt{ID: 7, Store: at6.Store}); err != nil {
		t.Fatal(err)
	}
	if c, _ := b.Holder(ctx, "embedded", "lab"); c == nil || c.Attempt.ID != 6 {
		t.Fatalf("another attempt's release removed the claim: %+v", c)
	}
	if err := a.ReleaseAttempt(ctx, "embedded", "lab", at6); err != nil {
		t.Fatal(err)
	}
	if c, _ := b.Holder(ctx, "embedded", "lab"); c != nil {
		t.Fatalf("claim after its release: %+v", c)
	}
}

// --force takes a cluster over; the one it was taken from learns it.
func TestTakeOver(t *testing.T) {
	ctx := context.Background()
	rs, db := newRegistries(t, 2)
	a, b := rs[0], rs[1]
	at := Attempt{ID: 1, Store: "/a.db", Scenario: "selector-typo"}
	db.set(1, true)
	l, _ := a.Acquire(ctx, Claim{Backend: "embedded", Cluster: "lab", Attempt: &at}, false)
	l.Close()
	pending, err := a.Acquire(ctx, Claim{Backend: "embedded", Cluster: "lab2"}, false)
	if err != nil {
		t.Fatal(err)
	}
	taker, err := b.Acquire(ctx, Claim{Backend: "embedded", Cluster: "lab", Command: "svclab exercise run"}, true)
	if err != nil {
		t.Fatalf("forced: %v", err)
	}
	e := inUse(t, a.Check(ctx, "embedded", "lab", at), "cluster lab was taken over by svclab exercise run")
	if !e.TakenOver {
		t.Error("TakenOver is not set")
	}
	// A lease taken over before its attempt existed cannot bind.
	if _, err := b.Acquire(ctx, Claim{Backend: "embedded", Cluster: "lab2"}, true); err != nil {
		t.Fatal(err)
	}
	inUse(t, pending.Bind(ctx, Attempt{ID: 2, Store: "/a.db"}), "was taken over")
	// Its release leaves the new holder's claim.
	pending.Release()
	if c, _ := a.Holder(ctx, "embedded", "lab2"); c == nil || c.Command != "svclab test1" {
		t.Fatalf("the taker's claim after the old lease's release: %+v", c)
	}
	taker.Release()
	// A claim that vanished (the directory emptied at boot) is made again
	// by the attempt that holds the cluster.
	if err := a.Check(ctx, "embedded", "lab", at); err != nil {
		t.Fatalf("Check on a vanished claim: %v", err)
	}
	if c, _ := b.Holder(ctx, "embedded", "lab"); c == nil || !c.Attempt.same(&at) {
		t.Fatalf("the claim made again: %+v", c)
	}
}

func TestDamagedClaims(t *testing.T) {
	ctx := context.Background()
	rs, _ := newRegistries(t, 1)
	r := rs[0]
	for _, bad := range []string{"", "{", `{"backend":"embedded","cluster":"other","id":"x"}`, `{"backend":"embedded","cluster":"lab"}`, "\x00\x01"} {
		os.MkdirAll(filepath.Join(r.Dir(), "embedded"), 0o700)
		if err := os.WriteFile(filepath.Join(r.Dir(), "embedded", "lab.json"), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := r.Acquire(ctx, Claim{Backend: "embedded", Cluster: "lab"}, false)
		if err != nil {
			t.Fatalf("claim %q: %v", bad, err)
		}
		l.Release()
	}
	for _, key := range [][2]string{{"embedded", "../x"}, {"", "lab"}, {"embedded", ""}, {"a/b", "lab"}, {"embedded", "lab.json"}} {
		if _, err := r.Acquire(ctx, Claim{Backend: key[0], Cluster: key[1]}, false); err == nil {
			t.Errorf("Acquire(%q): no error", key)
		}
	}
}

// Many processes claim one cluster at once: exactly one wins.
func TestConcurrentAcquire(t *testing.T) {
	ctx := context.Background()
	rs, _ := newRegistries(t, 8)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		won  []*Lease
		lost int
	)
	for _, r := range rs {
		wg.Go(func() {
			l, err := r.Acquire(ctx, Claim{Backend: "embedded", Cluster: "lab"}, false)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				won = append(won, l)
			} else if IsInUse(err) {
				lost++
			} else {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(won) != 1 || lost != len(rs)-1 {
		t.Fatalf("%d won, %d lost", len(won), lost)
	}
	won[0].Release()
}

// assertEmpty checks that no claim or lock file is left.
func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() != ".lock" {
			t.Errorf("left behind: %s", path)
		}
		return nil
	})
}

// The default AttemptHolds asks the attempt's database, which another
// process made: here a real SQLite file.
func TestAttemptInADatabase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), store.FileName), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.EnsureLearner(ctx, store.LocalLearner, "")
	rec, err := st.CreateAttempt(ctx, store.NewAttempt{Learner: store.LocalLearner, ScenarioID: "selector-typo", Cluster: "lab", Backend: "embedded"})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := New(Options{Dir: dir, Command: "svclab scenario start"})
	b, _ := New(Options{Dir: dir, Command: "svclab exercise run"})
	l, err := a.Acquire(ctx, Claim{Backend: "embedded", Cluster: "lab"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Bind(ctx, Attempt{ID: rec.ID, Store: st.Location(), Scenario: rec.ScenarioID, Learner: rec.Learner}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := b.Acquire(ctx, Claim{Backend: "embedded", Cluster: "lab"}, false); !IsInUse(err) {
		t.Fatalf("while the attempt runs: %v", err)
	}
	if err := st.SetState(ctx, rec.ID, store.Abandoned, ""); err != nil {
		t.Fatal(err)
	}
	l, err = b.Acquire(ctx, Claim{Backend: "embedded", Cluster: "lab"}, false)
	if err != nil {
		t.Fatalf("after the attempt was abandoned: %v", err)
	}
	l.Release()
}
