package flowtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestSweepStale: the namespaces of a lab whose test run was killed are
// removed by the next run; those of a lab whose owner runs are not.
func TestSweepStale(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	live := newSandbox(t, "sl")
	if _, err := live.Netns(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	// A lab of a run that is gone: its owner record names a process that
	// has exited.
	dead := NewSandbox("sd", nil)
	ns, err := dead.Netns(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close(context.Background()) })
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ownerDir, dead.ID), []byte(strconv.Itoa(gone.Process.Pid)+" 1"), 0o644); err != nil {
		t.Fatal(err)
	}
	removed, err := SweepStale(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(removed, "namespace "+ns.Name) {
		t.Errorf("removed %q, want namespace %s among them", removed, ns.Name)
	}
	if _, err := os.Stat(ns.Path()); err == nil {
		t.Errorf("namespace %s of the killed run is still there", ns.Name)
	}
	if _, err := os.Stat(filepath.Join(ownerDir, dead.ID)); err == nil {
		t.Error("the killed run's owner record is still there")
	}
	for _, r := range removed {
		if _, name, _ := strings.Cut(r, " "); slices.Contains(live.Names(), name) {
			t.Errorf("removed %s of a lab whose test still runs", r)
		}
	}
	if _, err := os.Stat(Netns{Name: live.Names()[0]}.Path()); err != nil {
		t.Errorf("the running lab's namespace is gone: %v", err)
	}
}
