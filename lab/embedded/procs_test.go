//go:build linux

package embedded

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
)

// Only svclab's processes (the host's root) count as a lab's marked
// processes: one of another user that sets the marker — a lab's, keeping
// a crashed lab alive or passing for another — does not.
func TestMarkedProcessesAreRoots(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	dir := "/var/lib/svclab-test/clusters/" + uniqueName("mark")
	start := func(uid uint32) *exec.Cmd {
		c := exec.Command("sleep", "30")
		c.Env = append(os.Environ(), EnvClusterDir+"="+dir)
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	own, forged := start(0), start(1<<30+7)
	pids := markedProcesses(func(d string) bool { return d == dir })
	if !slices.Contains(pids, own.Process.Pid) {
		t.Errorf("svclab's marked process %d is not found (%v)", own.Process.Pid, pids)
	}
	if slices.Contains(pids, forged.Process.Pid) {
		t.Errorf("a process of a lab's id with the marker counts as svclab's (%v)", pids)
	}
}
