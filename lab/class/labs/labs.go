package labs

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/class/stream"
	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/scenario"
)

// Shape is the cluster every lab of a class gets: one that fits all the
// class's scenarios.
type Shape struct {
	// Workers is the number of worker nodes (the control plane is extra).
	Workers int
	// NodeLabels are extra labels per short node name ("worker").
	NodeLabels map[string]map[string]string
	// ProxyMode is kube-proxy's mode ("" is nftables).
	ProxyMode string
}

func (s Shape) options(name string, p cluster.Progress) cluster.CreateOptions {
	var labels map[string]map[string]string
	if len(s.NodeLabels) > 0 {
		labels = map[string]map[string]string{}
		for short, l := range s.NodeLabels {
			labels[scenario.NodeName(name, short)] = l
		}
	}
	return cluster.CreateOptions{Name: name, Workers: s.Workers, NodeLabels: labels, ProxyMode: s.ProxyMode, Progress: p}
}

// Ledger remembers the clusters a Manager owns, so that they can be
// deleted after a crash. The class store implements it in SQLite.
type Ledger interface {
	// Record notes that cluster name is about to be created.
	Record(ctx context.Context, name string) error
	// Forget notes that cluster name is gone.
	Forget(ctx context.Context, name string) error
	// Owned lists the clusters recorded and not forgotten.
	Owned(ctx context.Context) ([]string, error)
}

// Config configures a Manager.
type Config struct {
	Provider cluster.Provider
	Ledger   Ledger
	Shape    Shape
	// Prefix starts the name of every cluster the manager creates
	// (PREFIX-xxxx); at most MaxPrefixLength characters. Clusters with the
	// prefix that no live lab references are swept.
	Prefix string
	// Capacity is the most labs that exist at once (at least 1).
	Capacity int
	// PoolSize is how many ready clusters are kept waiting for learners
	// (never more than the free capacity).
	PoolSize int
	// TimeLimit ends a lab this long after it became ready (0: never).
	TimeLimit time.Duration
	// IdleTimeout ends a lab that has seen no activity (Touch) for this
	// long (0: never).
	IdleTimeout time.Duration
	// Warnings are how long before a reclaim the learner is warned
	// (default 5m and 1m).
	Warnings []time.Duration
	// Memory reads the available memory in bytes (default: MemAvailable
	// from /proc/meminfo).
	Memory func() (uint64, error)
	// LabMemory is one lab's estimated memory (default DefaultLabMemory);
	// ReserveMemory is kept free (default DefaultReserveMemory).
	LabMemory, ReserveMemory uint64
	// Starts bounds the clusters created at once, shared by every class a
	// server runs (nil: a limit of DefaultMaxStarting for this manager
	// alone).
	Starts *StartLimit
	// TickInterval is how often the background loop checks deadlines and
	// the pool (default 1s).
	TickInterval time.Duration
	// SweepRetry is how long a failed sweep of leftover clusters waits
	// before it is tried again (a minute by default).
	SweepRetry time.Duration
	// RetryAfter is how long the pool waits after a failed creation before
	// it tries again (default 30s).
	RetryAfter time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	Log *slog.Logger
}

// MaxPrefixLength bounds Config.Prefix so that cluster names stay within
// cluster.MaxNameLength.
const MaxPrefixLength = cluster.MaxNameLength - 5

// State is where a learner's lab is.
type State string

const (
	// Queued: waiting for capacity (Lab.Position).
	Queued State = "queued"
	// Starting: its cluster is being created.
	Starting State = "starting"
	// Ready: the cluster is the learner's.
	Ready State = "ready"
	// Ended: reclaimed, released or closed (Lab.Reason).
	Ended State = "ended"
	// Failed: the cluster could not be created (Lab.Reason).
	Failed State = "failed"
)

// Reasons a lab ends.
const (
	ReasonIdle      = "idle"
	ReasonTimeLimit = "time limit"
	ReasonReleased  = "released"
	ReasonClosed    = "class closed"
)

