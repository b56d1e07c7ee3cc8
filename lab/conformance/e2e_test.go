package conformance

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded"
	"github.com/svclab/svclab/lab/kubebin"
	"github.com/svclab/svclab/lab/roles"
)

func TestMain(m *testing.M) {
	roles.Dispatch()
	os.Exit(m.Run())
}

// testProgress logs a run's steps and progress lines.
type testProgress struct{ t *testing.T }

func (p testProgress) Start(step string) func(error) {
	p.t.Log(step)
	return func(err error) {
		if err != nil {
			p.t.Logf("%s: %v", step, err)
		}
	}
}
func (p testProgress) Infof(format string, args ...any) { p.t.Logf(format, args...) }

// The 15 [sig-network] Services Conformance specs of Kubernetes v1.37.2
// pass on a fresh embedded cluster (the whole [sig-network] set is `go
// tool task conformance`).
func TestServicesConformance(t *testing.T) {
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
	state := t.TempDir()
	p := embedded.New(state, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	res, err := Run(ctx, Options{
		Provider:  p,
		Focus:     ServicesFocus,
		ReportDir: t.TempDir(),
		Suite: func(ctx context.Context, pr cluster.Progress) (string, error) {
			return kubebin.E2E.Locate(ctx, pr)
		},
		Progress: testProgress{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Summary())
	for _, s := range res.Failed() {
		t.Errorf("%s (%s): %s", s.Name, s.State, s.Message)
	}
	for _, s := range res.Setup {
		t.Errorf("the suite's %s failed: %s", s.Name, s.Message)
	}
	if len(res.Specs) != 15 {
		t.Errorf("%d specs ran, want the 15 [sig-network] Services Conformance specs of v1.37.2", len(res.Specs))
	}
	if names, _ := p.List(ctx); len(names) != 0 {
		t.Errorf("clusters left: %v", names)
	}
}
