package attempt

import (
	"context"
	"strings"
	"sync"
	"testing"
)

// Several processes (managers on one database) starting on one cluster at
// once: exactly one wins, the others are told the cluster is busy.
func TestConcurrentStarts(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t, "lab")
	ids := []string{"selector-typo", "targetport-mismatch", "selector-typo", "targetport-mismatch", "selector-typo", "targetport-mismatch"}
	managers := make([]*Manager, len(ids))
	for i := range managers {
		managers[i], _ = e.manager()
	}
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = managers[i].Start(ctx, "learner-"+string(rune('a'+i)), id, "lab", nil)
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !strings.Contains(err.Error(), "cluster lab is busy with scenario"):
			t.Errorf("a losing start: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d starts won: %v", won, errs)
	}
}

// One attempt checked, evaluated and hinted from many goroutines (the web
// UI's requests): every check run and hint is recorded once.
func TestConcurrentOperations(t *testing.T) {
	ctx := context.Background()
	e := newTestEnv(t)
	m, st := e.manager()
	a, err := m.Start(ctx, "", "selector-typo", "lab", nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	hints := make(chan int, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch i % 4 {
			case 0:
				if _, err := m.Check(ctx, a.ID); err != nil {
					t.Error(err)
				}
			case 1:
				if _, err := m.Evaluate(ctx, a.ID); err != nil {
					t.Error(err)
				}
			case 2:
				if i, _, err := m.Hint(ctx, a.ID); err == nil {
					hints <- i
				}
			case 3:
				if _, err := m.Progress(ctx, ""); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	close(hints)
	seen := map[int]bool{}
	for h := range hints {
		if seen[h] {
			t.Errorf("hint %d given twice", h)
		}
		seen[h] = true
	}
	runs, _ := st.CheckRuns(ctx, a.ID)
	if len(runs) != 6 {
		t.Errorf("%d check runs, want 6", len(runs))
	}
}