// Lab is a snapshot of one learner's lab.
type Lab struct {
	Learner string `json:"learner"`
	State   State  `json:"state"`
	// Position is the 1-based place in the queue while Queued.
	Position int `json:"position,omitempty"`
	// Cluster is the cluster's name once one is assigned.
	Cluster    string    `json:"cluster,omitempty"`
	QueuedAt   time.Time `json:"queuedAt,omitzero"`
	ReadyAt    time.Time `json:"readyAt,omitzero"`
	ExpiresAt  time.Time `json:"expiresAt,omitzero"`
	LastActive time.Time `json:"lastActive,omitzero"`
	// Reason says why the lab ended or failed, or what a queued lab waits
	// for beyond capacity.
	Reason string `json:"reason,omitempty"`
}

// EventKind is what happened.
type EventKind string

const (
	EventQueued    EventKind = "queued"
	EventPosition  EventKind = "position"
	EventWaiting   EventKind = "waiting"
	EventStarting  EventKind = "starting"
	EventProgress  EventKind = "progress"
	EventReady     EventKind = "ready"
	EventWarning   EventKind = "warning"
	EventExtended  EventKind = "extended"
	EventReset     EventKind = "reset"
	EventEnded     EventKind = "ended"
	EventFailed    EventKind = "failed"
	EventPool      EventKind = "pool"
	EventPoolError EventKind = "pool-error"
)

