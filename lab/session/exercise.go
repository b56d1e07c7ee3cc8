package session

import (
	"bytes"
	"cmp"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/owner"
	"github.com/svclab/svclab/lab/faults"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/kubebin"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/scenarios"
)

// ExerciseOptions configure a self-grading run of several scenarios:
// "svclab exercise run [--all | ID...] --solve [--wrong-fixes]".
type ExerciseOptions struct {
	Provider cluster.Provider
	// Source holds the scenarios (default: the ones built into svclab).
	Source *scenario.Source
	// IDs are the scenarios to run, in this order; All runs every one.
	IDs []string
	All bool
	// Cluster is the base name of the clusters: scenarios of one cluster
	// shape share one cluster, named Cluster for the default shape (3
	// nodes, nftables, no extra labels) and Cluster plus a suffix for the
	// others. A cluster that does not exist is created, and deleted after
	// its scenarios unless Keep. Empty: clusters of the run's own, under a
	// random name.
	Cluster string
	Keep    bool
	// Owners claims the clusters while the run uses them, so that nobody
	// else's lab is used and nobody uses the run's (nil: no claims).
	// Backend names the provider's backend in the claims (default
	// embedded); Force takes clusters that others hold.
	Owners  *owner.Registry
	Backend string
	Force   bool
	// Solve runs the reference solution: the checks must pass afterwards.
	Solve bool
	// WrongFixes tries each of the scenario's wrong fixes on the broken
	// scenario: the checks they name must fail.
	WrongFixes bool
	// Strict is the author's proof (svclab scenario test): each wrong fix
	// must fail exactly the checks it names, no more, and every check must
	// flip (judgeFlips): a right-fix rule must fail under some wrong fix,
	// and a guard (a check that passes on the broken lab) that no wrong
	// fix breaks is reported.
	Strict bool
	// Attempts are extra attempts by scenario id, tried after each
	// scenario's own (svclab scenario test --wrong-fixes-from).
	Attempts map[string]scenario.Attempts
	// ProxyMode runs every scenario that does not name a proxy mode in
	// this one ("": nftables), whatever mode its cluster runs; scenarios
	// written for the other mode are skipped, saying so.
	ProxyMode string
	// NoResets skips what needs the scenario set up a second time: the
	// wrong fixes that have no undo and the other solutions. Every
	// scenario is still set up, graded broken, tried with its other wrong
	// fixes and solved: a quicker run for a busy CI.
	NoResets bool
	// KubeBin finds svclab-kube (default kubebin.Locate).
	KubeBin func(ctx context.Context) (string, error)
	// Out receives the progress, the failures and the summary table.
	Out io.Writer
	Log *slog.Logger
	// Faults are the fault implementations (nil: faults.Registry()).
	Faults *scenario.Registry
	// Svclab runs svclab in solutions and wrong fixes (Options.Svclab).
	Svclab []string
	// Parallel is how many clusters work at once (0 or 1: one after the
	// other). With more, the scenarios of a large shape are dealt out to
	// several clusters of that shape (the first keeps the shape's name,
	// the others get "-2", "-3" appended) so that none has more than the
	// run's scenarios over Parallel; Out gets whole lines, each prefixed
	// with its cluster's name.
	Parallel int
}

// Outcome is what one scenario's run showed.
type Outcome struct {
	Scenario string
	Cluster  string
	Steps    []Step
	Duration time.Duration
}

// Passed is true when every step passed.
func (o *Outcome) Passed() bool {
	for _, s := range o.Steps {
		if !s.Passed {
			return false
		}
	}
	return len(o.Steps) > 0
}

// Step is one step of a scenario's run: "set up", "broken", "wrong fix
// ID", "solution", "tear down".
type Step struct {
	Name   string
	Passed bool
	// Detail says what was seen: the failing checks, the score, an error.
	Detail   string
	Duration time.Duration
	// Report is the grade of the step, when it graded.
	Report *grade.Report `json:"-"`
}

// maxGradeDuration is the budget of one grading: probes expecting success
// must not need more; a probe that meets a DROP (and expects success)
// takes its timeout on top.
const maxGradeDuration = 3 * time.Second

