package session

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
	"github.com/svclab/svclab/lab/embedded"
	"github.com/svclab/svclab/lab/faults"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/kubebin"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/scenarios"
)

func TestMain(m *testing.M) {
	embedded.Init()
	os.Exit(m.Run())
}

// testProgress logs the steps of a pipeline.
type testProgress struct{ t *testing.T }

func (p testProgress) Start(step string) func(error) {
	start := time.Now()
	return func(err error) {
		p.t.Logf("%s (%s): %v", step, time.Since(start).Round(100*time.Millisecond), err)
	}
}
func (p testProgress) Infof(format string, args ...any) { p.t.Logf(format, args...) }

func logReport(t *testing.T, when string, rep *grade.Report) {
	t.Helper()
	var b strings.Builder
	for _, r := range rep.Results {
		mark := "PASS"
		if !r.Passed {
			mark = "FAIL"
		}
		b.WriteString("\n  " + mark + " " + r.ID + ": " + r.Detail)
	}
	t.Logf("%s: score %.0f%% in %s%s", when, rep.Score, rep.Duration.Round(time.Millisecond), b.String())
}

// Every scenario on one embedded cluster, each in its own namespaces: the
// faults really break traffic (the checks fail, a probe among them), the
// reference solution fixes it (every check passes, 100%), and the
// scenario is removed again.
func TestExercisesEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	if err := embedded.Preflight(); err != nil {
		t.Skipf("end-to-end test: %v", err)
	}
	ctx := context.Background()
	bin, err := kubebin.Locate(ctx, nil)
	if err != nil {
		t.Skipf("end-to-end test: %v", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p := embedded.New(t.TempDir(), log)
	b := make([]byte, 3)
	rand.Read(b)
	name := "ex-" + hex.EncodeToString(b)
	start := time.Now()
	c, err := p.Create(ctx, cluster.CreateOptions{Name: name, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Delete(context.Background(), name); err != nil {
			t.Errorf("deleting cluster %s: %v", name, err)
		}
		if _, err := p.Get(context.Background(), name); !errors.Is(err, cluster.ErrNotFound) {
			t.Errorf("cluster %s still there after delete: %v", name, err)
		}
		t.Logf("whole run: %s", time.Since(start).Round(time.Second))
	})
	t.Logf("cluster created in %s", time.Since(start).Round(100*time.Millisecond))

	reg := faults.Registry()
	cat, problems := scenario.LoadEmbedded(scenarios.FS, scenario.Options{Faults: reg})
	if err := problems.Err(); err != nil {
		t.Fatal(err)
	}
	if len(cat.Scenarios) < 3 {
		t.Fatalf("only %d scenarios", len(cat.Scenarios))
	}
	for _, s := range cat.Scenarios {
		t.Run(s.ID, func(t *testing.T) {
			began := time.Now()
			ses, err := Start(ctx, s, c, Options{Faults: reg, Progress: testProgress{t}, Log: log})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := ses.Teardown(context.Background(), false); err != nil {
					t.Errorf("teardown: %v", err)
				}
			}()

			rep := ses.Grade(ctx)
			logReport(t, "before the fix", rep)
			if rep.Passed || rep.Score >= 100 {
				t.Errorf("the broken scenario passes grading (score %.0f%%)", rep.Score)
			}
			probeFailed := false
			for i, r := range rep.Results {
				if r.Error != "" {
					t.Errorf("check %s could not run: %s", r.ID, r.Error)
				}
				kind := s.Checks[i].Kind()
				if kind == scenario.CheckProbe && !r.Passed {
					probeFailed = true
				}
				if kind == scenario.CheckRightFix && !r.Passed {
					t.Errorf("right-fix check %s fails before anything was changed: %s", r.ID, r.Detail)
				}
			}
			if !probeFailed {
				t.Errorf("no traffic probe fails while the fault is in place")
			}
			if rep.Duration > 3*time.Second+time.Duration(maxProbeTimeout(s))*time.Second {
				t.Errorf("grading took %s", rep.Duration)
			}

			var out bytes.Buffer
			if err := ses.Solve(ctx, bin, &out); err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			rep = ses.GradeUntilPassed(ctx, SolveGradeTimeout)
			logReport(t, "after the reference solution", rep)
			if !rep.Passed || rep.Score != 100 {
				t.Errorf("the reference solution scores %.0f%%; solution output:\n%s", rep.Score, out.String())
			}

			// A plausible wrong fix, on a fresh setup, is rejected.
			wrong, ok := wrongFixes[s.ID]
			if !ok {
				t.Logf("%s: %s", s.ID, time.Since(began).Round(100*time.Millisecond))
				return
			}
			if err := ses.Teardown(ctx, true); err != nil {
				t.Fatal(err)
			}
			ses, err = Start(ctx, s, c, Options{Faults: reg, Progress: testProgress{t}, Log: log})
			if err != nil {
				t.Fatal(err)
			}
			out.Reset()
			if err := ses.RunCommands(ctx, bin, wrong.commands, &out); err != nil {
				t.Fatalf("wrong fix: %v\n%s", err, out.String())
			}
			cs, _ := c.Client()
			if err := settle(ctx, cs, s, false, time.Minute); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second) // the proxiers' sync
			rep = ses.Grade(ctx)
			logReport(t, "after a wrong fix ("+wrong.what+")", rep)
			if rep.Passed {
				t.Errorf("the wrong fix (%s) passes", wrong.what)
			}
			for _, id := range wrong.fails {
				if r, ok := rep.Result(id); !ok || r.Passed || r.Error != "" {
					t.Errorf("after the wrong fix (%s), check %s: %+v", wrong.what, id, r)
				}
			}
			t.Logf("%s: %s", s.ID, time.Since(began).Round(100*time.Millisecond))
		})
	}
	t.Run("dataplane-faults", func(t *testing.T) {
		s := cat.Get("targetport-mismatch")
		if s == nil {
			t.Skip("no scenario targetport-mismatch to borrow an application from")
		}
		testDataplaneFaults(t, c, s, reg)
	})
}

