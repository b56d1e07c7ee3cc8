package attempt

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/owner"
	"github.com/svclab/svclab/lab/embedded"
	"github.com/svclab/svclab/lab/kubebin"
	"github.com/svclab/svclab/lab/roles"
	"github.com/svclab/svclab/lab/session"
	"github.com/svclab/svclab/lab/store"
)

func TestMain(m *testing.M) {
	roles.Dispatch()
	os.Exit(m.Run())
}

// A learner's way through selector-typo on a real embedded cluster, every
// step in a new Manager as in a new svclab process: start (creating the
// cluster) → a check that fails (exit code 1) → hint → the reference
// solution → a check that passes → status says solved → the database holds
// the attempt and its check runs.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	if err := embedded.Preflight(); err != nil {
		t.Skipf("end-to-end test: %v", err)
	}
	ctx := context.Background()
	if _, err := kubebin.Locate(ctx, nil); err != nil {
		t.Skipf("end-to-end test: %v", err)
	}
	stateDir := t.TempDir()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	provider := embedded.New(stateDir, log)
	b := make([]byte, 3)
	rand.Read(b)
	name := "at-" + hex.EncodeToString(b)
	t.Cleanup(func() {
		if err := provider.Delete(context.Background(), name); err != nil && !errors.Is(err, cluster.ErrNotFound) {
			t.Errorf("deleting cluster %s: %v", name, err)
		}
		if _, err := provider.Get(context.Background(), name); !errors.Is(err, cluster.ErrNotFound) {
			t.Errorf("cluster %s still there after delete: %v", name, err)
		}
	})
	// svclab runs a learner's command as "svclab scenario CMD ID" does, with
	// a new Manager as in a new process; the exit code is 1 for a check
	// that did not pass.
	svclab := func(cmd, id string) (string, int) {
		t.Helper()
		st, err := store.Open(ctx, store.DefaultPath(stateDir), store.Options{Log: log})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		owners, err := owner.New(owner.Options{Command: "svclab scenario " + cmd, StateDir: stateDir})
		if err != nil {
			t.Fatal(err)
		}
		m, err := New(Options{Store: st, Provider: provider, Log: log, StateDir: stateDir, Owners: owners})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		start := time.Now()
		switch cmd {
		case "start":
			err = RunStart(ctx, m, &out, store.LocalLearner, id, name)
		case "check":
			err = RunCheck(ctx, m, &out, store.LocalLearner, id)
		case "status":
			err = RunStatus(ctx, m, &out, store.LocalLearner)
		default:
			t.Fatalf("no command %q", cmd)
		}
		t.Logf("svclab scenario %s %s (%s):\n%s", cmd, id, time.Since(start).Round(100*time.Millisecond), out.String())
		switch {
		case errors.Is(err, session.ErrNotPassed):
			return out.String(), 1
		case err != nil:
			t.Fatalf("svclab scenario %s %s: %v", cmd, id, err)
		}
		return out.String(), 0
	}

	out, code := svclab("start", "selector-typo")
	if code != 0 || !strings.Contains(out, "── Task ──") {
		t.Fatalf("start: exit %d", code)
	}
	out, code = svclab("check", "selector-typo")
	if code != 1 || !regexpLine(out, `✗ +clusterip-answers`) || !strings.Contains(out, "not yet") {
		t.Fatalf("check of the broken scenario: exit %d", code)
	}
	if strings.Contains(out, "could not check") {
		t.Errorf("a check could not run")
	}

	// A new process, through the API the web UI uses.
	st, err := store.Open(ctx, store.DefaultPath(stateDir), store.Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, err := New(Options{Store: st, Provider: provider, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.Current(ctx, "", "selector-typo")
	if err != nil || a == nil || a.Cluster != name || a.State != StateRunning {
		t.Fatalf("current attempt: %+v, %v", a, err)
	}
	// The first check showed hint 1; hints come one at a time, in order.
	i, text, err := m.Hint(ctx, a.ID)
	if err != nil || i != 2 || strings.Contains(text, "app=wbe") {
		t.Fatalf("hint: %d %q %v", i, text, err)
	}
	var sol bytes.Buffer
	if err := m.Solve(ctx, a.ID, &sol); err != nil {
		t.Fatalf("solve: %v\n%s", err, sol.String())
	}
	t.Logf("solution:\n%s", sol.String())

	// The dataplane follows within seconds; a learner would check again.
	deadline := time.Now().Add(session.SolveGradeTimeout)
	for {
		out, code = svclab("check", "selector-typo")
		if code == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if code != 0 || !strings.Contains(out, "Score: 100%") || !strings.Contains(out, "── Explanation ──") {
		t.Fatalf("check after the solution: exit %d", code)
	}
	out, _ = svclab("status", "")
	if !regexpLine(out, `selector-typo +solved +100% \(9 of 9 points\) +2 +1 `) {
		t.Errorf("status does not show selector-typo solved with 2 hints")
	}

	rec, err := st.Attempt(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != store.Passed || rec.Finished.IsZero() || rec.SolutionUsed.IsZero() || rec.HintsShown != 2 || rec.Score != rec.MaxScore || rec.Backend != "embedded" {
		t.Errorf("recorded attempt: %+v", rec)
	}
	runs, err := st.CheckRuns(ctx, a.ID)
	if err != nil || len(runs) < 2 {
		t.Fatalf("check runs: %d, %v", len(runs), err)
	}
	first, last := runs[0], runs[len(runs)-1]
	if first.Passed || !last.Passed || len(first.Results) != 6 || len(last.Results) != 6 {
		t.Errorf("first run %+v\nlast run %+v", first, last)
	}
	for _, r := range first.Results {
		if r.CheckID == "clusterip-answers" && (r.Passed || r.Detail == "") {
			t.Errorf("the probe's result before the fix: %+v", r)
		}
		if r.Error != "" {
			t.Errorf("check %s could not run: %s", r.CheckID, r.Error)
		}
	}
	// The saved state holds the rightFix baseline and the cluster-wide
	// state that a teardown in another process puts back.
	if b, err := st.Baseline(ctx, a.ID); err != nil || !strings.Contains(string(b), `"service-kept"`) || !strings.Contains(string(b), `"guard":{`) || !strings.Contains(string(b), `"`+name+`-worker2":{"labels"`) {
		t.Errorf("saved state %s, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, store.FileName)); err != nil {
		t.Error(err)
	}

	// Abandoning removes the scenario from the cluster, which stays usable.
	if err := m.Abandon(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	c, err := provider.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	cs, _ := c.Client()
	if err := waitNamespaceGone(ctx, cs, "shop"); err != nil {
		t.Error(err)
	}
}