// Exercise runs the scenarios: for each, set up → the checks must fail →
// (wrong fixes must be rejected) → (the solution must pass) → tear down.
// Scenarios of one cluster shape share a cluster. It returns one outcome
// per scenario; err is about the run as a whole (no such scenario, a
// cluster that cannot be created).
func Exercise(ctx context.Context, o ExerciseOptions) ([]Outcome, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Faults == nil {
		o.Faults = faults.Registry()
	}
	if o.KubeBin == nil {
		o.KubeBin = func(ctx context.Context) (string, error) { return kubebin.Locate(ctx, nil) }
	}
	if !o.Solve && !o.WrongFixes {
		return nil, errors.New("a run of several scenarios grades by itself: pass --solve, --wrong-fixes or both")
	}
	list, err := selectScenarios(o)
	if err != nil {
		return nil, err
	}
	if list, err = applyRunOptions(o, list); err != nil {
		return nil, err
	}
	if o.All && o.Backend != "" && o.Backend != "embedded" {
		// Every scenario means every one this backend can run.
		list = slices.DeleteFunc(list, func(s *scenario.Scenario) bool {
			if s.Cluster.EmbeddedOnly != "" {
				fmt.Fprintf(o.Out, "– %s: skipped, embedded clusters only: %s\n", s.ID, s.Cluster.EmbeddedOnly)
				return true
			}
			return false
		})
	}
	bin, err := o.KubeBin(ctx)
	if err != nil {
		return nil, err
	}
	if o.Cluster == "" {
		if o.Cluster, err = ownClusterBase(ctx, o.Provider); err != nil {
			return nil, err
		}
	}
	groups, err := groupByShape(o.Cluster, list)
	if err != nil {
		return nil, err
	}
	if o.Parallel <= 1 {
		var outcomes []Outcome
		for _, g := range groups {
			out, err := exerciseGroup(ctx, o, g, bin)
			outcomes = append(outcomes, out...)
			if err != nil {
				return outcomes, err
			}
		}
		return outcomes, ctx.Err()
	}
	if groups, err = spreadGroups(groups, o.Parallel); err != nil {
		return nil, err
	}
	results := make([][]Outcome, len(groups))
	errs := make([]error, len(groups))
	var mu sync.Mutex
	sem := make(chan struct{}, o.Parallel)
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			og := o
			w := &lineWriter{mu: &mu, w: o.Out, prefix: "[" + g.cluster + "] "}
			og.Out = w
			results[i], errs[i] = exerciseGroup(ctx, og, g, bin)
			w.Flush()
		}()
	}
	wg.Wait()
	// The outcomes in the order of the scenarios asked for.
	byID := map[string]Outcome{}
	for _, out := range results {
		for _, o := range out {
			byID[o.Scenario] = o
		}
	}
	var outcomes []Outcome
	for _, s := range list {
		if o, ok := byID[s.ID]; ok {
			outcomes = append(outcomes, o)
		}
	}
	return outcomes, errors.Join(append(errs, ctx.Err())...)
}

// spreadGroups deals the scenarios of large groups out to more clusters
// of their shape, so that no cluster has more than its share of the run
// (the scenarios over n, rounded up), and orders the groups largest first,
// the order in which they start when n work at once. The first cluster of
// a shape keeps its name; the others get "-2", "-3" appended.
func spreadGroups(groups []*shapeGroup, n int) ([]*shapeGroup, error) {
	total := 0
	for _, g := range groups {
		total += len(g.scenarios)
	}
	share := max(1, (total+n-1)/n)
	var out []*shapeGroup
	for _, g := range groups {
		split := make([]*shapeGroup, (len(g.scenarios)+share-1)/share)
		for k := range split {
			name := g.cluster
			if k > 0 {
				name = fmt.Sprintf("%s-%d", g.cluster, k+1)
				if err := cluster.ValidateName(name); err != nil {
					return nil, fmt.Errorf("the cluster for scenarios of shape %s: %w (use a shorter --cluster)", describeShape(g.shape), err)
				}
			}
			split[k] = &shapeGroup{cluster: name, shape: g.shape}
		}
		for j, s := range g.scenarios {
			split[j%len(split)].scenarios = append(split[j%len(split)].scenarios, s)
		}
		out = append(out, split...)
	}
	slices.SortStableFunc(out, func(a, b *shapeGroup) int { return len(b.scenarios) - len(a.scenarios) })
	return out, nil
}

