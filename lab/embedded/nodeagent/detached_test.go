//go:build linux

package nodeagent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
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

// TestReapStrays: as a subreaper, an orphaned grandchild that ended is
// reaped after a round; a child its starter waits for is left to it.
func TestReapStrays(t *testing.T) {
	if err := SetSubreaper(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() { done <- ReapStrays(ctx, 50*time.Millisecond, slog.New(slog.DiscardHandler)) }()
	// The middle shell exits at once: its child passes to this process
	// and ends a moment later, a zombie nobody waits for.
	orphan := exec.Command("sh", "-c", `sh -c 'sleep 0.1; exit 3' & echo $!`)
	out, err := orphan.Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	// A child that its starter waits for, ending while the reaper runs.
	waited := exec.Command("sh", "-c", "sleep 0.3; exit 5")
	if err := waited.Start(); err != nil {
		t.Fatal(err)
	}
	if err := waited.Wait(); waited.ProcessState == nil || waited.ProcessState.ExitCode() != 5 {
		t.Errorf("the waited child: %v, want its own exit status 5", err)
	}
	// Two rounds; a busy machine makes them long.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			f, _ := processStat(pid)
			t.Fatalf("the orphan %d is still there: %v", pid, f)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if n := <-done; n < 1 {
		t.Errorf("reaped %d", n)
	}
}
