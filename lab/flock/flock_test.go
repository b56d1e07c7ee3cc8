package flock

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.lock")
	if Held(path) {
		t.Fatal("a missing file is held")
	}
	f, err := TryLock(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if !Held(path) {
		t.Fatal("a locked file is not held")
	}
	if _, err := TryLock(path, 0o600); !errors.Is(err, ErrLocked) {
		t.Fatalf("second TryLock: %v, want ErrLocked", err)
	}
	got := make(chan struct{})
	go func() {
		unlock, err := Lock(path, 0o600)
		if err != nil {
			t.Error(err)
			return
		}
		close(got)
		unlock()
	}()
	select {
	case <-got:
		t.Fatal("Lock did not wait for the holder")
	case <-time.After(100 * time.Millisecond):
	}
	f.Close()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("Lock did not get the lock once it was let go")
	}
	if Held(path) {
		t.Fatal("held after every holder let go")
	}
}

// A lock dies with its process: a killed holder holds nothing.
func TestLockDiesWithItsProcess(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("flock(1) is not installed")
	}
	path := filepath.Join(t.TempDir(), "a.lock")
	// The shell takes the lock on fd 9 and becomes sleep, which holds it.
	cmd := exec.Command("sh", "-c", `exec 9>"$1" && flock 9 && exec sleep 60`, "sh", path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for !Held(path) {
		if time.Now().After(deadline) {
			t.Fatal("flock(1) never held the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := TryLock(path, 0o600); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("TryLock beside a live holder: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	f, err := TryLock(path, 0o600)
	if err != nil {
		t.Fatalf("TryLock after the holder was killed: %v", err)
	}
	f.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
