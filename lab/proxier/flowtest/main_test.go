package flowtest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"

	proxierrun "github.com/svclab/svclab/lab/proxier/run"
	"github.com/svclab/svclab/lab/roles"
)

// proxierEnv makes this test binary "svclab proxier run" with the
// JSON-encoded arguments it holds (started inside a node namespace).
const proxierEnv = "SVCLAB_FLOWTEST_PROXIER_ARGS"

func TestMain(m *testing.M) {
	if raw := os.Getenv(proxierEnv); raw != "" {
		os.Exit(runProxier(raw))
	}
	// The differential test creates an embedded cluster, whose supervisor
	// is this binary re-executed.
	roles.Dispatch()
	if os.Geteuid() == 0 {
		// What killed earlier runs left behind goes first.
		removed, err := SweepStale(context.Background())
		for _, r := range removed {
			fmt.Fprintln(os.Stderr, "removed what a killed test run left:", r)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "removing what killed test runs left:", err)
		}
	}
	os.Exit(m.Run())
}

func runProxier(raw string) int {
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cmd := proxierrun.NewRunCommand()
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "proxier:", err)
		return 1
	}
	return 0
}

// requireRoot skips tests that need real namespaces and rules: in -short
// mode, when not root, and when a command they run is missing.
func requireRoot(t testing.TB, commands ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("packet-level test with network namespaces: skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("packet-level test: needs root to create network namespaces and load rules")
	}
	for _, c := range append([]string{"ip"}, commands...) {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("packet-level test: %s is not installed (go tool task setup installs it)", c)
		}
	}
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// newSandbox returns a Sandbox whose namespaces are deleted when t ends, after
// which nothing of it may be left on the host. Register it before anything
// that holds sockets in its namespaces, so that those close first.
func newSandbox(t testing.TB, prefix string) *Sandbox {
	t.Helper()
	lab := NewSandbox(prefix, testLogger(t))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := lab.Close(ctx); err != nil {
			t.Errorf("delete namespaces: %v", err)
		}
		left, err := Leftovers(ctx, lab.ID)
		if err != nil {
			t.Errorf("check for leftovers: %v", err)
		}
		for _, l := range left {
			t.Errorf("left behind: %s", l)
		}
	})
	return lab
}
