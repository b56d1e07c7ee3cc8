package grade

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/scenario"
)

// Grader evaluates checks against one cluster.
type Grader struct {
	Cluster cluster.Cluster
	// Objects reads the objects of api and rightFix checks.
	Objects Objects
	// PodExec runs probe commands in Pods.
	PodExec PodExecutor
	// CheckTimeout bounds each check (default 30s).
	CheckTimeout time.Duration
	// MaxExecs bounds the commands (probes, rule dumps) that run at once
	// on nodes and in Pods (default DefaultMaxExecs).
	MaxExecs int
	Log      *slog.Logger

	mu   sync.Mutex
	cs   kubernetes.Interface // the cluster's client, made once
	sem  chan struct{}        // MaxExecs slots
	once sync.Once
}

// DefaultMaxExecs is the default of Grader.MaxExecs: enough for every probe
// of a scenario and a dataplane check's nodes at once, few enough that a
// grading does not swamp a small machine with shells.
const DefaultMaxExecs = 6

// New returns a Grader for c that reads objects with the dynamic client
// and runs commands in Pods through the exec subresource.
func New(c cluster.Cluster, log *slog.Logger) (*Grader, error) {
	objs, err := NewObjects(c)
	if err != nil {
		return nil, err
	}
	pe, err := NewPodExecutor(c)
	if err != nil {
		return nil, err
	}
	return &Grader{Cluster: c, Objects: objs, PodExec: pe, Log: log, cs: pe.Client}, nil
}

func (g *Grader) log() *slog.Logger {
	if g.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return g.Log
}

// client returns the cluster's client; every check of every grading
// shares it (and its connections to the API server).
func (g *Grader) client() (kubernetes.Interface, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cs != nil {
		return g.cs, nil
	}
	cs, err := g.Cluster.Client()
	if err != nil {
		return nil, fmt.Errorf("connecting to cluster %s: %w", g.Cluster.Name(), err)
	}
	g.cs = cs
	return cs, nil
}

