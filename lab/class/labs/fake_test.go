package labs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svclab/svclab/lab/class/stream"
	"github.com/svclab/svclab/lab/cluster"
)

// fakeProvider is a hand-written cluster.Provider: clusters are names in a
// map. When gate is set, Create waits for a value on it (or for its
// context, and then fails as the real backends roll back).
type fakeProvider struct {
	mu       sync.Mutex
	clusters map[string]cluster.CreateOptions
	gate     chan struct{}
	failNext error
	created  []string
	deleted  []string
}

func newFakeProvider(existing ...string) *fakeProvider {
	p := &fakeProvider{clusters: map[string]cluster.CreateOptions{}}
	for _, n := range existing {
		p.clusters[n] = cluster.CreateOptions{Name: n}
	}
	return p
}

type fakeCluster struct{ name string }

func (c fakeCluster) Name() string                          { return c.name }
func (c fakeCluster) Kubeconfig() ([]byte, error)           { return nil, errors.New("fake") }
func (c fakeCluster) RESTConfig() (*rest.Config, error)     { return nil, errors.New("fake") }
func (c fakeCluster) Client() (kubernetes.Interface, error) { return nil, errors.New("fake") }
func (c fakeCluster) Nodes(context.Context) ([]cluster.Node, error) {
	return nil, errors.New("fake")
}
func (c fakeCluster) NodeExec(context.Context, string, []string, cluster.Stdio) error {
	return errors.New("fake")
}

func (p *fakeProvider) Create(ctx context.Context, o cluster.CreateOptions) (cluster.Cluster, error) {
	if err := cluster.ValidateName(o.Name); err != nil {
		return nil, err
	}
	p.mu.Lock()
	gate, fail := p.gate, p.failNext
	p.failNext = nil
	if _, ok := p.clusters[o.Name]; ok {
		p.mu.Unlock()
		return nil, cluster.ErrExists
	}
	p.clusters[o.Name] = o
	p.created = append(p.created, o.Name)
	p.mu.Unlock()
	pr := cluster.OrNop(o.Progress)
	done := pr.Start("Starting etcd")
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			fail = ctx.Err()
		}
	}
	done(fail)
	if fail != nil {
		p.mu.Lock()
		delete(p.clusters, o.Name) // rolled back
		p.mu.Unlock()
		return nil, fail
	}
	return fakeCluster{o.Name}, nil
}

func (p *fakeProvider) setGate() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gate = make(chan struct{})
	return p.gate
}

func (p *fakeProvider) failWith(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failNext = err
}

func (p *fakeProvider) Get(_ context.Context, name string) (cluster.Cluster, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.clusters[name]; !ok {
		return nil, cluster.ErrNotFound
	}
	return fakeCluster{name}, nil
}

func (p *fakeProvider) List(context.Context) ([]cluster.Summary, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []cluster.Summary
	for n := range p.clusters {
		out = append(out, cluster.Summary{Name: n, Backend: "fake", State: "running"})
	}
	return out, nil
}

func (p *fakeProvider) Delete(_ context.Context, name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.clusters[name]; !ok {
		return fmt.Errorf("no cluster %s: %w", name, cluster.ErrNotFound)
	}
	delete(p.clusters, name)
	p.deleted = append(p.deleted, name)
	return nil
}

func (p *fakeProvider) DeleteAll(context.Context) error {
	return errors.New("a class must never delete every cluster")
}

func (p *fakeProvider) names() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for n := range p.clusters {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (p *fakeProvider) options(name string) cluster.CreateOptions {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.clusters[name]
}

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
	p      *fakeProvider
	ledger *fakeLedger
	clock  *fakeClock
	mem    *fakeMemory
	m      *Manager
	all    *stream.Subscription[Event]
}

func newRig(t *testing.T, cfg Config, existing ...string) *rig {
	t.Helper()
	r := &rig{t: t, p: newFakeProvider(existing...), ledger: newFakeLedger(), clock: &fakeClock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}, mem: &fakeMemory{avail: 16 << 30}}
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
