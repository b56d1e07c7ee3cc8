package labs

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/class/stream"
	"github.com/svclab/svclab/lab/cluster/clustertest"
)

// fakeLedger keeps the owned names in memory.
type fakeLedger struct {
	mu    sync.Mutex
	names map[string]bool
}

func newFakeLedger(names ...string) *fakeLedger {
	l := &fakeLedger{names: map[string]bool{}}
	for _, n := range names {
		l.names[n] = true
	}
	return l
}

func (l *fakeLedger) Record(_ context.Context, name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.names[name] = true
	return nil
}

func (l *fakeLedger) Forget(_ context.Context, name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.names, name)
	return nil
}

func (l *fakeLedger) Owned(context.Context) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for n := range l.names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// fakeMemory is the machine's free memory.
type fakeMemory struct {
	mu    sync.Mutex
	avail uint64
}

func (m *fakeMemory) read() (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.avail, nil
}

func (m *fakeMemory) set(v uint64) {
	m.mu.Lock()
	m.avail = v
	m.mu.Unlock()
}

type rig struct {
	t      *testing.T
	p      *clustertest.Provider
	ledger *fakeLedger
	clock  *fakeClock
	mem    *fakeMemory
	m      *Manager
	all    *stream.Subscription[Event]
}

func newRig(t *testing.T, cfg Config, existing ...string) *rig {
	t.Helper()
	r := &rig{t: t, p: clustertest.NewProvider(existing...), ledger: newFakeLedger(), clock: &fakeClock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}, mem: &fakeMemory{avail: 16 << 30}}
	cfg.Provider, cfg.Ledger, cfg.Now, cfg.Memory = r.p, r.ledger, r.clock.Now, r.mem.read
	if cfg.Prefix == "" {
		cfg.Prefix = "cls1"
	}
	if cfg.TickInterval == 0 {
		cfg.TickInterval = time.Hour // tests tick by hand
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.m = m
	r.all = m.Subscribe("", 1000)
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return r
}

func (r *rig) start() {
	r.t.Helper()
	if err := r.m.Start(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	r.m.settle()
}

// events drains the events published so far, as "kind learner" strings.
func (r *rig) events() []string {
	var out []string
	for {
		select {
		case e := <-r.all.C:
			s := string(e.Kind)
			if e.Learner != "" {
				s += " " + e.Learner
			}
			if e.Kind == EventQueued || e.Kind == EventPosition {
				s += fmt.Sprintf(" #%d", e.Lab.Position)
			}
			out = append(out, s)
		default:
			return out
		}
	}
}

func (r *rig) wantEvents(want ...string) {
	r.t.Helper()
	got := r.events()
	if !slices.Equal(got, want) {
		r.t.Errorf("events:\n got %q\nwant %q", got, want)
	}
}

func (r *rig) state(learner string) State {
	l, _ := r.m.Lab(learner)
	return l.State
}
