package kind_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/faults"
	"github.com/svclab/svclab/lab/kind"
	"github.com/svclab/svclab/lab/kubebin"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/session"
	"github.com/svclab/svclab/scenarios"
)

type logProgress struct{ t *testing.T }

func (p logProgress) Start(step string) func(error) {
	start := time.Now()
	p.t.Logf("• %s", step)
	return func(err error) { p.t.Logf("  %s (%s): %v", step, time.Since(start).Round(100*time.Millisecond), err) }
}
func (p logProgress) Infof(format string, args ...any) { p.t.Logf("  "+format, args...) }

// TestKindEndToEnd creates a real kind cluster running the bundled
// proxier, runs the selector-typo scenario on it (broken: the checks fail;
// solved: they pass), and deletes it. It needs Docker with a running
// daemon, and pulls kind's node image once.
func TestKindEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	ctx := context.Background()
	if _, err := (kind.Docker{}).Check(ctx); err != nil {
		t.Skipf("end-to-end test of the kind backend needs Docker with a running daemon: %v", err)
	}
	kubeBin, err := kubebin.Locate(ctx, nil)
	if err != nil {
		t.Skipf("end-to-end test: %v", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p := kind.New(t.TempDir(), log)
	b := make([]byte, 3)
	rand.Read(b)
	name := "kx-" + hex.EncodeToString(b)

	cat, problems := scenario.LoadEmbedded(scenarios.FS, scenario.Options{Faults: faults.Registry()})
	if err := problems.Err(); err != nil {
		t.Fatal(err)
	}
	s := cat.Get("selector-typo")
	if s == nil {
		t.Fatal("no scenario selector-typo")
	}
	start := time.Now()
	c, created, err := session.EnsureCluster(ctx, p, name, s.Cluster, logProgress{t})
	if created {
		t.Cleanup(func() {
			if err := p.Delete(context.Background(), name); err != nil {
				t.Errorf("deleting %s: %v", name, err)
			}
			if _, err := p.Get(context.Background(), name); !errors.Is(err, cluster.ErrNotFound) {
				t.Errorf("cluster %s still there: %v", name, err)
			}
			list, _ := (kind.Docker{}).Clusters(context.Background())
			for _, n := range list {
				if n == name {
					t.Errorf("kind still has cluster %s", name)
				}
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster %s ready in %s", name, time.Since(start).Round(time.Second))

	// Nodes run the bundled proxier's rules.
	var out bytes.Buffer
	if err := c.NodeExec(ctx, name+"-worker", []string{"nft", "list", "table", "ip", "kube-proxy"}, cluster.Stdio{Stdout: &out}); err != nil {
		t.Errorf("nft on the worker: %v", err)
	} else if !strings.Contains(out.String(), "chain services") {
		t.Errorf("no kube-proxy table on the worker:\n%s", out.String())
	}

	ses, err := session.Start(ctx, s, c, session.Options{Progress: logProgress{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer ses.Teardown(context.Background(), false)
	if rep := ses.Grade(ctx); rep.Passed {
		t.Errorf("the broken scenario passed its checks")
	}
	var solveOut bytes.Buffer
	if err := ses.Solve(ctx, kubeBin, &solveOut); err != nil {
		t.Fatalf("solve: %v\n%s", err, solveOut.String())
	}
	rep := ses.GradeUntilPassed(ctx, session.SolveGradeTimeout)
	for _, r := range rep.Results {
		t.Logf("%v %s: %s", r.Passed, r.ID, r.Detail)
	}
	if !rep.Passed {
		t.Errorf("the solved scenario fails its checks (score %.0f%%)", rep.Score)
	}
}
