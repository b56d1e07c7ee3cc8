package attempt

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/session"
	"github.com/svclab/svclab/lab/store"
)

// spaces are runs of spaces, which tables vary with the catalog.
var spaces = regexp.MustCompile(` +`)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (go test -update rewrites it):\n%s", name, path, got)
	}
}

// runCommand runs "scenario ARGS" with the fakes of e, as a new svclab
// process would.
func (e *testEnv) runCommand(args ...string) (string, error) {
	root := &cobra.Command{Use: "scenario", SilenceErrors: true, SilenceUsage: true}
	AddCommands(root, Env{
		StateDir: func() string { return filepath.Dir(e.path) },
		Provider: func() (cluster.Provider, error) { return e.provider, nil },
		Log:      func() *slog.Logger { return slog.New(slog.DiscardHandler) },
		Customize: func(o *Options) {
			o.Catalog, o.Problems, o.Runner = e.catalog, e.problems, fakeRunner{e.w}
			o.KubeBin = func(context.Context) (string, error) { return "/opt/svclab-kube", nil }
		},
	})
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// The commands, each in a new process: start, a failing check (exit 1),
// hint, solve, a passing check (exit 0), status.
func TestCommands(t *testing.T) {
	e := newTestEnv(t)
	steps := []struct {
		args     []string
		exitCode int
		want     []string
	}{
		{[]string{"check", "selector-typo"}, -1, []string{"you have not started scenario selector-typo: svclab scenario start selector-typo"}},
		{[]string{"start", "selector-typo"}, 0, []string{"Scenario selector-typo: A Service that refuses every connection", "✓ Applying the setup manifests", "── Task ──", "Attempt 1 on cluster lab: svclab kubectl --name lab", "svclab scenario check selector-typo"}},
		{[]string{"check", "selector-typo"}, 1, []string{" ✗ slice-has-ready-endpoints 2 The Service's EndpointSlice", "Score: 0% (0 of 9 points) — not yet", "Hint 1:", "Stuck? svclab scenario hint selector-typo"}},
		{[]string{"hint", "selector-typo"}, 0, []string{"Hint 2 of 3:"}},
		{[]string{"hint", "selector-typo"}, 0, []string{"Hint 3 of 3:\n The selector asks for `app=wbe`"}},
		{[]string{"hint", "selector-typo"}, 0, []string{"You have seen all 3 hints. Here they are again:", "Hint 1 of 3:", "svclab scenario solve selector-typo"}},
		{[]string{"solve", "selector-typo"}, 0, []string{"── Reference solution of selector-typo on cluster lab ──", "$ /opt/svclab-kube kubectl patch", "Now grade it: svclab scenario check selector-typo"}},
		{[]string{"check", "selector-typo"}, 0, []string{"Score: 100% (9 of 9 points) — passed", "── Explanation ──", "**What broke.**"}},
		{[]string{"status"}, 0, []string{"selector-typo solved 100% (9 of 9 points) 3 1 0s ago, passed lab", "targetport-mismatch not started - 0 0 - -"}},
		{[]string{"history", "selector-typo"}, 0, []string{"Attempt 1 at selector-typo on cluster lab: passed", "learner 0% (0 of 9 points) failed slice-has-ready-endpoints selector-matches-pods clusterip-answers rules-forward-to-endpoints service-kept pod-labels-kept\n2 ", "learner 100% (9 of 9 points) passed"}},
		{[]string{"reset", "selector-typo"}, 0, []string{"Removing attempt 1 from cluster lab", "Attempt 2 on cluster lab"}},
		{[]string{"abandon", "selector-typo"}, 0, []string{"Attempt 2 at selector-typo abandoned and removed from cluster lab."}},
		{[]string{"hint", "selector-typo"}, -1, []string{"your last attempt at selector-typo (2) was abandoned: svclab scenario start selector-typo"}},
		{[]string{"start", "nope"}, -1, []string{`there is no scenario "nope"`}},
		{[]string{"start", "selector-typo", "--cluster", "Bad_Name"}, -1, []string{"is not valid"}},
	}
	for _, step := range steps {
		out, err := e.runCommand(step.args...)
		code := 0
		switch {
		case errors.Is(err, session.ErrNotPassed):
			code = 1
		case err != nil:
			code = -1
			out += err.Error()
		}
		if code != step.exitCode {
			t.Errorf("%v: exit %d (%v), want %d; output:\n%s", step.args, code, err, step.exitCode, out)
		}
		flat := spaces.ReplaceAllString(out, " ")
		for _, w := range step.want {
			if !strings.Contains(flat, w) {
				t.Errorf("%v: output lacks %q:\n%s", step.args, w, out)
			}
		}
	}
}

func TestPrintStatus(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	p := map[string]Status{
		"selector-typo": {ScenarioID: "selector-typo", State: Solved, Attempts: 2, BestScore: 9, MaxScore: 9, HintsUsed: 1,
			LastCheck: now.Add(-90 * time.Second), LastCheckPassed: true, Latest: &Attempt{Cluster: "lab", State: StatePassed}},
		"targetport-mismatch": {ScenarioID: "targetport-mismatch", State: Working, Attempts: 1, BestScore: 3, MaxScore: 8,
			LastCheck: now.Add(-3 * time.Hour), Latest: &Attempt{Cluster: "lab2", State: StateErrored, Error: "grading timed out (check clusterip-answers: ...)"}},
		"etp-local-drop": {ScenarioID: "etp-local-drop", State: NotStarted},
		"retired":        {ScenarioID: "retired", State: ChecksPassing, Attempts: 1, LastCheck: now.Add(-72 * time.Hour), LastCheckPassed: true, Latest: &Attempt{Cluster: "lab", State: StateRunning}},
	}
	cat := &scenario.Catalog{Scenarios: []*scenario.Scenario{{ID: "etp-local-drop"}, {ID: "selector-typo"}, {ID: "targetport-mismatch"}}}
	var out bytes.Buffer
	if err := printStatus(&out, cat, p, now); err != nil {
		t.Fatal(err)
	}
	golden(t, "status", out.String())
}

func TestPrintHistory(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	printHistory(&out, &Attempt{ID: 4, ScenarioID: "selector-typo", Cluster: "lab", State: StateErrored, Error: "grading timed out"}, []CheckRun{
		{At: at, Trigger: store.TriggerAuto, Score: 2, MaxScore: 9, Results: []store.CheckResult{{CheckID: "a", Passed: true}, {CheckID: "b"}, {CheckID: "c"}}},
		{At: at.Add(time.Minute), Trigger: store.TriggerLearner, Score: 9, MaxScore: 9, Passed: true},
	})
	printHistory(&out, &Attempt{ID: 5, ScenarioID: "selector-typo", Cluster: "lab", State: StateRunning}, nil)
	golden(t, "history", out.String())
}
