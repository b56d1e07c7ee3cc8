package attempt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/owner"
	"github.com/svclab/svclab/lab/faults"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/kubebin"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/session"
	"github.com/svclab/svclab/lab/store"
	"github.com/svclab/svclab/scenarios"
)

// Attempt states (the store's).
const (
	StateRunning   = string(store.Running)
	StatePassed    = string(store.Passed)
	StateErrored   = string(store.Errored)
	StateAbandoned = string(store.Abandoned)
)

// Attempt is a learner's go at a scenario.
type Attempt struct {
	ID                  int64
	Learner, ScenarioID string
	Cluster             string
	Backend             string
	// State is StateRunning, StatePassed, StateErrored or StateAbandoned.
	State             string
	Started, Finished time.Time
	// Score and MaxScore are the weights of the checks that passed in the
	// last check run and of all checks, rounded.
	Score, MaxScore int
	HintsShown      int
	// Error says why an errored attempt errored.
	Error string
	// SolutionUsed is when the reference solution was applied (zero:
	// never).
	SolutionUsed time.Time
	// LastCheck is when the checks last ran (zero: never); LastCheckPassed
	// is their verdict.
	LastCheck       time.Time
	LastCheckPassed bool
}

func fromStore(a store.Attempt) *Attempt {
	return &Attempt{ID: a.ID, Learner: a.Learner, ScenarioID: a.ScenarioID, Cluster: a.Cluster, Backend: a.Backend, State: string(a.State),
		Started: a.Started, Finished: a.Finished, Score: int(math.Round(a.Score)), MaxScore: int(math.Round(a.MaxScore)),
		HintsShown: a.HintsShown, Error: a.Error, SolutionUsed: a.SolutionUsed, LastCheck: a.LastCheck, LastCheckPassed: a.LastCheckPassed}
}

// CheckRun is one grading of an attempt, with each check's result.
type CheckRun = store.CheckRun

// Options configure a Manager.
type Options struct {
	// Store records the attempts (required).
	Store *store.Store
	// Provider finds and creates clusters (required).
	Provider cluster.Provider
	// Backend is the provider's name, recorded with each attempt (default
	// "embedded").
	Backend string
	// Catalog holds the scenarios (default: the ones built into svclab,
	// loaded with Faults); Problems are the problems of the scenarios that
	// did not load, to explain why one is missing.
	Catalog  *scenario.Catalog
	Problems scenario.Problems
	// Faults are the fault implementations (default faults.Registry()).
	Faults *scenario.Registry
	// KubeBin finds svclab-kube for the reference solution (default
	// kubebin.Locate).
	KubeBin func(ctx context.Context) (string, error)
	// Svclab is the command line that runs svclab against the provider's
	// state (session.Options.Svclab): solutions that use "svclab node
	// exec" need it. Nil: DefaultSvclab(StateDir) when StateDir is set.
	Svclab []string
	// StateDir is the provider's state directory, for the default Svclab.
	StateDir string
	// Starter sets scenarios up (default SessionStarter).
	Starter Starter
	Log     *slog.Logger
	// Owners records which attempt holds which cluster, machine-wide, so
	// that other svclab processes (another state directory's, an exercise
	// run) leave it alone. Nil: clusters are not claimed (unit tests on
	// fakes).
	Owners *owner.Registry
	// TakeOver lets Start take a cluster that somebody else holds (the
	// --force of "svclab scenario start"): their attempt learns it at its
	// next step.
	TakeOver bool
}

// DefaultSvclab is this program with --state-dir stateDir, or nil when the
// program cannot find its own executable.
func DefaultSvclab(stateDir string) []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return []string{exe, "--state-dir", stateDir}
}

// Manager runs learners' attempts and records them. It is safe for
// concurrent use; operations on one attempt, and starts on one cluster,
// run one at a time.
type Manager struct {
	store    *store.Store
	provider cluster.Provider
	backend  string
	catalog  *scenario.Catalog
	problems scenario.Problems
	kubeBin  func(ctx context.Context) (string, error)
	runner   Starter
	log      *slog.Logger
	owners   *owner.Registry
	takeOver bool

	mu    sync.Mutex
	labs  map[int64]Session
	locks map[string]*sync.Mutex
}

