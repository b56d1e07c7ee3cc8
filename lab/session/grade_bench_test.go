package session

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
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

// BenchmarkGrade measures grading every scenario on a real cluster, in the
// broken state (where probes that expect success may meet a DROP and take
// their timeout) and after the reference solution. Each scenario reports
// the slowest grading as max-s; it fails when a grading of the solved
// scenario takes more than 3 s, or one of the broken scenario more than
// 3 s plus its longest probe timeout.
//
// SVCLAB_BENCH_CLUSTER names an existing cluster (in the default state
// directory) to use; otherwise the benchmark creates one per cluster shape
// in a temporary state directory and deletes it afterwards. Scenarios whose
// shape the cluster does not have are skipped.
//
//	go test -run '^$' -bench Grade -benchtime 5x ./lab/session/
func BenchmarkGrade(b *testing.B) {
	if err := embedded.Preflight(); err != nil {
		b.Skipf("needs the embedded backend: %v", err)
	}
	ctx := context.Background()
	bin, err := kubebin.Locate(ctx, nil)
	if err != nil {
		b.Skip(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	reg := faults.Registry()
	cat, problems := scenarios.Load(scenario.Options{Faults: reg})
	if err := problems.Err(); err != nil {
		b.Fatal(err)
	}
	existing := os.Getenv("SVCLAB_BENCH_CLUSTER")
	state := b.TempDir()
	if existing != "" {
		state = embedded.DefaultStateDir()
	}
	p := embedded.New(state, log)
	svclab := buildSvclab(b, state)
	clusters := map[string]cluster.Cluster{}
	var created []string
	defer func() {
		for _, name := range created {
			if err := p.Delete(context.Background(), name); err != nil {
				b.Errorf("deleting cluster %s: %v", name, err)
			}
		}
	}()
	for _, s := range cat.Scenarios {
		b.Run(s.ID, func(b *testing.B) {
			var c cluster.Cluster
			if existing != "" {
				if c, err = p.Get(ctx, existing); err != nil {
					b.Fatal(err)
				}
				if err := checkShape(ctx, c, s.Cluster); err != nil {
					b.Skip(err)
				}
			} else {
				name := ShapeClusterName("bench", s.Cluster)
				if c = clusters[name]; c == nil {
					var made bool
					if c, made, err = EnsureCluster(ctx, p, name, s.Cluster, nil); err != nil {
						b.Fatal(err)
					}
					if made {
						created = append(created, name)
					}
					clusters[name] = c
				}
			}
			ses, err := Start(ctx, s, c, Options{Faults: reg, Log: log, Svclab: svclab})
			if err != nil {
				b.Fatal(err)
			}
			defer ses.Teardown(context.Background(), false)
			measure := func(b *testing.B, budget time.Duration) {
				var slowest *grade.Report
				for b.Loop() {
					rep := ses.Grade(ctx)
					if slowest == nil || rep.Duration > slowest.Duration {
						slowest = rep
					}
				}
				b.ReportMetric(slowest.Duration.Seconds(), "max-s")
				b.Logf("slowest grading: %s", checkDurations(slowest))
				if slowest.Duration > budget {
					b.Errorf("grading took up to %s, budget %s", slowest.Duration.Round(10*time.Millisecond), budget)
				}
			}
			b.Run("broken", func(b *testing.B) { measure(b, gradeBudget(s, true)) })
			var out bytes.Buffer
			if err := ses.Solve(ctx, bin, &out); err != nil {
				b.Fatalf("%v\n%s", err, out.String())
			}
			if rep := ses.GradeUntilPassed(ctx, SolveGradeTimeout); !rep.Passed {
				b.Fatalf("the solution scores %.0f%%", rep.Score)
			}
			b.Run("solved", func(b *testing.B) { measure(b, gradeBudget(s, false)) })
		})
	}
}

// checkDurations lists the checks of rep, slowest first: "hairpin-calls
// probe 2.1s, service-kept rightFix 12ms".
func checkDurations(rep *grade.Report) string {
	rs := slices.Clone(rep.Results)
	slices.SortStableFunc(rs, func(a, b grade.Result) int { return cmp.Compare(b.Duration, a.Duration) })
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%s %s %s", r.ID, r.Kind, r.Duration.Round(time.Millisecond))
	}
	return rep.Duration.Round(time.Millisecond).String() + ": " + strings.Join(parts, ", ")
}
