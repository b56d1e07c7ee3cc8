package attempt

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

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

// run runs the learner's command cmd ("start", "check", ...) on scenario
// id with a new Manager on the fakes of e, as a new svclab process would.
func (e *testEnv) run(cmd, id, clusterName string) (string, error) {
	m, _ := e.manager()
	ctx := context.Background()
	var out bytes.Buffer
	var err error
	switch cmd {
	case "start":
		err = RunStart(ctx, m, &out, store.LocalLearner, id, clusterName)
	case "check":
		err = RunCheck(ctx, m, &out, store.LocalLearner, id)
	case "hint":
		err = RunHint(ctx, m, &out, store.LocalLearner, id)
	case "solve":
		err = RunSolve(ctx, m, &out, store.LocalLearner, id)
	case "reset":
		err = RunReset(ctx, m, &out, store.LocalLearner, id)
	case "abandon":
		err = RunAbandon(ctx, m, &out, store.LocalLearner, id)
	case "status":
		err = RunStatus(ctx, m, &out, store.LocalLearner)
	case "history":
		err = RunHistory(ctx, m, &out, store.LocalLearner, id)
	default:
		e.t.Fatalf("no command %q", cmd)
	}
	return out.String(), err
}

// The learner's commands, each in a new process: start, a failing check
// (session.ErrNotPassed, exit 1), hint, solve, a passing check, status.
func TestCommands(t *testing.T) {
	e := newTestEnv(t)
	steps := []struct {
		cmd, id, cluster string
		exitCode         int
		want             []string
	}{
		{"check", "selector-typo", "", -1, []string{"you have not started scenario selector-typo: svclab scenario start selector-typo"}},
		{"start", "selector-typo", "lab", 0, []string{"Scenario selector-typo: A Service that refuses every connection", "✓ Applying the setup manifests", "── Task ──", "Attempt 1 on cluster lab: svclab kubectl --name lab", "svclab scenario check selector-typo"}},
		{"check", "selector-typo", "", 1, []string{" ✗ slice-has-ready-endpoints 2 The Service's EndpointSlice", "Score: 0% (0 of 9 points) — not yet", "Hint 1:", "Stuck? svclab scenario hint selector-typo"}},
		{"hint", "selector-typo", "", 0, []string{"Hint 2 of 3:"}},
		{"hint", "selector-typo", "", 0, []string{"Hint 3 of 3:\n The selector asks for `app=wbe`"}},
		{"hint", "selector-typo", "", 0, []string{"You have seen all 3 hints. Here they are again:", "Hint 1 of 3:", "svclab scenario solve selector-typo"}},
		{"solve", "selector-typo", "", 0, []string{"── Reference solution of selector-typo on cluster lab ──", "$ /opt/svclab-kube kubectl patch", "Now grade it: svclab scenario check selector-typo"}},
		{"check", "selector-typo", "", 0, []string{"Score: 100% (9 of 9 points) — passed", "── Explanation ──", "**What broke.**"}},
		{"status", "", "", 0, []string{"selector-typo solved 100% (9 of 9 points) 3 1 0s ago, passed lab", "targetport-mismatch not started - 0 0 - -"}},
		{"history", "selector-typo", "", 0, []string{"Attempt 1 at selector-typo on cluster lab: passed", "learner 0% (0 of 9 points) failed slice-has-ready-endpoints selector-matches-pods clusterip-answers rules-forward-to-endpoints service-kept pod-labels-kept\n2 ", "learner 100% (9 of 9 points) passed"}},
		{"reset", "selector-typo", "", 0, []string{"Removing attempt 1 from cluster lab", "Attempt 2 on cluster lab"}},
		{"abandon", "selector-typo", "", 0, []string{"Attempt 2 at selector-typo abandoned and removed from cluster lab."}},
		{"hint", "selector-typo", "", -1, []string{"your last attempt at selector-typo (2) was abandoned: svclab scenario start selector-typo"}},
		{"start", "nope", "lab", -1, []string{`there is no scenario "nope"`}},
		{"start", "selector-typo", "Bad_Name", -1, []string{"is not valid"}},
	}
	for _, step := range steps {
		out, err := e.run(step.cmd, step.id, step.cluster)
		code := 0
		switch {
		case errors.Is(err, session.ErrNotPassed):
			code = 1
		case err != nil:
			code = -1
			out += err.Error()
		}
		if code != step.exitCode {
			t.Errorf("%s %s: exit %d (%v), want %d; output:\n%s", step.cmd, step.id, code, err, step.exitCode, out)
		}
		flat := spaces.ReplaceAllString(out, " ")
		for _, w := range step.want {
			if !strings.Contains(flat, w) {
				t.Errorf("%s %s: output lacks %q:\n%s", step.cmd, step.id, w, out)
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