// lineWriter writes whole lines to w, each with a prefix, under a lock
// shared with the writers of the other clusters.
type lineWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	if i := bytes.LastIndexByte(l.buf, '\n'); i >= 0 {
		l.emit(l.buf[:i+1])
		l.buf = append(l.buf[:0], l.buf[i+1:]...)
	}
	return len(p), nil
}

// Flush writes what is left of the last line.
func (l *lineWriter) Flush() {
	if len(l.buf) > 0 {
		l.emit(append(l.buf, '\n'))
		l.buf = l.buf[:0]
	}
}

func (l *lineWriter) emit(lines []byte) {
	var b bytes.Buffer
	for _, line := range bytes.SplitAfter(lines, []byte("\n")) {
		if len(line) > 0 {
			b.WriteString(l.prefix)
			b.Write(line)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(b.Bytes())
}

// exerciseGroup runs the scenarios of one cluster shape on their cluster,
// claimed for the run while it runs.
func exerciseGroup(ctx context.Context, o ExerciseOptions, g *shapeGroup, bin string) ([]Outcome, error) {
	fmt.Fprintf(o.Out, "── Cluster %s (%s): %s ──\n", g.cluster, describeShape(g.shape), strings.Join(ids(g.scenarios), ", "))
	failed := func(err error) []Outcome {
		var outcomes []Outcome
		for _, s := range g.scenarios {
			outcomes = append(outcomes, Outcome{Scenario: s.ID, Cluster: g.cluster,
				Steps: []Step{{Name: "cluster", Detail: err.Error()}}})
		}
		fmt.Fprintf(o.Out, "✗ cluster %s: %v\n", g.cluster, err)
		return outcomes
	}
	lease, err := claimCluster(ctx, o.Owners, o.Backend, g.cluster, o.Force)
	if err != nil {
		return failed(err), nil
	}
	defer lease.Release()
	c, created, err := EnsureCluster(ctx, o.Provider, g.cluster, g.shape, cluster.NewTextProgress(o.Out))
	if err != nil {
		return failed(err), nil
	}
	var outcomes []Outcome
	for _, s := range g.scenarios {
		if ctx.Err() != nil {
			break
		}
		outcomes = append(outcomes, exerciseOne(ctx, o, s, c, bin))
	}
	if created && !o.Keep {
		fmt.Fprintf(o.Out, "Deleting cluster %s\n", c.Name())
		if err := o.Provider.Delete(context.WithoutCancel(ctx), c.Name()); err != nil {
			return outcomes, fmt.Errorf("deleting cluster %s: %w", c.Name(), err)
		}
	} else if created {
		fmt.Fprintf(o.Out, "The cluster %s stays (--keep): svclab cluster delete --name %s deletes it\n", c.Name(), c.Name())
	}
	return outcomes, nil
}

func ids(ss []*scenario.Scenario) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.ID
	}
	return out
}

// selectScenarios loads the catalog and picks the scenarios to run.
func selectScenarios(o ExerciseOptions) ([]*scenario.Scenario, error) {
	src := scenarios.Source()
	if o.Source != nil {
		src = *o.Source
	}
	cat, problems := scenario.Load(scenario.Options{Faults: o.Faults, Logger: o.Log}, src)
	switch {
	case o.All && len(o.IDs) > 0:
		return nil, errors.New("name scenarios or pass --all, not both")
	case o.All:
		if err := problems.Err(); err != nil {
			return nil, fmt.Errorf("the scenarios have problems (svclab scenario lint):\n%w", err)
		}
		return runnable(o.Faults, cat.Scenarios)
	case len(o.IDs) == 0:
		return nil, fmt.Errorf("name the scenarios to run or pass --all; the scenarios are %s", strings.Join(cat.IDs(), ", "))
	}
	var out []*scenario.Scenario
	for _, id := range o.IDs {
		s := cat.Get(id)
		if s == nil {
			if len(problems) > 0 {
				return nil, fmt.Errorf("no valid scenario %q; svclab scenario lint shows %d problems (%v)", id, len(problems), problems[0])
			}
			return nil, fmt.Errorf("no scenario %q; the scenarios are %s (svclab scenario list)", id, strings.Join(cat.IDs(), ", "))
		}
		out = append(out, s)
	}
	return runnable(o.Faults, out)
}

