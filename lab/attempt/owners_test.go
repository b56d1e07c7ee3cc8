package attempt

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/cluster/owner"
	"github.com/svclab/svclab/lab/store"
)

// Two svclab processes of two state directories (two databases) share a
// machine and its clusters: an attempt's cluster is refused to the other
// until it ends, --force takes it over, and the one it was taken from
// stops without touching the taker's scenario.
func TestClustersAreOwned(t *testing.T) {
	ctx := context.Background()
	claims := t.TempDir()
	a := newTestEnv(t)
	b := &testEnv{t: t, path: filepath.Join(t.TempDir(), store.FileName), provider: a.provider, w: a.w, catalog: a.catalog}
	manager := func(e *testEnv, command string, takeOver bool) *Manager {
		t.Helper()
		st, err := store.Open(ctx, e.path, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		r, err := owner.New(owner.Options{Dir: claims, Command: command, StateDir: filepath.Dir(e.path)})
		if err != nil {
			t.Fatal(err)
		}
		o := e.options(st)
		o.Owners, o.TakeOver = r, takeOver
		m, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	want := func(err error, parts ...string) {
		t.Helper()
		if err == nil {
			t.Fatalf("no error, want %q", parts)
		}
		for _, p := range parts {
			if !strings.Contains(err.Error(), p) {
				t.Errorf("%q does not say %q", err, p)
			}
		}
	}
	serve := manager(a, "svclab serve", false)
	first, err := serve.Start(ctx, "", "selector-typo", "lab", nil)
	if err != nil {
		t.Fatal(err)
	}
	other := manager(b, "svclab scenario start", false)
	_, err = other.Start(ctx, "", "targetport-mismatch", "lab", nil)
	want(err, "cluster lab is in use by scenario selector-typo (attempt 1 of learner local), started by svclab serve",
		"state directory "+filepath.Dir(a.path), "wait until it is done, or use another cluster")
	// An exercise run, which holds clusters while it runs, is refused too.
	run, _ := owner.New(owner.Options{Dir: claims, Command: "svclab exercise run"})
	if _, err := run.Acquire(ctx, owner.Claim{Backend: "embedded", Cluster: "lab"}, false); !owner.IsInUse(err) {
		t.Fatalf("an exercise run on the attempt's cluster: %v", err)
	}
	// The attempt is resumed by a later process of its state directory:
	// still its cluster.
	if _, err := manager(a, "svclab scenario check", false).Check(ctx, first.ID); err != nil {
		t.Fatalf("check from a later process: %v", err)
	}

	// --force.
	taker := manager(b, "svclab scenario start", true)
	second, err := taker.Start(ctx, "", "targetport-mismatch", "lab", nil)
	if err != nil {
		t.Fatalf("--force: %v", err)
	}
	_, err = serve.Check(ctx, first.ID)
	want(err, "cluster lab was taken over by scenario targetport-mismatch (attempt 1 of learner local), started by svclab scenario start", "what you did there is gone")
	if got, _ := serve.Attempt(ctx, first.ID); got.State != StateErrored || !strings.Contains(got.Error, "taken over") {
		t.Errorf("the attempt taken over: %+v", got)
	}
	// Ending it leaves the taker's scenario alone.
	if err := serve.Abandon(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(a.w.Events(), "teardown selector-typo on lab") {
		t.Errorf("abandoning the attempt taken over tore its scenario down from the taker's cluster: %q", a.w.Events())
	}
	_, err = serve.Start(ctx, "", "selector-typo", "lab", nil)
	want(err, "cluster lab is in use by scenario targetport-mismatch")

	// A solved attempt frees its cluster.
	if err := taker.Solve(ctx, second.ID, &strings.Builder{}); err != nil {
		t.Fatal(err)
	}
	if rep, err := taker.Check(ctx, second.ID); err != nil || !rep.Passed {
		t.Fatalf("check after solving: %+v, %v", rep, err)
	}
	third, err := serve.Start(ctx, "", "selector-typo", "lab", nil)
	if err != nil {
		t.Fatalf("after the other attempt passed: %v", err)
	}
	// An abandoned one too; and a reset keeps the cluster its attempt's.
	third, err = serve.Reset(ctx, third.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.Start(ctx, "", "targetport-mismatch", "lab", nil)
	want(err, "cluster lab is in use by scenario selector-typo (attempt 3")
	if err := serve.Abandon(ctx, third.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Start(ctx, "", "targetport-mismatch", "lab", nil); err != nil {
		t.Fatalf("after the attempt was abandoned: %v", err)
	}
}
