package embedded

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// markedProcesses returns the PIDs of processes whose environment carries
// EnvClusterDir with a value match accepts.
func markedProcesses(match func(dir string) bool) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	prefix := []byte(EnvClusterDir + "=")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.HasPrefix(kv, prefix) && match(string(kv[len(prefix):])) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// killAll sends SIGKILL to pids and waits (up to timeout) until they are
// gone.
func killAll(pids []int, timeout time.Duration) {
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(timeout)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

// supervisorPID returns the supervisor's PID when it is running for dir.
func supervisorPID(dir string) (int, bool) {
	b, err := os.ReadFile(paths{dir}.supervisorPID())
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil || !alive(pid) {
		return 0, false
	}
	for _, p := range markedProcesses(func(d string) bool { return d == dir }) {
		if p == pid {
			return pid, true
		}
	}
	return 0, false
}