// New returns a Manager.
func New(opts Options) (*Manager, error) {
	if opts.Store == nil || opts.Provider == nil {
		return nil, errors.New("attempt.New: a store and a cluster provider are required")
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Faults == nil {
		opts.Faults = faults.Registry()
	}
	if opts.Catalog == nil {
		opts.Catalog, opts.Problems = scenarios.Load(scenario.Options{Faults: opts.Faults, Logger: opts.Log})
	}
	if opts.Backend == "" {
		opts.Backend = "embedded"
	}
	if opts.KubeBin == nil {
		opts.KubeBin = func(ctx context.Context) (string, error) { return kubebin.Locate(ctx, nil) }
	}
	if opts.Svclab == nil && opts.StateDir != "" {
		opts.Svclab = DefaultSvclab(opts.StateDir)
	}
	if opts.Starter == nil {
		opts.Starter = SessionStarter{Faults: opts.Faults, Log: opts.Log, Svclab: opts.Svclab}
	}
	return &Manager{store: opts.Store, provider: opts.Provider, backend: opts.Backend, catalog: opts.Catalog, problems: opts.Problems,
		kubeBin: opts.KubeBin, runner: opts.Starter, log: opts.Log, owners: opts.Owners, takeOver: opts.TakeOver,
		labs: map[int64]Session{}, locks: map[string]*sync.Mutex{}}, nil
}

// Catalog is the scenarios the manager runs.
func (m *Manager) Catalog() *scenario.Catalog { return m.catalog }

// lock serialises the operations on one key ("attempt/3", "cluster/lab").
func (m *Manager) lock(key string) func() {
	m.mu.Lock()
	l, ok := m.locks[key]
	if !ok {
		l = &sync.Mutex{}
		m.locks[key] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Scenario returns the scenario id, or an error that says why there is
// none: unknown, or malformed (with its problems).
func (m *Manager) Scenario(id string) (*scenario.Scenario, error) {
	if s := m.catalog.Get(id); s != nil {
		return s, nil
	}
	var mine []string
	for _, p := range m.problems {
		if strings.Contains("/"+p.File+"/", "/"+id+"/") {
			mine = append(mine, p.String())
		}
	}
	if len(mine) > 0 {
		return nil, fmt.Errorf("scenario %s has problems and cannot run (svclab scenario lint shows them):\n  %s", id, strings.Join(mine, "\n  "))
	}
	return nil, fmt.Errorf("there is no scenario %q; the scenarios are %s (svclab scenario list)", id, strings.Join(m.catalog.IDs(), ", "))
}

// persist is for recording what happened after ctx may have been
// cancelled (Ctrl-C during setup): the record must still be written.
func persist(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

// Start sets scenario scenarioID up for learner on cluster clusterName
// (created with the scenario's shape when missing) and records a running
// attempt with the baseline its checks compare with. A setup that fails is
// recorded as an errored attempt and removed from the cluster again; the
// error says why.
func (m *Manager) Start(ctx context.Context, learner, scenarioID, clusterName string, progress cluster.Progress) (*Attempt, error) {
	if err := cluster.ValidateName(clusterName); err != nil {
		return nil, err
	}
	if learner == "" {
		learner = store.LocalLearner
	}
	if _, err := m.store.EnsureLearner(ctx, learner, ""); err != nil {
		return nil, err
	}
	unlock := m.lock("cluster/" + clusterName)
	defer unlock()
	busy, err := m.store.Attempts(ctx, store.AttemptFilter{States: []store.State{store.Running, store.Errored}})
	if err != nil {
		return nil, err
	}
	for _, a := range busy {
		set := m.hasBaseline(ctx, a.ID)
		if a.State == store.Errored && !set {
			continue // its setup failed: it holds nothing
		}
		if a.Learner == learner && a.ScenarioID == scenarioID {
			return nil, fmt.Errorf("you are already working on scenario %s (attempt %d on cluster %s): check it with 'svclab scenario check %s', or start over with 'svclab scenario reset %s'", scenarioID, a.ID, a.Cluster, scenarioID, scenarioID)
		}
		if a.Cluster != clusterName || a.Backend != m.backend || m.takenOver(ctx, a) {
			continue
		}
		if !m.takeOver {
			return nil, busyError(a, learner, set)
		}
		if err := m.store.SetState(ctx, a.ID, store.Errored, fmt.Sprintf("cluster %s was taken over (--force) for scenario %s of %s", clusterName, scenarioID, learner)); err != nil {
			return nil, err
		}
	}
	var lease *owner.Lease
	if m.owners != nil {
		lease, err = m.owners.Acquire(ctx, owner.Claim{Backend: m.backend, Cluster: clusterName}, m.takeOver)
		if err != nil {
			if owner.IsInUse(err) {
				return nil, fmt.Errorf("%w: wait until it is done, or use another cluster", err)
			}
			return nil, err
		}
		// Once bound, the attempt holds the cluster; before, nothing does.
		defer lease.Close()
	}
	rec, err := m.store.CreateAttempt(ctx, store.NewAttempt{Learner: learner, ScenarioID: scenarioID, Cluster: clusterName, Backend: m.backend})
	var be *store.BusyError
	if errors.As(err, &be) {
		// Another process started on the cluster just now.
		lease.Release()
		return nil, busyError(be.Attempt, learner, false)
	}
	if err != nil {
		lease.Release()
		return nil, err
	}
	m.log.Debug("starting attempt", "attempt", rec.ID, "learner", learner, "scenario", scenarioID, "cluster", clusterName)
	fail := func(err error) (*Attempt, error) {
		pctx, cancel := persist(ctx)
		defer cancel()
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted: %w", err)
		}
		// An attempt whose setup failed holds nothing.
		lease.Release()
		if serr := m.store.SetState(pctx, rec.ID, store.Errored, err.Error()); serr != nil {
			return nil, errors.Join(err, serr)
		}
		return nil, err
	}
	if lease != nil {
		if err := lease.Bind(ctx, m.claimOf(rec)); err != nil {
			return fail(err)
		}
	}
	s, err := m.Scenario(scenarioID)
	if err != nil {
		return fail(err)
	}
	c, err := m.runner.EnsureCluster(ctx, m.provider, clusterName, s.Cluster, progress)
	if err != nil {
		return fail(err)
	}
	lab, err := m.runner.Start(ctx, s, c, progress)
	if err != nil {
		if lab != nil {
			pctx, cancel := persist(ctx)
			defer cancel()
			if aerr := lab.Abort(pctx); aerr != nil {
				err = fmt.Errorf("%w; removing what the failed setup left also failed: %v", err, aerr)
			}
		}
		return fail(err)
	}
	state, err := lab.State()
	if err == nil {
		err = m.store.SetBaseline(ctx, rec.ID, state)
	}
	if err != nil {
		return fail(fmt.Errorf("recording the attempt's baseline: %w", err))
	}
	m.mu.Lock()
	m.labs[rec.ID] = lab
	m.mu.Unlock()
	return m.attempt(ctx, rec.ID)
}

// claimOf is attempt a in the clusters' claims.
func (m *Manager) claimOf(a store.Attempt) owner.Attempt {
	return owner.Attempt{ID: a.ID, Store: m.store.Location(), Scenario: a.ScenarioID, Learner: a.Learner}
}

// stillHolds returns an error that says who took attempt a's cluster over
// (its claim names another holder), or nil. A claim that vanished is made
// again; claims that cannot be read do not stop the learner (logged).
func (m *Manager) stillHolds(ctx context.Context, a store.Attempt) error {
	if m.owners == nil || (a.State != store.Running && a.State != store.Errored) {
		return nil
	}
	err := m.owners.Check(ctx, m.backend, a.Cluster, m.claimOf(a))
	if err != nil && !owner.IsInUse(err) {
		m.log.Warn("checking the claim on the attempt's cluster", "attempt", a.ID, "cluster", a.Cluster, "err", err)
		return nil
	}
	return err
}

// takenOver says whether somebody else took attempt a's cluster over.
func (m *Manager) takenOver(ctx context.Context, a store.Attempt) bool {
	if m.owners == nil {
		return false
	}
	c, _ := m.owners.Holder(ctx, m.backend, a.Cluster)
	return c != nil && !c.Attempt.Same(m.claimOf(a))
}

// release gives up attempt a's claim on its cluster: it ended.
func (m *Manager) release(ctx context.Context, a store.Attempt) {
	if m.owners == nil {
		return
	}
	if err := m.owners.ReleaseAttempt(ctx, m.backend, a.Cluster, m.claimOf(a)); err != nil {
		m.log.Warn("releasing the claim on the attempt's cluster", "attempt", a.ID, "cluster", a.Cluster, "err", err)
	}
}

// busyError says that attempt a holds the cluster.
func busyError(a store.Attempt, learner string, set bool) error {
	who, what := "", ""
	if a.Learner != learner {
		who = " of " + a.Learner
	}
	if !set && a.State == store.Running {
		what = ", being set up — or its setup was interrupted: 'svclab scenario reset " + a.ScenarioID + "' starts it over"
	}
	return fmt.Errorf("cluster %s is busy with scenario %s (attempt %d%s%s): finish it, abandon it with 'svclab scenario abandon %s', or use another cluster (--cluster)", a.Cluster, a.ScenarioID, a.ID, who, what, a.ScenarioID)
}

func (m *Manager) hasBaseline(ctx context.Context, id int64) bool {
	_, err := m.store.Baseline(ctx, id)
	return err == nil
}

func (m *Manager) attempt(ctx context.Context, id int64) (*Attempt, error) {
	a, err := m.store.Attempt(ctx, id)
	if err != nil {
		return nil, err
	}
	return fromStore(a), nil
}

// Attempt returns attempt id.
func (m *Manager) Attempt(ctx context.Context, id int64) (*Attempt, error) { return m.attempt(ctx, id) }

// Current is the attempt the learner is working on at the scenario, or
// nil: their latest running one, or errored one (a check that timed out
// leaves the cluster as it was: the learner checks again, or resets).
func (m *Manager) Current(ctx context.Context, learner, scenarioID string) (*Attempt, error) {
	return m.latest(ctx, learner, scenarioID, store.Running, store.Errored)
}

// Latest is the learner's latest attempt at the scenario in any state, or
// nil.
func (m *Manager) Latest(ctx context.Context, learner, scenarioID string) (*Attempt, error) {
	return m.latest(ctx, learner, scenarioID)
}

// Active lists the learner's attempts that may hold a cluster (running or
// errored), newest first.
func (m *Manager) Active(ctx context.Context, learner string) ([]*Attempt, error) {
	return m.list(ctx, store.AttemptFilter{Learner: learner, States: []store.State{store.Running, store.Errored}})
}

// List is every attempt of the learner at the scenario, newest first.
func (m *Manager) List(ctx context.Context, learner, scenarioID string) ([]*Attempt, error) {
	return m.list(ctx, store.AttemptFilter{Learner: learner, ScenarioID: scenarioID})
}

func (m *Manager) latest(ctx context.Context, learner, scenarioID string, states ...store.State) (*Attempt, error) {
	list, err := m.list(ctx, store.AttemptFilter{Learner: learner, ScenarioID: scenarioID, States: states, Limit: 1})
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return list[0], nil
}

// list lists the attempts f selects ("" is the local learner).
func (m *Manager) list(ctx context.Context, f store.AttemptFilter) ([]*Attempt, error) {
	if f.Learner == "" {
		f.Learner = store.LocalLearner
	}
	list, err := m.store.Attempts(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]*Attempt, len(list))
	for i, a := range list {
		out[i] = fromStore(a)
	}
	return out, nil
}

// lab returns the lab of attempt a: the one this process started, or the
// one resumed from the stored state. A lab that is gone (its cluster was
// deleted, or deleted and created again) or cannot be resumed (the state
// was never saved) marks a running attempt errored.
func (m *Manager) lab(ctx context.Context, a store.Attempt) (Session, *scenario.Scenario, error) {
	if err := m.stillHolds(ctx, a); err != nil {
		m.forget(a.ID)
		return nil, nil, m.errored(ctx, a, fmt.Errorf("%w: what you did there is gone; start the scenario again when the cluster is free, or on another cluster", err))
	}
	m.mu.Lock()
	lab, ok := m.labs[a.ID]
	m.mu.Unlock()
	s, err := m.Scenario(a.ScenarioID)
	if err != nil {
		return nil, nil, m.errored(ctx, a, err)
	}
	c, err := m.provider.Get(ctx, a.Cluster)
	if errors.Is(err, cluster.ErrNotFound) {
		m.forget(a.ID)
		return nil, nil, m.errored(ctx, a, fmt.Errorf("cluster %s of attempt %d is gone: start the scenario again with 'svclab scenario reset %s'", a.Cluster, a.ID, a.ScenarioID))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("finding cluster %s of attempt %d: %w", a.Cluster, a.ID, err)
	}
	if !ok {
		state, err := m.store.Baseline(ctx, a.ID)
		if errors.Is(err, store.ErrNotFound) {
			err := fmt.Errorf("attempt %d never finished setting up (%s): start the scenario again with 'svclab scenario reset %s'", a.ID, orUnknown(a.Error), a.ScenarioID)
			if a.State == store.Errored {
				return nil, nil, err // keep the error that stopped the setup
			}
			return nil, nil, m.errored(ctx, a, err)
		}
		if err != nil {
			return nil, nil, err
		}
		if lab, err = m.runner.Resume(s, c, state); err != nil {
			return nil, nil, m.errored(ctx, a, fmt.Errorf("resuming attempt %d: %w", a.ID, err))
		}
	}
	replaced, err := m.replaced(c, lab)
	if err != nil {
		return nil, nil, err
	}
	if replaced {
		m.forget(a.ID)
		return nil, nil, m.errored(ctx, a, fmt.Errorf("cluster %s of attempt %d was deleted and created again since the scenario was set up, and what it set up went with it: start the scenario again with 'svclab scenario reset %s'", a.Cluster, a.ID, a.ScenarioID))
	}
	if !ok {
		m.mu.Lock()
		m.labs[a.ID] = lab
		m.mu.Unlock()
	}
	return lab, s, nil
}

// replaced says whether lab was set up on an earlier life of cluster c (c
// was deleted and created again under its name since): then nothing of
// lab's scenario is on c. A lab whose life is not known (a state saved
// before it was kept) is taken to be on c.
func (m *Manager) replaced(c cluster.Cluster, lab Session) (bool, error) {
	was := lab.Generation()
	if was == "" {
		return false, nil
	}
	now, err := cluster.Generation(c)
	if err != nil {
		return false, err
	}
	return now != was, nil
}

// forget drops attempt id's lab from this process's memory.
func (m *Manager) forget(id int64) {
	m.mu.Lock()
	delete(m.labs, id)
	m.mu.Unlock()
}

func orUnknown(s string) string {
	if s == "" {
		return "no error was recorded"
	}
	return s
}

// errored records err on a running attempt and returns it.
func (m *Manager) errored(ctx context.Context, a store.Attempt, err error) error {
	if a.State == store.Running || a.State == store.Errored {
		pctx, cancel := persist(ctx)
		defer cancel()
		if serr := m.store.SetState(pctx, a.ID, store.Errored, err.Error()); serr != nil {
			return errors.Join(err, serr)
		}
	}
	return err
}

// usable returns attempt id if it can still be worked on.
func (m *Manager) usable(ctx context.Context, id int64) (store.Attempt, error) {
	a, err := m.store.Attempt(ctx, id)
	if err != nil {
		return a, err
	}
	if a.State == store.Abandoned {
		return a, fmt.Errorf("attempt %d at %s was abandoned: start the scenario again with 'svclab scenario start %s'", a.ID, a.ScenarioID, a.ScenarioID)
	}
	return a, nil
}

// timeoutMarker is how lab/grade reports a check that ran out of time.
const timeoutMarker = "did not finish within"

// Check grades attempt id against its stored baseline and records the
// check run (and the hints that failed checks unlock). When every check
// passes the attempt is passed; a check that times out makes it errored,
// with the cluster left as it is (a later check may pass).
func (m *Manager) Check(ctx context.Context, attemptID int64) (*grade.Report, error) {
	return m.grade(ctx, attemptID, store.TriggerLearner)
}

// Evaluate grades attempt id and records the run like Check, without
// changing the attempt's state or counting the hints it unlocks as shown,
// and without the checks that change the cluster (grade.Passive):
// re-evaluation in the background while the learner works.
func (m *Manager) Evaluate(ctx context.Context, attemptID int64) (*grade.Report, error) {
	return m.grade(grade.Passive(ctx), attemptID, store.TriggerAuto)
}

// FinalGrade grades attempt id with every check, those that change the
// cluster included, and records the run, without changing the attempt's
// state or showing hints: the grade of an exam whose time is over (the lab
// is no longer the learner's to change, so a check may restart what it
// needs).
func (m *Manager) FinalGrade(ctx context.Context, attemptID int64) (*grade.Report, error) {
	return m.grade(ctx, attemptID, store.TriggerAuto)
}

func (m *Manager) grade(ctx context.Context, id int64, trigger string) (*grade.Report, error) {
	defer m.lock(fmt.Sprintf("attempt/%d", id))()
	a, err := m.usable(ctx, id)
	if err != nil {
		return nil, err
	}
	lab, sc, err := m.lab(ctx, a)
	if err != nil {
		return nil, err
	}
	answers, err := m.store.Answers(ctx, id)
	if err != nil {
		return nil, err
	}
	rep := lab.Grade(grade.WithAnswers(ctx, answers))
	if ctx.Err() != nil {
		return rep, fmt.Errorf("grading attempt %d was interrupted: %w", id, ctx.Err())
	}
	run := store.CheckRun{AttemptID: id, Duration: rep.Duration, Passed: rep.Passed, Trigger: trigger}
	var timedOut []string
	for _, r := range rep.Results {
		run.MaxScore += r.Weight
		if r.Passed {
			run.Score += r.Weight
		}
		if strings.Contains(r.Error, timeoutMarker) {
			timedOut = append(timedOut, fmt.Sprintf("check %s: %s", r.ID, r.Error))
		}
		run.Results = append(run.Results, store.CheckResult{CheckID: r.ID, Kind: r.Kind, Weight: r.Weight, Passed: r.Passed,
			Message: r.Message, Detail: r.Full(), Error: r.Error, Duration: r.Duration})
	}
	var then store.State
	msg := ""
	if trigger == store.TriggerLearner {
		switch {
		case a.State == store.Passed:
		case rep.Passed:
			then = store.Passed
		case len(timedOut) > 0:
			then = store.Errored
			msg = fmt.Sprintf("grading timed out (%s); the cluster is as you left it: check again, or start over with 'svclab scenario reset %s'", strings.Join(timedOut, "; "), a.ScenarioID)
		case a.State == store.Errored:
			then = store.Running // grading works again
		}
	}
	if _, err := m.store.RecordCheckRun(ctx, run, then, msg); err != nil {
		return rep, err
	}
	if then == store.Passed {
		m.release(ctx, a) // solved: the cluster is free for the next scenario
	}
	// Hints are shown one at a time, in order: a learner's failed check
	// that names a hint they have not reached shows the next one (a
	// background evaluation's only offer it). rep.UnlockedHints becomes
	// what this check showed.
	named := rep.UnlockedHints
	rep.UnlockedHints = nil
	if len(named) > 0 {
		next, err := m.nextHint(ctx, id)
		if err != nil {
			return rep, err
		}
		if next > 0 && next <= slices.Max(named) {
			if trigger == store.TriggerLearner {
				if _, err := m.store.RecordHint(ctx, id, next, store.HintUnlocked); err != nil {
					return rep, err
				}
			}
			rep.UnlockedHints = []int{next}
		}
	}
	if err := m.withhold(ctx, id, sc, rep, a.State == store.Passed || rep.Passed); err != nil {
		return rep, err
	}
	if msg != "" {
		return rep, errors.New(msg)
	}
	return rep, nil
}

// withhold keeps the expected values of failed checks from the learner
// until they have seen the hint that names them (the check's unlocksHint,
// else the scenario's last hint), unless the scenario is solved: a value
// such as `expected "web"` is the fix.
func (m *Manager) withhold(ctx context.Context, id int64, sc *scenario.Scenario, rep *grade.Report, solved bool) error {
	if solved || sc == nil || len(sc.Hints) == 0 {
		return nil
	}
	shown, err := m.store.Hints(ctx, id)
	if err != nil {
		return err
	}
	seen := map[int]bool{}
	for _, h := range shown {
		seen[h.Hint] = true
	}
	for i := range rep.Results {
		r := &rep.Results[i]
		if r.Passed || r.Expected == "" || i >= len(sc.Checks) {
			continue
		}
		need := sc.Checks[i].UnlocksHint
		if need == 0 {
			need = len(sc.Hints)
		}
		if !seen[need] {
			r.Expected, r.ExpectedAfterHint = "", need
		}
	}
	return nil
}

// ErrNoMoreHints is returned by Hint when every hint has been shown.
var ErrNoMoreHints = errors.New("no more hints")

// Hint returns the next hint of attempt id that its learner has not seen
// (hints are 1-based and shown in order; those that failed checks showed
// count as seen) and records it. When all were shown it returns
// ErrNoMoreHints.
func (m *Manager) Hint(ctx context.Context, attemptID int64) (index int, text string, err error) {
	defer m.lock(fmt.Sprintf("attempt/%d", attemptID))()
	a, err := m.store.Attempt(ctx, attemptID)
	if err != nil {
		return 0, "", err
	}
	s, err := m.Scenario(a.ScenarioID)
	if err != nil {
		return 0, "", err
	}
	next, err := m.nextHint(ctx, attemptID)
	if err != nil {
		return 0, "", err
	}
	if next == 0 {
		return 0, "", fmt.Errorf("you have seen all %d hints of %s: %w", len(s.Hints), s.ID, ErrNoMoreHints)
	}
	if _, err := m.store.RecordHint(ctx, attemptID, next, store.HintRequested); err != nil {
		return 0, "", err
	}
	return next, s.Hints[next-1], nil
}

// nextHint is the first hint (1-based) of attempt id its learner has not
// seen, 0 when they have seen them all.
func (m *Manager) nextHint(ctx context.Context, id int64) (int, error) {
	a, err := m.store.Attempt(ctx, id)
	if err != nil {
		return 0, err
	}
	s, err := m.Scenario(a.ScenarioID)
	if err != nil {
		return 0, err
	}
	shown, err := m.store.Hints(ctx, id)
	if err != nil {
		return 0, err
	}
	seen := map[int]bool{}
	for _, h := range shown {
		seen[h.Hint] = true
	}
	for i := range s.Hints {
		if !seen[i+1] {
			return i + 1, nil
		}
	}
	return 0, nil
}

// Hint is a hint shown in an attempt.
type Hint struct {
	Index  int
	Text   string
	Shown  time.Time
	Reason store.HintReason
}

// Hints lists the hints shown in attempt id, in the order shown.
func (m *Manager) Hints(ctx context.Context, attemptID int64) ([]Hint, error) {
	a, err := m.store.Attempt(ctx, attemptID)
	if err != nil {
		return nil, err
	}
	s, err := m.Scenario(a.ScenarioID)
	if err != nil {
		return nil, err
	}
	shown, err := m.store.Hints(ctx, attemptID)
	if err != nil {
		return nil, err
	}
	var out []Hint
	for _, h := range shown {
		if h.Hint >= 1 && h.Hint <= len(s.Hints) {
			out = append(out, Hint{Index: h.Hint, Text: s.Hints[h.Hint-1], Shown: h.Shown, Reason: h.Reason})
		}
	}
	return out, nil
}

// Solve applies the scenario's reference solution to attempt id, writing
// the commands and their output to out, and records that it was used.
func (m *Manager) Solve(ctx context.Context, attemptID int64, out io.Writer) error {
	defer m.lock(fmt.Sprintf("attempt/%d", attemptID))()
	a, err := m.usable(ctx, attemptID)
	if err != nil {
		return err
	}
	lab, _, err := m.lab(ctx, a)
	if err != nil {
		return err
	}
	bin, err := m.kubeBin(ctx)
	if err != nil {
		return err
	}
	if err := m.store.MarkSolutionUsed(ctx, attemptID); err != nil {
		return err
	}
	if err := lab.Solve(ctx, bin, out); err != nil {
		return fmt.Errorf("the reference solution of %s failed: %w", a.ScenarioID, err)
	}
	sc, err := m.Scenario(a.ScenarioID)
	if err != nil {
		return err
	}
	for id, text := range session.ReferenceAnswers(sc) {
		if err := m.store.SetAnswer(ctx, attemptID, id, text); err != nil {
			return err
		}
	}
	return nil
}

// Answer records the learner's answer to the answer check checkID of
// attempt id (an empty text takes it back); the next grade judges it.
func (m *Manager) Answer(ctx context.Context, attemptID int64, checkID, text string) error {
	defer m.lock(fmt.Sprintf("attempt/%d", attemptID))()
	a, err := m.usable(ctx, attemptID)
	if err != nil {
		return err
	}
	sc, err := m.Scenario(a.ScenarioID)
	if err != nil {
		return err
	}
	text = strings.TrimSpace(text)
	if err := session.ValidateAnswer(sc, checkID, text); err != nil {
		return fmt.Errorf("%w: %w", ErrBadAnswer, err)
	}
	return m.store.SetAnswer(ctx, attemptID, checkID, text)
}

// ErrBadAnswer is an answer the attempt cannot take: a question the
// scenario does not ask, a text too long.
var ErrBadAnswer = errors.New("answer refused")

// Answers returns the learner's answers of attempt id, by check id.
func (m *Manager) Answers(ctx context.Context, attemptID int64) (map[string]string, error) {
	return m.store.Answers(ctx, attemptID)
}

// teardown removes attempt a's scenario from its cluster, if the cluster is
// still there.
func (m *Manager) teardown(ctx context.Context, a store.Attempt) error {
	m.mu.Lock()
	lab, ok := m.labs[a.ID]
	delete(m.labs, a.ID)
	m.mu.Unlock()
	s, err := m.Scenario(a.ScenarioID)
	if err != nil && !ok {
		return nil // nothing of it can be on the cluster
	}
	c, err := m.provider.Get(ctx, a.Cluster)
	if errors.Is(err, cluster.ErrNotFound) {
		return nil // the scenario went with its cluster
	}
	if err != nil {
		return fmt.Errorf("finding cluster %s: %w", a.Cluster, err)
	}
	if !ok {
		if state, err := m.store.Baseline(ctx, a.ID); err == nil {
			lab, err = m.runner.Resume(s, c, state)
			if err != nil {
				lab = nil
			}
		}
	}
	if lab != nil {
		if replaced, err := m.replaced(c, lab); err == nil && replaced {
			m.log.Info("the attempt's cluster was created again since its scenario was set up: nothing of it is left to remove", "attempt", a.ID, "cluster", a.Cluster)
			return nil
		}
	}
	if lab == nil {
		if lab, err = m.runner.Attach(s, c); err != nil {
			return err
		}
	}
	if err := lab.Teardown(ctx, false); err != nil {
		return fmt.Errorf("removing scenario %s from cluster %s: %w", a.ScenarioID, a.Cluster, err)
	}
	return nil
}

// Abandon removes attempt id's scenario from its cluster and records the
// attempt as abandoned (a passed attempt stays passed; its scenario is
// still removed).
func (m *Manager) Abandon(ctx context.Context, attemptID int64) error {
	defer m.lock(fmt.Sprintf("attempt/%d", attemptID))()
	a, err := m.store.Attempt(ctx, attemptID)
	if err != nil {
		return err
	}
	return m.abandon(ctx, a)
}

func (m *Manager) abandon(ctx context.Context, a store.Attempt) error {
	if a.State == store.Abandoned {
		return nil
	}
	var terr error
	if m.takenOver(ctx, a) {
		// The cluster is somebody else's now (taken over, or free after a
		// pass and taken since): leave their scenario alone.
		m.log.Info("abandoning an attempt on a cluster somebody else holds: its scenario stays", "attempt", a.ID, "cluster", a.Cluster)
	} else {
		terr = m.teardown(ctx, a)
	}
	defer m.release(ctx, a)
	if a.State != store.Passed {
		pctx, cancel := persist(ctx)
		defer cancel()
		if err := m.store.SetState(pctx, a.ID, store.Abandoned, ""); err != nil {
			return errors.Join(terr, err)
		}
	}
	return terr
}

// Reset removes attempt id's scenario from its cluster, records the attempt
// as abandoned (unless it passed) and starts the scenario again on the same
// cluster as a new attempt.
func (m *Manager) Reset(ctx context.Context, attemptID int64, progress cluster.Progress) (*Attempt, error) {
	unlock := m.lock(fmt.Sprintf("attempt/%d", attemptID))
	a, err := m.store.Attempt(ctx, attemptID)
	if err == nil {
		progress := cluster.OrNop(progress)
		done := progress.Start(fmt.Sprintf("Removing attempt %d from cluster %s", a.ID, a.Cluster))
		err = m.abandon(ctx, a)
		done(err)
	}
	unlock()
	if err != nil {
		// The teardown failed: starting again removes what an earlier run
		// left anyway, so carry on, but say what happened.
		m.log.Warn("reset: removing the old attempt failed", "attempt", attemptID, "err", err)
		if errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
	}
	return m.Start(ctx, a.Learner, a.ScenarioID, a.Cluster, progress)
}

// History lists the check runs of attempt id, oldest first.
func (m *Manager) History(ctx context.Context, attemptID int64) ([]CheckRun, error) {
	if _, err := m.store.Attempt(ctx, attemptID); err != nil {
		return nil, err
	}
	return m.store.CheckRuns(ctx, attemptID)
}

// Progress states of a scenario for a learner.
const (
	NotStarted    = "not started"
	Working       = "working"
	ChecksPassing = "checks passing"
	Solved        = "solved"
)

// Status is where a learner stands with one scenario.
type Status struct {
	ScenarioID string
	// State is NotStarted, Working (an attempt is running or errored),
	// ChecksPassing (its last check run passed, but the learner has not
	// had it checked yet) or Solved (an attempt passed).
	State string
	// Attempts counts the learner's attempts; Latest is the newest (nil:
	// none).
	Attempts int
	Latest   *Attempt
	// BestScore is the best score of any attempt, of MaxScore.
	BestScore, MaxScore int
	// HintsUsed are the hints shown in the attempt that passed, or else in
	// the latest one.
	HintsUsed int
	// LastCheck is when the checks last ran in any attempt;
	// LastCheckPassed their verdict.
	LastCheck       time.Time
	LastCheckPassed bool
	// Solved is when the first attempt that passed finished (zero: not
	// solved).
	Solved time.Time
}

// Progress is learner's status for every scenario of the catalog (and any
// other scenario they attempted), by scenario id.
func (m *Manager) Progress(ctx context.Context, learner string) (map[string]Status, error) {
	if learner == "" {
		learner = store.LocalLearner
	}
	list, err := m.store.Attempts(ctx, store.AttemptFilter{Learner: learner})
	if err != nil {
		return nil, err
	}
	out := map[string]Status{}
	for _, s := range m.catalog.Scenarios {
		out[s.ID] = Status{ScenarioID: s.ID, State: NotStarted}
	}
	var passedBy = map[string]*Attempt{}
	for _, rec := range list { // newest first
		a := fromStore(rec)
		st, ok := out[a.ScenarioID]
		if !ok {
			if m.catalog.Get(a.ScenarioID) == nil && a.State == StateErrored && rec.CheckRuns == 0 {
				continue // an attempt at a scenario that does not exist
			}
			st = Status{ScenarioID: a.ScenarioID, State: NotStarted}
		}
		st.Attempts++
		if st.Latest == nil {
			st.Latest = a
			switch a.State {
			case StateRunning, StateErrored:
				st.State = Working
				if a.LastCheckPassed {
					st.State = ChecksPassing
				}
			}
		}
		if a.MaxScore > 0 && (st.MaxScore == 0 || a.Score*st.MaxScore > st.BestScore*a.MaxScore) {
			st.BestScore, st.MaxScore = a.Score, a.MaxScore
		}
		if a.LastCheck.After(st.LastCheck) {
			st.LastCheck, st.LastCheckPassed = a.LastCheck, a.LastCheckPassed
		}
		if a.State == StatePassed {
			st.State, st.Solved = Solved, a.Finished
			passedBy[a.ScenarioID] = a
		}
		out[a.ScenarioID] = st
	}
	for id, st := range out {
		switch {
		case passedBy[id] != nil:
			st.HintsUsed = passedBy[id].HintsShown
		case st.Latest != nil:
			st.HintsUsed = st.Latest.HintsShown
		}
		out[id] = st
	}
	return out, nil
}