// Event is one change, with a message for the learner (or, for pool
// events, whose Learner is "", for the instructor).
type Event struct {
	Kind    EventKind `json:"kind"`
	Learner string    `json:"learner,omitempty"`
	Lab     Lab       `json:"lab"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
	// In is the time left before the reclaim a warning is about.
	In time.Duration `json:"in,omitempty"`
}

// Errors of the Manager, matched with errors.Is.
var (
	ErrClosed = errors.New("the class is closed: its labs are gone")
	ErrNoLab  = errors.New("no lab")
)

// noLab says why there is no lab to act on; it matches ErrNoLab.
type noLab string

func (e noLab) Error() string        { return string(e) }
func (e noLab) Is(target error) bool { return target == ErrNoLab }

// Stats count the manager's clusters.
type Stats struct {
	Queued, Starting, Ready, Warm, Creating, Deleting int
}

type lab struct {
	Lab
	cluster cluster.Cluster
	// warned counts the warnings sent for the current idle and expiry
	// deadlines (indexes into Config.Warnings).
	warnedIdle, warnedExpiry int
	// keepExpiry is the deadline a reset lab keeps.
	keepExpiry time.Time
}

type warmCluster struct {
	name string
	c    cluster.Cluster
}

// Manager hands out labs. Its methods are safe for concurrent use.
type Manager struct {
	cfg    Config
	log    *slog.Logger
	events stream.Broker[Event]
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	idle      *sync.Cond // signalled when inflight drops to 0
	labs      map[string]*lab
	queue     []string
	warm      []warmCluster
	creating  map[string]string // cluster → learner ("" for the pool)
	deleting  map[string]bool
	inflight  int
	closed    bool
	poolRetry time.Time
	memErrLog bool
	loopDone  chan struct{}
}

// New returns a Manager; Start sweeps leftovers and starts it.
func New(cfg Config) (*Manager, error) {
	if cfg.Provider == nil || cfg.Ledger == nil {
		return nil, errors.New("labs: a Provider and a Ledger are required")
	}
	if cfg.Prefix == "" || len(cfg.Prefix) > MaxPrefixLength || cluster.ValidateName(cfg.Prefix) != nil {
		return nil, fmt.Errorf("labs: cluster prefix %q must be a DNS label of 1 to %d characters", cfg.Prefix, MaxPrefixLength)
	}
	if cfg.Capacity < 1 {
		return nil, fmt.Errorf("labs: capacity %d: a class needs room for at least one lab", cfg.Capacity)
	}
	if cfg.PoolSize < 0 {
		return nil, fmt.Errorf("labs: pool size %d is negative", cfg.PoolSize)
	}
	if cfg.Warnings == nil {
		cfg.Warnings = []time.Duration{5 * time.Minute, time.Minute}
	}
	cfg.Warnings = slices.Clone(cfg.Warnings)
	slices.SortFunc(cfg.Warnings, func(a, b time.Duration) int { return int(b - a) })
	if cfg.Memory == nil {
		cfg.Memory = ProcMeminfo("/proc/meminfo")
	}
	if cfg.LabMemory == 0 {
		cfg.LabMemory = DefaultLabMemory
	}
	if cfg.ReserveMemory == 0 {
		cfg.ReserveMemory = DefaultReserveMemory
	}
	if cfg.Starts == nil {
		cfg.Starts = NewStartLimit(0)
	}
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = time.Second
	}
	if cfg.SweepRetry <= 0 {
		cfg.SweepRetry = time.Minute
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{
		cfg:      cfg,
		log:      cfg.Log.With("labs", cfg.Prefix),
		labs:     map[string]*lab{},
		creating: map[string]string{},
		deleting: map[string]bool{},
	}
	m.idle = sync.NewCond(&m.mu)
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m, nil
}

// Start deletes the clusters the ledger (or the prefix) says are the
// manager's but no lab references — after a crash, all of them — then
// fills the warm pool and checks deadlines every TickInterval until Close.
func (m *Manager) Start(ctx context.Context) error {
	// What an earlier run left is swept; what cannot be swept now (a
	// cluster that does not delete, a provider that does not answer) is
	// reported and tried again in the background: never a reason not to
	// serve the class.
	if err := m.Sweep(ctx); err != nil {
		m.log.Error("the class's leftover clusters could not all be removed; trying again in the background", "err", err)
		go m.sweepLater()
	}
	m.mu.Lock()
	m.loopDone = make(chan struct{})
	m.schedule()
	m.mu.Unlock()
	go m.loop()
	return nil
}

// sweepLater sweeps again every Config.SweepRetry until a sweep succeeds
// or the manager closes.
func (m *Manager) sweepLater() {
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-time.After(m.cfg.SweepRetry):
		}
		err := m.Sweep(m.ctx)
		if err == nil {
			m.log.Info("the class's leftover clusters are gone")
			return
		}
		m.log.Warn("the class's leftover clusters could still not all be removed", "err", err)
	}
}

func (m *Manager) loop() {
	defer close(m.loopDone)
	t := time.NewTicker(m.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
			m.Tick(m.cfg.Now())
		}
	}
}

// Subscribe returns a stream of events: for one learner's lab (and
// nothing else) when learner is set, for everything when it is "".
func (m *Manager) Subscribe(learner string, buffer int) *stream.Subscription[Event] {
	var filter func(Event) bool
	if learner != "" {
		filter = func(e Event) bool { return e.Learner == learner }
	}
	return m.events.Subscribe(buffer, filter)
}

// Request gives learner a lab: at once from the warm pool, Starting while
// a cluster is created for them, or Queued when the class is at capacity.
// A learner who has a lab gets it back. When a cluster would have to be
// created and the machine is short of memory, Request refuses with a
// *MemoryError.
func (m *Manager) Request(learner string) (Lab, error) {
	if learner == "" {
		return Lab{}, errors.New("labs: no learner")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Lab{}, ErrClosed
	}
	if l := m.labs[learner]; l != nil && l.State != Ended && l.State != Failed {
		return m.snapshot(l), nil
	}
	now := m.cfg.Now()
	l := &lab{Lab: Lab{Learner: learner, QueuedAt: now}}
	if len(m.queue) == 0 && m.assigned() < m.cfg.Capacity {
		if !m.hasClusterFor() {
			if err := m.admit(); err != nil {
				return Lab{}, err
			}
		}
		m.labs[learner] = l
		m.give(l)
		m.schedule()
		return m.snapshot(l), nil
	}
	l.State = Queued
	m.labs[learner] = l
	m.queue = append(m.queue, learner)
	l.Position = len(m.queue)
	m.publish(EventQueued, l, fmt.Sprintf("The class is at capacity: you are number %d in the queue. Your lab starts when one frees up.", l.Position))
	m.schedule()
	return m.snapshot(l), nil
}

// Lab returns learner's lab.
func (m *Manager) Lab(learner string) (Lab, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.labs[learner]
	if l == nil {
		return Lab{}, false
	}
	return m.snapshot(l), true
}

// Labs returns every learner's lab, sorted by learner.
func (m *Manager) Labs() []Lab {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Lab, 0, len(m.labs))
	for _, l := range m.labs {
		out = append(out, m.snapshot(l))
	}
	slices.SortFunc(out, func(a, b Lab) int { return strings.Compare(a.Learner, b.Learner) })
	return out
}

// Cluster returns learner's cluster once the lab is ready.
func (m *Manager) Cluster(learner string) (cluster.Cluster, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.labs[learner]
	switch {
	case l == nil:
		return nil, noLab("you have no lab yet: start one first")
	case l.State == Queued:
		return nil, noLab(fmt.Sprintf("your lab has not started: you are number %d in the queue", m.position(learner)))
	case l.State == Starting:
		return nil, noLab("your lab is still starting")
	case l.State != Ready:
		return nil, noLab(fmt.Sprintf("your lab has %s (%s): start a new one", l.State, l.Reason))
	}
	return l.cluster, nil
}

// Touch records activity in learner's lab, which restarts its idle
// timeout.
func (m *Manager) Touch(learner string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l := m.labs[learner]; l != nil && l.State == Ready {
		l.LastActive = m.cfg.Now()
		l.warnedIdle = 0
	}
}

// Extend gives learner's lab d more time (the instructor's extend); it
// also counts as activity.
func (m *Manager) Extend(learner string, d time.Duration) (Lab, error) {
	if d <= 0 {
		return Lab{}, fmt.Errorf("extend by a positive duration, not %s", d)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.labs[learner]
	if l == nil || l.State != Ready {
		return Lab{}, noLab(fmt.Sprintf("learner %s has no running lab to extend", learner))
	}
	if !l.ExpiresAt.IsZero() {
		l.ExpiresAt = l.ExpiresAt.Add(d)
	}
	l.LastActive = m.cfg.Now()
	l.warnedIdle, l.warnedExpiry = 0, 0
	msg := fmt.Sprintf("Your instructor gave your lab %s more time.", d)
	if !l.ExpiresAt.IsZero() {
		msg += fmt.Sprintf(" It now ends at %s.", l.ExpiresAt.UTC().Format("15:04 MST"))
	}
	m.publish(EventExtended, l, msg)
	return m.snapshot(l), nil
}

// Reset replaces learner's cluster with a fresh one (from the pool when
// it has one); the lab keeps its time limit.
func (m *Manager) Reset(learner string) (Lab, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Lab{}, ErrClosed
	}
	l := m.labs[learner]
	if l == nil || (l.State != Ready && l.State != Starting) {
		return Lab{}, noLab(fmt.Sprintf("learner %s has no running lab to reset", learner))
	}
	old := l.Cluster
	m.drop(old)
	l.cluster, l.Cluster = nil, ""
	m.publish(EventReset, l, "Your lab is being reset: you get a fresh cluster.")
	l.keepExpiry = l.ExpiresAt
	m.give(l)
	m.schedule()
	return m.snapshot(l), nil
}

// Release ends learner's lab (the learner is done, or left the class) or
// takes them out of the queue.
func (m *Manager) Release(learner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.labs[learner]
	if l == nil || l.State == Ended || l.State == Failed {
		return noLab(fmt.Sprintf("learner %s has no lab", learner))
	}
	m.end(l, ReasonReleased, "Your lab was closed.")
	m.schedule()
	return nil
}

// Tick reclaims the labs whose time limit or idle timeout has passed at
// now, warns those close to it, and runs the queue and the pool.
func (m *Manager) Tick(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	for _, l := range m.sortedLabs() {
		if l.State != Ready {
			continue
		}
		var idleAt time.Time
		if m.cfg.IdleTimeout > 0 {
			idleAt = l.LastActive.Add(m.cfg.IdleTimeout)
		}
		switch {
		case !l.ExpiresAt.IsZero() && !now.Before(l.ExpiresAt):
			m.end(l, ReasonTimeLimit, "Your lab's time is up: it has been reclaimed. Ask your instructor if you need more time.")
			continue
		case !idleAt.IsZero() && !now.Before(idleAt):
			m.end(l, ReasonIdle, fmt.Sprintf("Your lab was reclaimed after %s without activity. Start it again to continue.", m.cfg.IdleTimeout))
			continue
		}
		if !l.ExpiresAt.IsZero() {
			if n := m.crossed(now, l.ExpiresAt, l.warnedExpiry); n > l.warnedExpiry {
				l.warnedExpiry = n
				left := l.ExpiresAt.Sub(now)
				m.publishIn(EventWarning, l, left, fmt.Sprintf("Your lab's time runs out in %s; it will then be reclaimed. Ask your instructor if you need more time.", roundLeft(left)))
			}
		}
		if !idleAt.IsZero() {
			if n := m.crossed(now, idleAt, l.warnedIdle); n > l.warnedIdle {
				l.warnedIdle = n
				left := idleAt.Sub(now)
				m.publishIn(EventWarning, l, left, fmt.Sprintf("Your lab has been idle: it will be reclaimed in %s unless you use it.", roundLeft(left)))
			}
		}
	}
	m.schedule()
}

// crossed is how many warning thresholds before deadline now has passed,
// at least sent.
func (m *Manager) crossed(now, deadline time.Time, sent int) int {
	n := sent
	for i := sent; i < len(m.cfg.Warnings); i++ {
		if !now.Before(deadline.Add(-m.cfg.Warnings[i])) {
			n = i + 1
		}
	}
	return n
}

func roundLeft(d time.Duration) string {
	if d >= time.Minute {
		return d.Round(time.Minute).String()
	}
	return d.Round(time.Second).String()
}

// Stats counts labs and clusters.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Stats{Queued: len(m.queue), Warm: len(m.warm), Creating: len(m.creating), Deleting: len(m.deleting)}
	for _, l := range m.labs {
		switch l.State {
		case Starting:
			s.Starting++
		case Ready:
			s.Ready++
		}
	}
	return s
}

// Sweep deletes the clusters that the ledger records, or that carry the
// manager's prefix, and that no lab, pool entry or creation in progress
// references.
func (m *Manager) Sweep(ctx context.Context) error {
	owned, err := m.cfg.Ledger.Owned(ctx)
	if err != nil {
		return fmt.Errorf("listing the class's clusters: %w", err)
	}
	listed, err := m.cfg.Provider.List(ctx)
	if err != nil {
		return fmt.Errorf("listing clusters: %w", err)
	}
	for _, s := range listed {
		if strings.HasPrefix(s.Name, m.cfg.Prefix+"-") && len(s.Name) == len(m.cfg.Prefix)+5 && !slices.Contains(owned, s.Name) {
			owned = append(owned, s.Name)
		}
	}
	m.mu.Lock()
	live := map[string]bool{}
	for name := range m.creating {
		live[name] = true
	}
	for name := range m.deleting {
		live[name] = true
	}
	for _, w := range m.warm {
		live[w.name] = true
	}
	for _, l := range m.labs {
		if l.Cluster != "" {
			live[l.Cluster] = true
		}
	}
	m.mu.Unlock()
	var errs []error
	for _, name := range owned {
		if live[name] {
			continue
		}
		m.log.Info("deleting a cluster no lab uses", "cluster", name)
		if err := m.deleteCluster(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close ends every lab, stops the manager and deletes every cluster it
// created, waiting for clusters being created to roll back.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if !m.closed {
		for _, l := range m.sortedLabs() {
			if l.State != Ended && l.State != Failed {
				m.end(l, ReasonClosed, "The class is closed: your lab is gone. Thank you for taking part!")
			}
		}
		for _, w := range m.warm {
			m.drop(w.name)
		}
		m.warm = nil
		m.closed = true
	}
	done := m.loopDone
	m.mu.Unlock()
	// Clusters being created roll back when their context ends.
	m.cancel()
	if done != nil {
		<-done
	}
	m.mu.Lock()
	for m.inflight > 0 {
		m.idle.Wait()
	}
	m.mu.Unlock()
	err := m.Sweep(ctx)
	m.events.Close()
	return err
}

// settle waits until no cluster is being created or deleted.
func (m *Manager) settle() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for m.inflight > 0 {
		m.idle.Wait()
	}
}

// The methods below run with m.mu held.

func (m *Manager) assigned() int {
	n := 0
	for _, l := range m.labs {
		if l.State == Starting || l.State == Ready {
			n++
		}
	}
	return n
}

func (m *Manager) hasClusterFor() bool {
	if len(m.warm) > 0 {
		return true
	}
	for _, learner := range m.creating {
		if learner == "" {
			return true
		}
	}
	return false
}

// give hands l a warm cluster, a pool cluster being created, or a new
// cluster (the caller checked admission).
func (m *Manager) give(l *lab) {
	l.Position, l.Reason = 0, ""
	if len(m.warm) > 0 {
		w := m.warm[0]
		m.warm = m.warm[1:]
		m.ready(l, w.name, w.c)
		return
	}
	l.State = Starting
	for name, learner := range m.creating {
		if learner == "" {
			m.creating[name] = l.Learner
			l.Cluster = name
			m.publish(EventStarting, l, "Your lab is starting: its cluster is almost ready.")
			return
		}
	}
	l.Cluster = m.create(l.Learner)
	m.publish(EventStarting, l, "Your lab is starting: creating your cluster takes about 15 seconds.")
}

func (m *Manager) ready(l *lab, name string, c cluster.Cluster) {
	now := m.cfg.Now()
	l.State, l.Cluster, l.cluster = Ready, name, c
	l.ReadyAt, l.LastActive = now, now
	l.warnedIdle, l.warnedExpiry = 0, 0
	switch {
	case !l.keepExpiry.IsZero():
		l.ExpiresAt, l.keepExpiry = l.keepExpiry, time.Time{}
	case m.cfg.TimeLimit > 0:
		l.ExpiresAt = now.Add(m.cfg.TimeLimit)
	}
	m.publish(EventReady, l, "Your lab is ready.")
}

// end ends l and deletes its cluster.
func (m *Manager) end(l *lab, reason, msg string) {
	if i := slices.Index(m.queue, l.Learner); i >= 0 {
		m.queue = slices.Delete(m.queue, i, i+1)
	}
	if l.Cluster != "" {
		m.drop(l.Cluster)
	}
	l.State, l.Reason, l.Position, l.cluster = Ended, reason, 0, nil
	m.publish(EventEnded, l, msg)
}

// drop deletes cluster name in the background. A cluster still being
// created was never used: it goes to the pool instead (or is deleted
// once created when the pool has no room for it).
func (m *Manager) drop(name string) {
	if _, ok := m.creating[name]; ok {
		m.creating[name] = ""
		return
	}
	if i := slices.IndexFunc(m.warm, func(w warmCluster) bool { return w.name == name }); i >= 0 {
		m.warm = slices.Delete(m.warm, i, i+1)
	}
	m.deleting[name] = true
	m.inflight++
	go func() {
		err := m.deleteCluster(context.WithoutCancel(m.ctx), name)
		if err != nil {
			m.log.Error("deleting a lab cluster failed; the next sweep retries", "cluster", name, "err", err)
		}
		m.mu.Lock()
		delete(m.deleting, name)
		m.done()
		m.mu.Unlock()
	}()
}

func (m *Manager) deleteCluster(ctx context.Context, name string) error {
	if err := m.cfg.Provider.Delete(ctx, name); err != nil && !errors.Is(err, cluster.ErrNotFound) {
		return fmt.Errorf("deleting cluster %s: %w", name, err)
	}
	if err := m.cfg.Ledger.Forget(ctx, name); err != nil {
		return fmt.Errorf("forgetting cluster %s: %w", name, err)
	}
	return nil
}

func (m *Manager) done() {
	m.inflight--
	if m.inflight == 0 {
		m.idle.Broadcast()
	}
}

// create starts creating a cluster for learner ("" for the pool) and
// returns its name.
func (m *Manager) create(learner string) string {
	name := m.cfg.Prefix + "-" + suffix()
	m.creating[name] = learner
	m.inflight++
	go func() {
		c, err := m.createCluster(name)
		m.mu.Lock()
		defer m.mu.Unlock()
		defer m.done()
		m.created(name, c, err)
	}()
	return name
}

func (m *Manager) createCluster(name string) (cluster.Cluster, error) {
	if err := m.cfg.Ledger.Record(m.ctx, name); err != nil {
		return nil, fmt.Errorf("recording cluster %s: %w", name, err)
	}
	// The progress goes to the learner the cluster is for, if any by then
	// (a pool cluster can be handed to a learner while it is created).
	p := &progress{m: m, cluster: name}
	release, err := m.cfg.Starts.Acquire(m.ctx, func(ahead int) {
		p.Infof("Waiting for a turn to start: this machine creates %d clusters at once, and %d are starting before yours.", m.cfg.Starts.Max(), ahead)
	})
	var c cluster.Cluster
	if err == nil {
		c, err = m.cfg.Provider.Create(m.ctx, m.cfg.Shape.options(name, p))
		release()
	}
	if err != nil {
		// Create removed what it made; forget the name.
		if ferr := m.cfg.Ledger.Forget(context.WithoutCancel(m.ctx), name); ferr != nil {
			m.log.Error("forgetting a cluster that failed to start", "cluster", name, "err", ferr)
		}
		return nil, err
	}
	return c, nil
}

// created files a finished creation.
func (m *Manager) created(name string, c cluster.Cluster, err error) {
	learner := m.creating[name]
	delete(m.creating, name)
	if err != nil {
		if learner == "" {
			if !m.closed {
				m.poolRetry = m.cfg.Now().Add(m.cfg.RetryAfter)
				m.log.Error("a warm pool cluster failed to start", "cluster", name, "err", err)
				m.publish(EventPoolError, &lab{}, fmt.Sprintf("A warm pool cluster failed to start: %v", err))
			}
		} else if l := m.labs[learner]; l != nil && l.Cluster == name {
			l.State, l.Cluster, l.Reason = Failed, "", err.Error()
			m.log.Error("a lab failed to start", "learner", learner, "cluster", name, "err", err)
			m.publish(EventFailed, l, "Your lab could not start. Try again; if it fails again, tell your instructor.")
		}
		m.schedule()
		return
	}
	if m.closed {
		m.drop(name)
		return
	}
	if l := m.labs[learner]; learner != "" && l != nil && l.State == Starting && l.Cluster == name {
		m.ready(l, name, c)
	} else {
		m.warm = append(m.warm, warmCluster{name: name, c: c})
		m.publish(EventPool, &lab{}, fmt.Sprintf("A warm cluster is ready (%d waiting).", len(m.warm)))
	}
	m.schedule()
}

// schedule moves the queue and fills the pool.
func (m *Manager) schedule() {
	if m.closed {
		return
	}
	for len(m.queue) > 0 && m.assigned() < m.cfg.Capacity {
		l := m.labs[m.queue[0]]
		if !m.hasClusterFor() {
			if err := m.admit(); err != nil {
				if l.Reason != err.Error() {
					l.Reason = err.Error()
					m.publish(EventWaiting, l, "You are next, but the lab machine is short of memory: your lab starts as soon as memory frees up.")
				}
				break
			}
		}
		m.queue = m.queue[1:]
		m.give(l)
	}
	for i, learner := range m.queue {
		if l := m.labs[learner]; l.Position != i+1 {
			l.Position = i + 1
			m.publish(EventPosition, l, fmt.Sprintf("You are number %d in the queue.", l.Position))
		}
	}
	target := max(0, min(m.cfg.PoolSize, m.cfg.Capacity-m.assigned()))
	// Warm clusters nobody can take (the class is at capacity, or a
	// lab's cluster arrived after its learner left) only take memory.
	for len(m.warm) > target {
		w := m.warm[len(m.warm)-1]
		m.warm = m.warm[:len(m.warm)-1]
		m.drop(w.name)
	}
	if m.cfg.Now().Before(m.poolRetry) {
		return
	}
	have := len(m.warm)
	for _, learner := range m.creating {
		if learner == "" {
			have++
		}
	}
	for ; have < target; have++ {
		if err := m.admit(); err != nil {
			m.log.Warn("not filling the warm pool", "err", err)
			return
		}
		m.create("")
	}
}

// admit checks that the machine has memory for one more cluster.
func (m *Manager) admit() error {
	avail, err := m.cfg.Memory()
	if err != nil {
		// Without a reading, do not stop the class; say so once.
		if !m.memErrLog {
			m.log.Warn("admission control is off: free memory unknown", "err", err)
			m.memErrLog = true
		}
		return nil
	}
	pending := uint64(len(m.creating)) * m.cfg.LabMemory
	if pending > avail {
		avail = 0
	} else {
		avail -= pending
	}
	need := m.cfg.LabMemory + m.cfg.ReserveMemory
	if avail < need {
		return &MemoryError{Available: avail, Need: need}
	}
	return nil
}

func (m *Manager) position(learner string) int { return slices.Index(m.queue, learner) + 1 }

func (m *Manager) snapshot(l *lab) Lab {
	s := l.Lab
	if s.State == Queued {
		s.Position = m.position(l.Learner)
	}
	return s
}

func (m *Manager) sortedLabs() []*lab {
	out := make([]*lab, 0, len(m.labs))
	for _, l := range m.labs {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b *lab) int { return strings.Compare(a.Learner, b.Learner) })
	return out
}

func (m *Manager) publish(kind EventKind, l *lab, msg string) { m.publishIn(kind, l, 0, msg) }

func (m *Manager) publishIn(kind EventKind, l *lab, in time.Duration, msg string) {
	m.events.Publish(Event{Kind: kind, Learner: l.Learner, Lab: m.snapshot(l), Message: msg, At: m.cfg.Now(), In: in})
}

// progress turns the steps of a lab's cluster creation into events for
// the learner waiting for it.
type progress struct {
	m       *Manager
	cluster string
}

func (p *progress) Start(step string) func(error) {
	p.send(step + " ...")
	return func(error) {}
}

func (p *progress) Infof(format string, args ...any) { p.send(fmt.Sprintf(format, args...)) }

func (p *progress) send(msg string) {
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	learner := p.m.creating[p.cluster]
	if l := p.m.labs[learner]; learner != "" && l != nil {
		p.m.publish(EventProgress, l, msg)
	}
}

const suffixAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// suffix is 4 random characters: names stay unique across restarts.
func suffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	for i := range b {
		b[i] = suffixAlphabet[int(b[i])%len(suffixAlphabet)]
	}
	return string(b)
}