// applyRunOptions gives the scenarios of a run their extra attempts and
// the run's proxy mode, skipping (and saying so) the scenarios written
// for the other mode.
func applyRunOptions(o ExerciseOptions, list []*scenario.Scenario) ([]*scenario.Scenario, error) {
	switch o.ProxyMode {
	case "", scenario.ProxyModeNFTables, scenario.ProxyModeIPTables:
	default:
		return nil, fmt.Errorf("proxy mode %q: give %s or %s", o.ProxyMode, scenario.ProxyModeNFTables, scenario.ProxyModeIPTables)
	}
	var out []*scenario.Scenario
	tried := map[string]bool{}
	for _, s := range list {
		// A scenario that names no mode runs in the run's (nftables by
		// default), whatever mode its cluster runs.
		run, err := s.WithProxyMode(cmp.Or(o.ProxyMode, s.Cluster.Mode()))
		if err != nil {
			fmt.Fprintf(o.Out, "– %s: skipped, written for %s mode\n", s.ID, s.Cluster.ProxyMode)
			continue
		}
		s = run
		if a, ok := o.Attempts[s.ID]; ok {
			s = s.WithAttempts(a)
			tried[s.ID] = true
		}
		out = append(out, s)
	}
	for _, id := range slices.Sorted(maps.Keys(o.Attempts)) {
		if !tried[id] {
			fmt.Fprintf(o.Out, "– the extra attempts for %s are not tried: %s is not in this run\n", id, id)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no scenario left to run")
	}
	return out, nil
}

// runnable refuses scenarios with a fault the library does not implement.
func runnable(reg *scenario.Registry, ss []*scenario.Scenario) ([]*scenario.Scenario, error) {
	for _, s := range ss {
		for _, f := range s.Faults {
			if _, err := faults.Lookup(reg, f.Name); err != nil {
				return nil, fmt.Errorf("scenario %s cannot run yet: %w", s.ID, err)
			}
		}
	}
	return ss, nil
}

// shapeGroup is the scenarios that share one cluster.
type shapeGroup struct {
	cluster   string
	shape     scenario.ClusterShape
	scenarios []*scenario.Scenario
}

// groupByShape puts scenarios of one shape together, in the order of each
// shape's first scenario.
func groupByShape(base string, ss []*scenario.Scenario) ([]*shapeGroup, error) {
	var groups []*shapeGroup
	byKey := map[string]*shapeGroup{}
	for _, s := range ss {
		key := shapeKey(s.Cluster)
		g, ok := byKey[key]
		if !ok {
			name := ShapeClusterName(base, s.Cluster)
			if err := cluster.ValidateName(name); err != nil {
				return nil, fmt.Errorf("the cluster for scenario %s: %w (use a shorter --cluster)", s.ID, err)
			}
			g = &shapeGroup{cluster: name, shape: s.Cluster}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.scenarios = append(g.scenarios, s)
	}
	return groups, nil
}

// shapeKey is what a cluster must have for scenarios of shape c: their
// nodes and node labels. Not the proxy mode: a scenario's set-up switches
// kube-proxy to its mode.
func shapeKey(c scenario.ClusterShape) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d", c.Nodes)
	for _, n := range slices.Sorted(maps.Keys(c.NodeLabels)) {
		for _, k := range slices.Sorted(maps.Keys(c.NodeLabels[n])) {
			fmt.Fprintf(&b, "/%s:%s=%s", n, k, c.NodeLabels[n][k])
		}
	}
	return b.String()
}

// ShapeClusterName is the cluster that scenarios of shape share, in
// either proxy mode: base for the default shape (3 nodes, no extra
// labels), else base with "-nN" (another node count) and "-zXXXX" (node
// labels, a hash) appended.
func ShapeClusterName(base string, c scenario.ClusterShape) string {
	name := base
	if c.Nodes != 3 {
		name += fmt.Sprintf("-n%d", c.Nodes)
	}
	if len(c.NodeLabels) > 0 {
		h := fnv.New32a()
		h.Write([]byte(shapeKey(c)))
		name += fmt.Sprintf("-z%04x", h.Sum32()&0xffff)
	}
	return name
}

func describeShape(c scenario.ClusterShape) string {
	s := fmt.Sprintf("%d nodes", c.Nodes)
	var labels []string
	for _, n := range slices.Sorted(maps.Keys(c.NodeLabels)) {
		for _, k := range slices.Sorted(maps.Keys(c.NodeLabels[n])) {
			labels = append(labels, fmt.Sprintf("%s %s=%s", n, k, c.NodeLabels[n][k]))
		}
	}
	if len(labels) > 0 {
		s += ", " + strings.Join(labels, ", ")
	}
	return s
}

// exerciseOne runs one scenario on c.
func exerciseOne(ctx context.Context, o ExerciseOptions, s *scenario.Scenario, c cluster.Cluster, bin string) (out Outcome) {
	began := time.Now()
	out = Outcome{Scenario: s.ID, Cluster: c.Name()}
	fmt.Fprintf(o.Out, "\n%s: %s\n", s.ID, s.Title)
	step := func(name string, f func() (string, *grade.Report, error)) bool {
		start := time.Now()
		detail, rep, err := f()
		st := Step{Name: name, Passed: err == nil, Detail: detail, Duration: time.Since(start), Report: rep}
		if err != nil {
			st.Detail = err.Error()
		}
		out.Steps = append(out.Steps, st)
		mark := "✓"
		if !st.Passed {
			mark = "✗"
		}
		fmt.Fprintf(o.Out, "  %s %s (%s): %s\n", mark, name, st.Duration.Round(100*time.Millisecond), firstLine(st.Detail))
		if !st.Passed && rep != nil {
			PrintReport(indentWriter{o.Out}, s, rep)
		}
		return st.Passed
	}
	opts := Options{Faults: o.Faults, Log: o.Log, Svclab: o.Svclab}
	var ses *Session
	setUp := func() (string, *grade.Report, error) {
		var err error
		ses, err = Start(ctx, s, c, opts)
		if err != nil {
			return "", nil, err
		}
		return "set up and broken", nil, nil
	}
	tearDown := func(waitGone bool) func() (string, *grade.Report, error) {
		return func() (string, *grade.Report, error) {
			if ses == nil {
				return "nothing to remove", nil, nil
			}
			err := ses.Teardown(context.WithoutCancel(ctx), waitGone)
			return "removed; cluster-wide changes put back", nil, err
		}
	}
	defer func() { out.Duration = time.Since(began) }()
	if !step("set up", setUp) {
		step("tear down", tearDown(false))
		return out
	}
	step("broken", func() (string, *grade.Report, error) {
		rep := ses.Grade(ctx)
		return judgeBroken(s, rep)
	})
	var resets []scenario.WrongFix
	if o.WrongFixes {
		for _, w := range s.WrongFixes {
			if len(w.Undo) == 0 {
				if !o.NoResets {
					resets = append(resets, w)
				}
				continue
			}
			step("wrong fix "+w.ID, func() (string, *grade.Report, error) {
				detail, rep, err := tryWrongFix(ctx, ses, w, bin, o.Strict)
				// Undo even a wrong fix that was not rejected: the next
				// steps need the broken scenario.
				for id := range w.Answers {
					_ = ses.SetAnswer(id, "")
				}
				var buf bytes.Buffer
				if uerr := ses.RunCommands(ctx, bin, w.Undo, &buf); uerr != nil {
					return detail, rep, errors.Join(err, fmt.Errorf("undoing it: %w\n%s", uerr, buf.String()))
				}
				return detail, rep, errors.Join(err, ses.afterCommands(ctx))
			})
		}
	}
	if o.Solve {
		step("solution", func() (string, *grade.Report, error) {
			var buf bytes.Buffer
			if err := ses.Solve(ctx, bin, &buf); err != nil {
				return "", nil, fmt.Errorf("%w\n%s", err, buf.String())
			}
			rep := ses.GradeUntilPassed(ctx, SolveGradeTimeout)
			if !rep.Passed {
				return "", rep, fmt.Errorf("the reference solution scores %.0f%%; its output:\n%s", rep.Score, buf.String())
			}
			return fmt.Sprintf("every check passes (graded in %s)", rep.Duration.Round(100*time.Millisecond)), rep, nil
		})
	}
	reset := func(what string) bool {
		return step("reset for "+what, func() (string, *grade.Report, error) {
			if _, _, err := tearDown(true)(); err != nil {
				return "", nil, err
			}
			return setUp()
		})
	}
	for _, w := range resets {
		if !reset("wrong fix " + w.ID) {
			break
		}
		step("wrong fix "+w.ID, func() (string, *grade.Report, error) { return tryWrongFix(ctx, ses, w, bin, o.Strict) })
	}
	if o.Solve && !o.NoResets {
		for _, sol := range s.OtherSolutions {
			if !reset("solution " + sol.ID) {
				break
			}
			step("solution "+sol.ID, func() (string, *grade.Report, error) {
				var buf bytes.Buffer
				if err := ses.SolveWith(ctx, bin, sol.Commands, &buf); err != nil {
					return "", nil, fmt.Errorf("%w\n%s", err, buf.String())
				}
				rep := ses.GradeUntilPassed(ctx, SolveGradeTimeout)
				if !rep.Passed {
					return "", rep, fmt.Errorf("%s, a right fix, scores %.0f%%; its output:\n%s", sol.Description, rep.Score, buf.String())
				}
				return fmt.Sprintf("%s: every check passes (graded in %s)", sol.Description, rep.Duration.Round(100*time.Millisecond)), rep, nil
			})
		}
	}
	if o.Strict && o.Solve && o.WrongFixes {
		var untried []scenario.WrongFix
		if o.NoResets {
			for _, w := range s.WrongFixes {
				if len(w.Undo) == 0 {
					untried = append(untried, w)
				}
			}
		}
		steps := slices.Clone(out.Steps)
		step("every check flips", func() (string, *grade.Report, error) { return judgeFlips(s, steps, untried) })
	}
	step("tear down", tearDown(false))
	return out
}

// judgeFlips checks that every check of s grades something: it failed on
// the broken lab or under a wrong fix (one of untried, wrong fixes not run,
// counts by what it declares) in steps. It notes the guards: checks that
// pass on the broken lab and fail under a wrong fix.
func judgeFlips(s *scenario.Scenario, steps []Step, untried []scenario.WrongFix) (string, *grade.Report, error) {
	failedIn := map[string][]string{}
	for _, st := range steps {
		if st.Report == nil || (st.Name != "broken" && !strings.HasPrefix(st.Name, "wrong fix ")) {
			continue
		}
		for _, r := range st.Report.Results {
			if !r.Passed && r.Error == "" {
				failedIn[r.ID] = append(failedIn[r.ID], st.Name)
			}
		}
	}
	for _, w := range untried {
		for _, id := range w.RejectedBy {
			failedIn[id] = append(failedIn[id], "wrong fix "+w.ID+" (not run: declared)")
		}
	}
	// A right-fix rule can always be broken (recreate the object, change
	// the field): one that never failed lacks its wrong fix. A guard (a
	// check that passes on the broken lab: the healthy node still
	// answers) may have no plausible wrong fix that breaks it; one that
	// never failed is reported, not failed.
	var never, guards, untested []string
	for _, c := range s.Checks {
		names := failedIn[c.ID]
		switch {
		case len(names) == 0 && c.Kind() == scenario.CheckRightFix:
			never = append(never, c.ID)
		case len(names) == 0:
			untested = append(untested, c.ID)
		case c.Kind() != scenario.CheckRightFix && !slices.Contains(names, "broken"):
			guards = append(guards, c.ID)
		}
	}
	detail := fmt.Sprintf("%d checks fail on the broken lab or under a wrong fix", len(s.Checks)-len(never)-len(untested))
	if len(guards) > 0 {
		detail += "; guards against wrong fixes (pass on the broken lab): " + strings.Join(guards, ", ")
	}
	if len(untested) > 0 {
		detail += "; guards that no wrong fix breaks (they grade nothing yet): " + strings.Join(untested, ", ")
	}
	if len(never) > 0 {
		return detail, nil, fmt.Errorf("right-fix rules never broken, so they grade nothing (no wrong fix breaks them): %s; declare a wrong fix that does", strings.Join(never, ", "))
	}
	return detail, nil, nil
}

// judgeBroken checks a grade of the freshly broken scenario: some check
// other than a right-fix rule fails, every right-fix rule passes (nothing
// was changed yet) and no check errs; a grading over its time budget is
// noted in the detail.
func judgeBroken(s *scenario.Scenario, rep *grade.Report) (string, *grade.Report, error) {
	var failing, problems []string
	for i, r := range rep.Results {
		kind := s.Checks[i].Kind()
		switch {
		case r.Error != "":
			problems = append(problems, fmt.Sprintf("check %s could not run: %s", r.ID, r.Error))
		case kind == scenario.CheckRightFix && !r.Passed:
			problems = append(problems, fmt.Sprintf("right-fix rule %s fails before anything was changed: %s", r.ID, r.Detail))
		case !r.Passed:
			failing = append(failing, r.ID)
		}
	}
	if len(failing) == 0 {
		problems = append(problems, "every check passes although the faults are in place")
	}
	detail := fmt.Sprintf("score %.0f%%, failing %s (graded in %s)", rep.Score, strings.Join(failing, ", "), rep.Duration.Round(100*time.Millisecond))
	// A grading slower than its budget is reported, not failed: on a busy
	// machine (CI, a classroom) it says nothing about the scenario.
	// BenchmarkGrade holds the budget on a quiet one.
	if budget := gradeBudget(s, true); rep.Duration > budget {
		detail += fmt.Sprintf("; grading took longer than its budget of %s", budget)
	}
	if len(problems) > 0 {
		return detail, rep, errors.New(detail + ": " + strings.Join(problems, "; "))
	}
	return detail, rep, nil
}

// disruptiveBudget is what a disruptive check adds to a grading's budget:
// the rollout it watches (three Pods replaced, each given a few seconds to
// stop).
const disruptiveBudget = 45 * time.Second

// gradeBudget is how long one grading of s may take: maxGradeDuration,
// plus, for the broken scenario, the longest wait of a probe that meets a
// DROP, plus disruptiveBudget per disruptive check.
func gradeBudget(s *scenario.Scenario, broken bool) time.Duration {
	budget := maxGradeDuration
	if broken {
		budget += maxDropWait(s)
	}
	for i := range s.Checks {
		if s.Checks[i].Disruptive() {
			budget += disruptiveBudget
		}
	}
	return budget
}

// maxDropWait is the longest time a probe of s waits for an answer that
// never comes (grade.DropWait): a probe that expects success and meets a
// DROP takes that long.
func maxDropWait(s *scenario.Scenario) time.Duration {
	var longest time.Duration
	for _, c := range s.Checks {
		if c.Probe != nil {
			longest = max(longest, grade.DropWait(c.Probe))
		}
	}
	return longest
}

// tryWrongFix runs a wrong fix's commands (a command the API server
// refuses is part of the lesson) and checks that the checks it names
// fail, each with a message for the learner; strict, that no other check
// fails.
func tryWrongFix(ctx context.Context, ses *Session, w scenario.WrongFix, bin string, strict bool) (string, *grade.Report, error) {
	var buf bytes.Buffer
	cmdErr := ses.RunCommands(ctx, bin, w.Commands, &buf)
	if err := ses.afterCommands(ctx); err != nil {
		return "", nil, err
	}
	for id, text := range w.Answers {
		fmt.Fprintf(&buf, "answer to %s: %s\n", id, text)
		if err := ses.SetAnswer(id, text); err != nil {
			return "", nil, err
		}
	}
	rep := ses.Grade(ctx)
	var problems, rejected []string
	if rep.Passed {
		problems = append(problems, "every check passes")
	}
	for _, id := range w.RejectedBy {
		r, ok := rep.Result(id)
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("no check %s", id))
		case r.Error != "":
			problems = append(problems, fmt.Sprintf("check %s could not run: %s", id, r.Error))
		case r.Passed:
			problems = append(problems, fmt.Sprintf("check %s passes", id))
		case strings.TrimSpace(r.Message) == "":
			problems = append(problems, fmt.Sprintf("check %s fails without a message", id))
		default:
			rejected = append(rejected, id)
		}
	}
	var undeclared string
	if strict {
		var more []string
		for _, r := range rep.Results {
			if !slices.Contains(w.RejectedBy, r.ID) && (!r.Passed || r.Error != "") {
				more = append(more, r.ID)
			}
		}
		if len(more) > 0 {
			undeclared = fmt.Sprintf("it also fails %s, which rejectedBy does not name (name them, or make the wrong fix do only what it says)", strings.Join(more, ", "))
		}
	}
	detail := fmt.Sprintf("%s: rejected by %s", w.Description, strings.Join(rejected, ", "))
	if cmdErr != nil {
		detail += " (the commands stopped: " + firstLine(cmdErr.Error()) + ")"
	}
	switch {
	case len(problems) > 0:
		if undeclared != "" {
			problems = append(problems, undeclared)
		}
		return detail, rep, fmt.Errorf("%s is not rejected: %s; commands:\n%s", w.Description, strings.Join(problems, "; "), buf.String())
	case undeclared != "":
		return detail, rep, fmt.Errorf("%s is rejected by more than it declares: %s; commands:\n%s", w.Description, undeclared, buf.String())
	}
	return detail, rep, nil
}

