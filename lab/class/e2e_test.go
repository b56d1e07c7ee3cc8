//go:build linux

package class

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/internal/pgtest"
	"github.com/svclab/svclab/lab/class/labs"
	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded"
	"github.com/svclab/svclab/lab/kubebin"
	"github.com/svclab/svclab/lab/roles"
)

// TestMain lets this test binary act as the cluster supervisor and node
// agents it re-executes itself as (lab/roles); without it, every
// "supervisor" would run the tests again.
func TestMain(m *testing.M) {
	roles.Dispatch()
	os.Exit(pgtest.Main(m))
}

// offsetClock is the real time plus an offset the test moves forward, so
// that an idle timeout of minutes passes at once while everything else
// runs in real time.
type offsetClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *offsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *offsetClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// A class of capacity 1 with a warm pool of 1 on real embedded clusters:
// the first learner's lab starts at once from the pool, the second learner
// queues at position 1, the first lab is reclaimed when it has been idle
// for the idle timeout, the second learner gets a lab, a restart after a
// crash sweeps the clusters no live lab references, and closing the class
// leaves nothing behind.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	if err := embedded.Preflight(); err != nil {
		t.Skipf("end-to-end test: %v", err)
	}
	ctx := context.Background()
	if _, err := kubebin.Locate(ctx, nil); err != nil {
		t.Skipf("end-to-end test: %v", err)
	}
	stateDir := t.TempDir()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	provider := embedded.New(stateDir, log)
	clk := &offsetClock{}
	db, err := OpenDB(ctx, filepath.Join(stateDir, DBFileName), clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	spec := Spec{Name: "e2e", Scenarios: []string{"selector-typo"}, Capacity: 1, PoolSize: 1, IdleTimeout: 10 * time.Minute, TimeLimit: time.Hour}
	if _, err := spec.Normalize(Catalog(log)); err != nil {
		t.Fatal(err)
	}
	created, err := db.CreateClass(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	prefix := created.Class.ClusterPrefix() + "-"
	ours := func() []string {
		list, err := provider.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range list {
			if strings.HasPrefix(s.Name, prefix) {
				names = append(names, s.Name)
			}
		}
		return names
	}
	closed := false
	t.Cleanup(func() {
		if closed {
			return
		}
		// A failed test still deletes what the class made.
		if _, err := CloseClass(context.Background(), db, created.Class, provider, log); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})

	cr, err := OpenClassroom(ctx, created.Class.ID, Options{
		DB: db, Provider: provider, Catalog: Catalog(log), Now: clk.Now, Log: log,
		Labs: labs.Config{TickInterval: 100 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	events := cr.Labs.Subscribe("", 256)
	waitFor := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		start := time.Now()
		for !cond() {
			if time.Since(start) > timeout {
				t.Fatalf("%s: not after %s (labs %+v, stats %+v)", what, timeout, cr.Labs.Labs(), cr.Labs.Stats())
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("%s after %s", what, time.Since(start).Round(100*time.Millisecond))
	}
	waitFor("the warm pool has a cluster", 10*time.Minute, func() bool { return cr.Labs.Stats().Warm == 1 })
	if pool := ours(); len(pool) == 1 {
		if c, err := provider.Get(ctx, pool[0]); err == nil {
			m := c.(*embedded.Cluster).Memory()
			t.Logf("the warm cluster's %d processes take %d MiB (PSS; admission control's estimate per lab: %d MiB)", m.Processes, m.PSS/labs.MiB, labs.DefaultLabMemory/labs.MiB)
		}
	}

	var ps []Principal
	for _, name := range []string{"Ann", "Bob"} {
		j, err := cr.Join(ctx, created.Class.JoinCode, name)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := cr.Authenticate(ctx, j.Token)
		ps = append(ps, p)
	}
	ann, bob := ps[0], ps[1]

	annLab, err := cr.StartLab(ann)
	if err != nil || annLab.State != labs.Ready {
		t.Fatalf("ann's lab from the warm pool: %+v, %v", annLab, err)
	}
	c, err := cr.Cluster(ann, ann.LearnerID, Write)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 3 {
		t.Fatalf("ann's cluster's nodes: %v, %v", nodes, err)
	}
	if _, err := cr.Cluster(bob, ann.LearnerID, Read); !errors.Is(err, ErrForbidden) {
		t.Errorf("bob reaching ann's cluster: %v", err)
	}

	lab, err := cr.StartLab(bob)
	if err != nil || lab.State != labs.Queued || lab.Position != 1 {
		t.Fatalf("bob: %+v, %v", lab, err)
	}

	// Ann leaves her lab alone past the idle timeout.
	clk.Advance(11 * time.Minute)
	waitFor("ann's lab is reclaimed", time.Minute, func() bool {
		l, _ := cr.Labs.Lab(ann.LearnerID)
		return l.State == labs.Ended && l.Reason == labs.ReasonIdle
	})
	waitFor("bob's lab is ready", 10*time.Minute, func() bool {
		l, _ := cr.Labs.Lab(bob.LearnerID)
		if l.State == labs.Failed {
			t.Fatalf("bob's lab failed: %s", l.Reason)
		}
		return l.State == labs.Ready
	})
	waitFor("ann's cluster is deleted", 2*time.Minute, func() bool {
		_, err := provider.Get(ctx, annLab.Cluster)
		return errors.Is(err, cluster.ErrNotFound) && len(ours()) == 1
	})
	var kinds []string
	for len(events.C) > 0 {
		e := <-events.C
		if e.Learner != "" {
			kinds = append(kinds, string(e.Kind)+" "+e.Lab.Learner[:4])
		}
	}
	t.Logf("events: %v", kinds)
	bobLab, _ := cr.Labs.Lab(bob.LearnerID)
	if bobLab.Cluster == "" || !strings.HasPrefix(bobLab.Cluster, prefix) || bobLab.Cluster == annLab.Cluster {
		t.Errorf("bob's lab %+v", bobLab)
	}

	// svclab crashed (this classroom is simply abandoned) and starts
	// again: the new classroom sweeps the clusters no lab of its own
	// references — bob's. Its pool stays empty (no memory, it is told).
	cr2, err := OpenClassroom(ctx, created.Class.ID, Options{
		DB: db, Provider: provider, Catalog: Catalog(log), Now: clk.Now, Log: log,
		Labs: labs.Config{TickInterval: time.Hour, Memory: func() (uint64, error) { return 0, nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	if left := ours(); len(left) != 0 {
		t.Errorf("clusters left after the restart's sweep: %v", left)
	}
	if err := cr2.Shutdown(ctx); err != nil {
		t.Error(err)
	}

	if err := cr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	closed = true
	if left := ours(); len(left) != 0 {
		t.Errorf("clusters left after close: %v", left)
	}
	if owned, _ := db.Ledger(created.Class.ID).Owned(ctx); len(owned) != 0 {
		t.Errorf("the ledger keeps %v", owned)
	}
	if entries, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "svclab-"+prefix) {
				t.Errorf("network namespace %s left", e.Name())
			}
		}
	}
	if _, err := provider.Get(ctx, bobLab.Cluster); !errors.Is(err, cluster.ErrNotFound) {
		t.Errorf("bob's cluster after close: %v", err)
	}
	if _, _, err := db.Join(ctx, created.Class.JoinCode, "Cid"); !errors.Is(err, ErrClassClosed) {
		t.Errorf("join after close: %v", err)
	}
}