// acquire takes one of the MaxExecs slots for a command on a node or in a
// Pod; release gives it back.
func (g *Grader) acquire(ctx context.Context) (release func(), err error) {
	g.once.Do(func() {
		n := g.MaxExecs
		if n <= 0 {
			n = DefaultMaxExecs
		}
		g.sem = make(chan struct{}, n)
	})
	select {
	case g.sem <- struct{}{}:
		return func() { <-g.sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// nodeExec runs cmd on node within the MaxExecs bound.
func (g *Grader) nodeExec(ctx context.Context, node string, cmd []string, stdio cluster.Stdio) error {
	release, err := g.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	return g.Cluster.NodeExec(ctx, node, cmd, stdio)
}

// podExec runs cmd in a Pod's container within the MaxExecs bound.
func (g *Grader) podExec(ctx context.Context, namespace, pod, container string, cmd []string, stdout, stderr io.Writer) error {
	release, err := g.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	return g.PodExec.Exec(ctx, namespace, pod, container, cmd, stdout, stderr)
}

// Result is the outcome of one check.
type Result struct {
	ID          string  `json:"id"`
	Kind        string  `json:"kind"`
	Description string  `json:"description"`
	Weight      float64 `json:"weight"`
	Passed      bool    `json:"passed"`
	// Message is for the learner: the description when the check passed,
	// else the check's failMessage (or a generated one).
	Message string `json:"message"`
	// Detail is what the grader observed ("20 of 20 requests were
	// refused"; "lab-worker2: drop").
	Detail string `json:"detail,omitempty"`
	// Expected is what the check wanted where that is a value the
	// scenario's check names (`expected "web"`): it can give the fix away,
	// so it is kept apart from Detail and shown as the attempt allows (see
	// lab/attempt: once the hint that names it was shown, or once solved).
	Expected string `json:"expected,omitempty"`
	// ExpectedAfterHint, when set, says that Expected was withheld until
	// that hint (1-based; the scenario's last when the check names none).
	ExpectedAfterHint int `json:"expectedAfterHint,omitempty"`
	// Error is set when the check could not be evaluated (the cluster did
	// not answer, an object the probe needs is missing...); the check
	// counts as failed.
	Error string `json:"error,omitempty"`
	// NotChecked is set on a disruptive check that a passive grade left
	// out (see Passive): not passed, but no verdict either, so it unlocks
	// no hint.
	NotChecked  bool          `json:"notChecked,omitempty"`
	UnlocksHint int           `json:"unlocksHint,omitempty"`
	Duration    time.Duration `json:"duration"`
}

// Report is the outcome of grading a scenario.
type Report struct {
	Scenario string   `json:"scenario"`
	Results  []Result `json:"results"`
	// Score is the passed checks' share of the total weight, 0 to 100.
	Score float64 `json:"score"`
	// Passed is true when every check passed.
	Passed bool `json:"passed"`
	// UnlockedHints are the 1-based hints that failed checks unlock,
	// sorted.
	UnlockedHints []int         `json:"unlockedHints,omitempty"`
	Duration      time.Duration `json:"duration"`
}

// Failed returns the results of the checks that failed.
func (r *Report) Failed() []Result {
	var out []Result
	for _, res := range r.Results {
		if !res.Passed {
			out = append(out, res)
		}
	}
	return out
}

// Result returns the result of the check id.
func (r *Report) Result(id string) (Result, bool) {
	for _, res := range r.Results {
		if res.ID == id {
			return res, true
		}
	}
	return Result{}, false
}

// Grade evaluates every check of s concurrently. base holds what the
// rightFix checks compare with (Record); it may be nil when s has none.
func (g *Grader) Grade(ctx context.Context, s *scenario.Scenario, base *Baseline) *Report {
	start := time.Now()
	ctx = withWorkloads(ctx, s)
	rep := &Report{Scenario: s.ID, Results: make([]Result, len(s.Checks))}
	var wg sync.WaitGroup
	for i := range s.Checks {
		if s.Checks[i].Disruptive() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep.Results[i] = g.Check(ctx, &s.Checks[i], base)
		}()
	}
	wg.Wait()
	// The checks that change the cluster go after the others, one at a
	// time, and only when the learner asked for the grade.
	for i := range s.Checks {
		c := &s.Checks[i]
		if !c.Disruptive() {
			continue
		}
		if isPassive(ctx) {
			rep.Results[i] = Result{ID: c.ID, Kind: c.Kind(), Description: c.Description, Weight: c.Weight, UnlocksHint: c.UnlocksHint,
				Message: c.Description, NotChecked: true, Detail: "not checked yet: this check " + disruption(c) + ", so it runs only when you ask for a grade"}
			continue
		}
		rep.Results[i] = g.Check(ctx, c, base)
	}
	var total, passed float64
	rep.Passed = true
	for _, r := range rep.Results {
		total += r.Weight
		if r.Passed {
			passed += r.Weight
			continue
		}
		rep.Passed = false
		if r.UnlocksHint > 0 && !r.NotChecked && !slices.Contains(rep.UnlockedHints, r.UnlocksHint) {
			rep.UnlockedHints = append(rep.UnlockedHints, r.UnlocksHint)
		}
	}
	slices.Sort(rep.UnlockedHints)
	if total > 0 {
		rep.Score = 100 * passed / total
	}
	rep.Duration = time.Since(start)
	if log := g.log(); log.Enabled(ctx, slog.LevelDebug) {
		for _, r := range rep.Results {
			log.Debug("check graded", "scenario", s.ID, "check", r.ID, "kind", r.Kind, "passed", r.Passed, "duration", r.Duration)
		}
	}
	g.log().Debug("graded", "scenario", s.ID, "score", rep.Score, "duration", rep.Duration)
	return rep
}

type passiveKey struct{}

// Passive marks ctx for a grade that must not change the cluster (the
// background evaluation while the learner works): Grade reports the
// disruptive checks as not checked yet (NotChecked, not passed).
func Passive(ctx context.Context) context.Context { return context.WithValue(ctx, passiveKey{}, true) }

func isPassive(ctx context.Context) bool { v, _ := ctx.Value(passiveKey{}).(bool); return v }

// disruption says what a disruptive check does to the cluster.
func disruption(c *scenario.Check) string {
	if c.Probe != nil && c.Probe.During != nil && c.Probe.During.RolloutRestart != nil {
		r := c.Probe.During.RolloutRestart
		ns := r.Namespace
		if ns == "" {
			ns = "default"
		}
		return "restarts the Deployment " + ns + "/" + r.Deployment + " and watches the requests meanwhile"
	}
	if c.Dataplane != nil && c.Dataplane.Follows != nil {
		return "makes a Service of its own and watches the nodes' rules follow it"
	}
	return "changes the cluster"
}

// errFailed is returned by check kinds for an evaluated check that did not
// pass; its text is the observed detail.
type failure struct{ detail, expected string }

func (f *failure) Error() string { return f.detail }

func failf(format string, args ...any) error { return &failure{detail: fmt.Sprintf(format, args...)} }

// failExpected is a failure whose expectation is a value the scenario
// names (Result.Expected).
func failExpected(observed, expected string) error {
	return &failure{detail: observed, expected: expected}
}

// Full is what the check observed and, unless withheld, what it expected.
func (r Result) Full() string {
	if r.Expected == "" {
		return r.Detail
	}
	if r.Detail == "" {
		return r.Expected
	}
	return r.Detail + "; " + r.Expected
}

// Check evaluates one check.
func (g *Grader) Check(ctx context.Context, c *scenario.Check, base *Baseline) Result {
	start := time.Now()
	res := Result{ID: c.ID, Kind: c.Kind(), Description: c.Description, Weight: c.Weight, UnlocksHint: c.UnlocksHint}
	timeout := g.CheckTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	if c.Disruptive() {
		timeout = max(timeout, DisruptiveCheckTimeout)
	}
	if c.Probe != nil && c.Probe.From.Witness != nil {
		// Its witness starts first, on a machine that may be busy.
		timeout += witnessStart
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var detail string
	var err error
	switch {
	case c.API != nil:
		detail, err = g.api(ctx, c.API)
	case c.Probe != nil:
		detail, err = g.probe(ctx, c.Probe)
	case c.Dataplane != nil:
		detail, err = g.dataplane(ctx, c.Dataplane, base)
	case c.RightFix != nil:
		detail, err = g.rightFix(ctx, c, base)
	case c.Answer != nil:
		detail, err = g.answer(ctx, c)
	case c.KubeProxyConfig != nil:
		detail, err = g.kubeProxyConfig(ctx, c.KubeProxyConfig)
	default:
		err = errors.New("the check sets none of api, probe, dataplane, rightFix, answer and kubeProxyConfig")
	}
	res.Duration = time.Since(start)
	var f *failure
	switch {
	case err == nil:
		res.Passed, res.Message, res.Detail = true, c.Description, detail
		return res
	case errors.As(err, &f):
		res.Detail, res.Expected = f.detail, f.expected
	default:
		if ctx.Err() != nil {
			err = fmt.Errorf("the check did not finish within %s: %w", timeout, err)
		}
		res.Error = err.Error()
		res.Detail = "could not check: " + err.Error()
	}
	res.Message = c.FailMessage
	if res.Message == "" {
		res.Message = "Not yet: " + c.Description
	}
	g.log().Debug("check failed", "check", c.ID, "detail", res.Detail)
	return res
}

// Points are the weights of the passed checks and of all checks.
func (r *Report) Points() (got, total float64) {
	for _, res := range r.Results {
		total += res.Weight
		if res.Passed {
			got += res.Weight
		}
	}
	return got, total
}

// ScoreText is the report's score as svclab writes it everywhere: the
// command line, the scenario page, the timeline (FormatScore).
func (r *Report) ScoreText() string { return FormatScore(r.Points()) }

// FormatScore writes a score of got points out of total: "22% (2 of 9
// points)". Every place that shows a learner a score uses it.
func FormatScore(got, total float64) string {
	if total <= 0 {
		return "no checks"
	}
	unit := "points"
	if total == 1 {
		unit = "point"
	}
	return fmt.Sprintf("%.0f%% (%g of %g %s)", 100*got/total, got, total, unit)
}
