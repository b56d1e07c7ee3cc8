//go:build linux

package embedded

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// markedProcesses returns the PIDs of svclab's processes whose environment
// carries EnvClusterDir with a value match accepts. svclab's run as the
// host's root; a lab's never do (they run as the lab's ids), so a Pod that
// sets the variable (to keep a crashed lab looking alive, or to pass for
// another lab's) is not counted.
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
		if !hostRoot(pid) {
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

// hostRoot tells whether pid runs as the host's root (its real uid, as the
// host sees it).
func hostRoot(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			return len(f) > 0 && f[0] == "0"
		}
	}
	return false
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

// processesInNetns returns the PIDs of processes in any of the named
// network namespaces (compared by inode).
func processesInNetns(names []string) []int {
	inodes := map[uint64]bool{}
	for _, n := range names {
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/run/netns", n), &st) == nil {
			inodes[st.Ino] = true
		}
	}
	if len(inodes) == 0 {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/proc", e.Name(), "ns", "net"), &st) == nil && inodes[st.Ino] {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Memory is what a cluster's processes take, in bytes: resident (RSS,
// which counts pages shared between processes, such as the svclab and
// svclab-kube binaries, once per process) and proportional (PSS, which
// splits shared pages among the processes that map them).
type Memory struct {
	RSS, PSS  uint64
	Processes int
}

// Memory sums the memory of the cluster's processes: those svclab started
// for it (supervisor, control plane, node agents) and those in its nodes'
// and Pods' namespaces (containers).
func (c *Cluster) Memory() Memory {
	var m Memory
	for pid := range clusterProcesses(c.dir, clusterNetns(c.st.Name)) {
		s, ok := readSmaps(pid)
		if !ok {
			continue
		}
		m.RSS += s.RSS
		m.PSS += s.PSS
		m.Processes++
	}
	return m
}

// clusterProcesses are the PIDs of the cluster in dir: those svclab
// started and those running in the cluster's namespaces.
func clusterProcesses(dir string, netns []string) map[int]bool {
	pids := map[int]bool{}
	for _, pid := range markedProcesses(func(d string) bool { return d == dir }) {
		pids[pid] = true
	}
	for _, pid := range processesInNetns(netns) {
		pids[pid] = true
	}
	return pids
}

// smaps is a process's memory from /proc/PID/smaps_rollup, in bytes.
type smaps struct{ RSS, PSS, PSSAnon, PSSFile uint64 }

func readSmaps(pid int) (smaps, bool) {
	f, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup"))
	if err != nil {
		return smaps{}, false
	}
	var s smaps
	for _, line := range strings.Split(string(f), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseUint(fields[1], 10, 64)
		switch fields[0] {
		case "Rss:":
			s.RSS = kb << 10
		case "Pss:":
			s.PSS = kb << 10
		case "Pss_Anon:":
			s.PSSAnon = kb << 10
		case "Pss_File:":
			s.PSSFile = kb << 10
		}
	}
	return s, true
}