// wrongFixes are a plausible wrong fix per scenario and the checks that
// must reject it.
var wrongFixes = map[string]struct {
	what     string
	commands []string
	fails    []string
}{
	"selector-typo": {"recreating the Service with the right selector", []string{
		"kubectl -n shop delete service web",
		"kubectl -n shop create service clusterip web --tcp=80:8080",
	}, []string{"service-kept"}},
	"targetport-mismatch": {"making the application listen on the Service's wrong port", []string{
		`kubectl -n billing patch deployment api --type=json -p '[{"op":"replace","path":"/spec/template/spec/containers/0/args","value":["netexec","--http-port=9090"]},{"op":"replace","path":"/spec/template/spec/containers/0/readinessProbe/httpGet/port","value":9090}]'`,
		"kubectl -n billing rollout status deployment api --timeout=90s",
	}, []string{"deployment-unchanged", "slice-port-matches-container"}},
	"etp-local-drop": {"switching to externalTrafficPolicy Cluster", []string{
		`kubectl -n edge patch service ingress -p '{"spec":{"externalTrafficPolicy":"Cluster"}}'`,
	}, []string{"policy-still-local", "worker2-answers"}},
}

// maxProbeTimeout is the longest probe timeout of s, in seconds: probes
// that expect success but meet a DROP take that long.
func maxProbeTimeout(s *scenario.Scenario) int {
	longest := 2
	for _, c := range s.Checks {
		if c.Probe == nil || c.Probe.Timeout == "" {
			continue
		}
		if d, err := time.ParseDuration(c.Probe.Timeout); err == nil && int(d.Seconds()) > longest {
			longest = int(d.Seconds())
		}
	}
	return longest
}
