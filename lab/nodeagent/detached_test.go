package nodeagent

import (
	"os"
	"testing"
	"time"
)

// startChild starts sh -c script as a child that nothing else waits for,
// as a detached container is once runc create has exited.
func startChild(t *testing.T, script string) (int, uint64) {
	t.Helper()
	p, err := os.StartProcess("/bin/sh", []string{"sh", "-c", script}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	start, err := processStart(p.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return p.Pid, start
}

func TestDetachedExitCodes(t *testing.T) {
	r := &runc{}
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"sleep 0.2; exit 3", 3},
		{"kill -9 $$", 137},
		{"kill -15 $$", 143},
	} {
		pid, start := startChild(t, tc.script)
		done := make(chan struct{})
		go func() { waitExit(pid, start, nil); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%q: waitExit did not return", tc.script)
		}
		if code, err := r.exitCode(pid, start); err != nil || code != tc.want {
			t.Errorf("%q: exit code %d (%v), want %d", tc.script, code, err, tc.want)
		}
	}
}

func TestWaitExitStops(t *testing.T) {
	pid, start := startChild(t, "sleep 30")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { waitExit(pid, start, stop); close(done) }()
	close(stop)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("waitExit did not return when told to stop")
	}
	if !processAlive(pid, start) {
		t.Error("the process ended with the wait")
	}
	p, _ := os.FindProcess(pid)
	p.Kill()
	p.Wait()
}

// TestReapOrphans: the supervisor reaps ended children that are not its
// components and records their exits, which the adopting agent reads (and
// removes) once.
func TestReapOrphans(t *testing.T) {
	dir := t.TempDir()
	orphan, orphanStart := startChild(t, "exit 5")
	component, componentStart := startChild(t, "exit 1")
	waitExit(orphan, orphanStart, nil)
	waitExit(component, componentStart, nil)
	if err := ReapOrphans(dir, func(pid int) bool { return pid == component }); err != nil {
		t.Fatal(err)
	}
	if processAlive(orphan, orphanStart) {
		t.Fatal("the orphan is alive")
	}
	other := &runc{exits: dir}
	if code, err := other.exitCode(orphan, orphanStart); err != nil || code != 5 {
		t.Errorf("recorded exit: %d %v, want 5", code, err)
	}
	if _, ok := readExitRecord(dir, orphan, orphanStart); ok {
		t.Error("the record was not removed once read")
	}
	// The component was left to its owner.
	if code, err := (&runc{}).exitCode(component, componentStart); err != nil || code != 1 {
		t.Errorf("the component's exit: %d %v, want 1 (not reaped by ReapOrphans)", code, err)
	}
}
