package class

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/class/labs"
	"github.com/svclab/svclab/lab/cluster/clustertest"

	"github.com/svclab/svclab/internal/pgtest"
)

func TestHub(t *testing.T) { pgtest.ForEachBackend(t, DBFileName, testHub) }

func testHub(t *testing.T, be pgtest.Backend) {
	ctx := context.Background()
	clk := newClock()
	db := openTestDB(t, be, clk.Now)
	a := newClass(t, db, Spec{Name: "a", Scenarios: []string{"selector-typo"}, PoolSize: 0})
	b := newClass(t, db, Spec{Name: "b", Scenarios: []string{"selector-typo"}, PoolSize: 0})
	old := newClass(t, db, Spec{Name: "old", Scenarios: []string{"selector-typo"}})
	db.CloseClass(ctx, old.Class.ID)
	p := clustertest.NewProvider()
	h := NewHub(Options{DB: db, Provider: p, Catalog: catalog(t), Now: clk.Now,
		Labs: labs.Config{Memory: func() (uint64, error) { return 64 << 30, nil }, TickInterval: time.Hour}})
	if err := h.OpenAll(ctx); err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown(ctx)
	if got := h.Classrooms(); len(got) != 2 || got[0].Class.Name != "a" || got[1].Class.Name != "b" {
		t.Fatalf("served %v", got)
	}
	cr, j, err := h.Join(ctx, b.Class.JoinCode, "Ann")
	if err != nil || cr.Class.ID != b.Class.ID || j.Learner.ClassID != b.Class.ID {
		t.Fatalf("join b: %v, %+v, %v", cr, j, err)
	}
	if s, _ := cr.Board.Snapshot(ctx); len(s.Rows) != 1 {
		t.Errorf("b's board %+v", s)
	}
	// A class that is not served takes nobody in.
	c := newClass(t, db, Spec{Name: "c", Scenarios: []string{"selector-typo"}})
	if _, _, err := h.Join(ctx, c.Class.JoinCode, "Bob"); err == nil || !strings.Contains(err.Error(), "not running on this server") {
		t.Errorf("join c: %v", err)
	}
	if ls, _ := db.Learners(ctx, c.Class.ID); len(ls) != 0 {
		t.Errorf("c has learners %v", ls)
	}
	// A classroom takes only its own code.
	ra, _ := h.Classroom(a.Class.ID)
	if _, err := ra.Join(ctx, b.Class.JoinCode, "Cid"); !errors.Is(err, ErrBadCode) {
		t.Errorf("a with b's code: %v", err)
	}
	if ls, _ := db.Learners(ctx, b.Class.ID); len(ls) != 1 {
		t.Errorf("b has learners %v", ls)
	}
	if _, err := h.Classroom("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown class: %v", err)
	}
	// "svclab class close" in another process ends the served class's labs.
	if _, err := ra.Labs.Request("someone"); err != nil {
		t.Fatal(err)
	}
	if err := db.CloseClass(ctx, a.Class.ID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := ra.Labs.Request("someone-else"); errors.Is(err, labs.ErrClosed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the class closed elsewhere still hands out labs")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := h.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if left := p.Names(); len(left) != 0 {
		t.Errorf("clusters left after shutdown: %v", left)
	}
}