// afterCommands waits for what a learner's commands started: rollouts,
// terminations, then the proxiers' sync.
func (s *Session) afterCommands(ctx context.Context) error {
	cs, err := s.Cluster.Client()
	if err != nil {
		return err
	}
	if err := settle(ctx, cs, s.Scenario, false, s.opts.SettleTimeout); err != nil {
		return err
	}
	return waitDataplane(ctx, s.Cluster, cs)
}

type indentWriter struct{ w io.Writer }

func (iw indentWriter) Write(p []byte) (int, error) {
	s := strings.ReplaceAll(string(p), "\n", "\n    ")
	_, err := io.WriteString(iw.w, s)
	return len(p), err
}

// PrintSummary writes one line per scenario: result, cluster, steps, time.
func PrintSummary(w io.Writer, outcomes []Outcome) {
	fmt.Fprintf(w, "\n── Summary ──\n\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, " \tSCENARIO\tCLUSTER\tSTEPS\tTIME\tFAILED STEPS\n")
	passed := 0
	var total time.Duration
	for _, o := range outcomes {
		mark, ok := "✓", 0
		var failed []string
		for _, s := range o.Steps {
			if s.Passed {
				ok++
			} else {
				failed = append(failed, s.Name)
			}
		}
		if !o.Passed() {
			mark = "✗"
		} else {
			passed++
		}
		total += o.Duration
		fmt.Fprintf(tw, " %s\t%s\t%s\t%d/%d\t%s\t%s\n", mark, o.Scenario, o.Cluster, ok, len(o.Steps), o.Duration.Round(time.Second), strings.Join(failed, ", "))
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d of %d scenarios passed in %s\n", passed, len(outcomes), total.Round(time.Second))
}

// JUnit XML, as CI systems read it.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Time     float64     `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      float64       `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the outcomes as JUnit XML: a test suite per scenario,
// a test case per step.
func WriteJUnit(w io.Writer, outcomes []Outcome) error {
	var doc junitSuites
	for _, o := range outcomes {
		suite := junitSuite{Name: o.Scenario, Time: o.Duration.Seconds()}
		for _, s := range o.Steps {
			c := junitCase{Name: s.Name, Classname: "svclab.exercise." + o.Scenario, Time: s.Duration.Seconds()}
			if s.Passed {
				c.SystemOut = s.Detail
			} else {
				suite.Failures++
				text := s.Detail
				if s.Report != nil {
					var b strings.Builder
					PrintReport(&b, &scenario.Scenario{}, s.Report)
					text += "\n" + b.String()
				}
				c.Failure = &junitFailure{Message: firstLine(s.Detail), Text: text}
			}
			suite.Cases = append(suite.Cases, c)
		}
		suite.Tests = len(suite.Cases)
		doc.Suites = append(doc.Suites, suite)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// WriteJUnitFile writes the JUnit XML to path.
func WriteJUnitFile(path string, outcomes []Outcome) error {
	var b bytes.Buffer
	if err := WriteJUnit(&b, outcomes); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the JUnit report: %w", err)
	}
	return nil
}
