// Package cgroups puts a lab's processes under limits of their own: the
// lab's cgroup (svclab/NAME, in every hierarchy) caps the processes, memory
// and CPU share of everything in it — its containers, which runc places
// under it, the commands svclab enters its nodes with, which join their
// node container's cgroups (ProcsFiles), and its control plane, whose
// supervisor joins a cgroup of its own below the lab's (Join) — so that a fork bomb, a
// memory hog or a busy loop in one lab leaves the machine and the other
// labs responsive. It speaks cgroup v1 (one hierarchy per controller, as
// on this project's machines) and v2 (one unified hierarchy).
package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Limits are what one lab's processes may use together.
type Limits struct {
	// Pids is the most processes and threads at once (pids.max).
	Pids int `json:"pids"`
	// MemoryBytes is the most memory, swap included (memory.limit_in_bytes
	// and memsw, or memory.max and memory.swap.max).
	MemoryBytes int64 `json:"memoryBytes"`
	// CPUShares is the lab's weight when CPUs are contended (v1's
	// cpu.shares: 1024 is one busy process's worth; v2's cpu.weight is
	// derived from it).
	CPUShares int `json:"cpuShares"`
}

// DefaultLimits are a lab's limits unless svclab serve, class create or
// cluster create say otherwise: room for a scenario's Pods many times
// over, and a CPU share that makes a lab one process among the host's.
func DefaultLimits() Limits {
	return Limits{Pids: 4096, MemoryBytes: 2 << 30, CPUShares: 1024}
}

// Validate checks l.
func (l Limits) Validate() error {
	switch {
	case l.Pids < 64:
		return fmt.Errorf("a lab needs at least 64 processes (got %d)", l.Pids)
	case l.MemoryBytes < 256<<20:
		return fmt.Errorf("a lab needs at least 256 MiB of memory (got %d MiB)", l.MemoryBytes>>20)
	case l.CPUShares < 2 || l.CPUShares > 262144:
		return fmt.Errorf("CPU shares must be between 2 and 262144 (got %d)", l.CPUShares)
	}
	return nil
}

// Root is where cgroups are mounted.
var Root = "/sys/fs/cgroup"

// unified tells whether the machine runs cgroup v2 only.
func unified() bool {
	_, err := os.Stat(filepath.Join(Root, "cgroup.controllers"))
	return err == nil
}

// hierarchies maps each v1 controller (and "" for the v2 hierarchy of a
// hybrid or unified machine) to its mount point, from mountinfo.
func hierarchies() (map[string]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 >= len(fields) || len(fields) < 5 {
			continue
		}
		mp, fstype, opts := fields[4], fields[sep+1], fields[sep+3]
		switch fstype {
		case "cgroup2":
			out[""] = mp
		case "cgroup":
			for _, o := range strings.Split(opts, ",") {
				switch o {
				case "rw", "ro", "relatime", "noexec", "nosuid", "nodev", "clone_children", "xattr":
				default:
					out[o] = mp
				}
			}
		}
	}
	return out, sc.Err()
}

// Apply makes cgroup rel (a path such as svclab/NAME, the same in every
// hierarchy) and sets l on it.
func Apply(rel string, l Limits) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if unified() {
		return applyV2(rel, l)
	}
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	var errs []error
	set := func(ctrl, file, value string) {
		mp, ok := hs[ctrl]
		if !ok {
			errs = append(errs, fmt.Errorf("the %s cgroup controller is not mounted", ctrl))
			return
		}
		dir := filepath.Join(mp, rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			errs = append(errs, err)
			return
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("setting %s of %s: %w", file, dir, err))
		}
	}
	set("pids", "pids.max", strconv.Itoa(l.Pids))
	mem := strconv.FormatInt(l.MemoryBytes, 10)
	set("memory", "memory.limit_in_bytes", mem)
	if mp, ok := hs["memory"]; ok {
		// Swap counts too, where the kernel accounts it.
		if _, err := os.Stat(filepath.Join(mp, rel, "memory.memsw.limit_in_bytes")); err == nil {
			set("memory", "memory.memsw.limit_in_bytes", mem)
		}
	}
	if mp, ok := hs["memory"]; ok {
		// Sockets' buffers: cgroup v1 counts them apart from the memory
		// limit, and only once a TCP limit is set (v2 counts them in
		// memory.max). A quarter of the lab's memory.
		if _, err := os.Stat(filepath.Join(mp, rel, "memory.kmem.tcp.limit_in_bytes")); err == nil {
			set("memory", "memory.kmem.tcp.limit_in_bytes", strconv.FormatInt(TCPBufferBytes(l.MemoryBytes), 10))
		}
	}
	set("cpu", "cpu.shares", strconv.Itoa(l.CPUShares))
	return errors.Join(errs...)
}

// CountSockets makes cgroup rel count its processes' socket buffers
// against the lab's memory. On cgroup v1 the kernel charges a socket's
// buffers to a cgroup only when a TCP limit was written to the very
// cgroup its process is in (a parent's does not count), so that without
// one a lab's sockets — UDP too — take the machine's socket memory outside
// its limits; runc ignores an OCI kernelTCP. CountSockets makes rel in the
// memory hierarchy and writes an unlimited TCP limit where none is set:
// the lab's own, above it, binds. On cgroup v2, which counts sockets in
// memory.max, it does nothing.
func CountSockets(rel string) error {
	if unified() {
		return nil
	}
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	mp, ok := hs["memory"]
	if !ok {
		return fmt.Errorf("the memory cgroup controller is not mounted")
	}
	dir := filepath.Join(mp, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tcp := filepath.Join(dir, "memory.kmem.tcp.limit_in_bytes")
	if _, err := os.Stat(tcp); err != nil || readInt(tcp) < 1<<62 {
		return nil // no TCP accounting in this kernel, or a limit is set
	}
	if err := os.WriteFile(tcp, []byte("-1"), 0o644); err != nil {
		return fmt.Errorf("counting the sockets of %s: %w", dir, err)
	}
	return nil
}

// TCPBufferBytes is what a lab's TCP buffers may hold on a cgroup v1 host,
// where the kernel counts them apart from its memory limit: a quarter of
// that limit.
func TCPBufferBytes(memory int64) int64 { return memory / 4 }

func applyV2(rel string, l Limits) error {
	// Controllers are handed down level by level.
	parts := strings.Split(filepath.Clean(rel), "/")
	dir := Root
	for _, p := range parts {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+pids +memory +cpu"), 0o644); err != nil {
			return fmt.Errorf("enabling the pids, memory and cpu controllers under %s: %w", dir, err)
		}
		dir = filepath.Join(dir, p)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	weight := 1 + (l.CPUShares-2)*9999/262142
	for file, v := range map[string]string{"pids.max": strconv.Itoa(l.Pids), "memory.max": strconv.FormatInt(l.MemoryBytes, 10),
		"memory.swap.max": "0", "cpu.weight": strconv.Itoa(weight)} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil && !(file == "memory.swap.max" && errors.Is(err, os.ErrNotExist)) {
			return fmt.Errorf("setting %s of %s: %w", file, dir, err)
		}
	}
	return nil
}

// Usage is what a lab's cgroup reports: what it uses, and how often it
// reached its limits.
type Usage struct {
	Pids, PidsMax int
	// PidsRefused counts forks refused at the limit.
	PidsRefused      int64
	MemoryBytes      int64
	MemoryLimitBytes int64
	// OOMKills counts processes the kernel killed at the memory limit.
	OOMKills int64
}

// Read reports cgroup rel's usage; what cannot be read stays zero.
func Read(rel string) Usage {
	var u Usage
	if unified() {
		dir := filepath.Join(Root, rel)
		u.Pids = int(readInt(filepath.Join(dir, "pids.current")))
		u.PidsMax = int(readInt(filepath.Join(dir, "pids.max")))
		// A refused fork counts where the limit it met is set (a
		// sub-cgroup may have a lower one): sum the subtree, each
		// cgroup's own count (pids.events.local where the kernel
		// counts pids.events up the tree).
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				f := filepath.Join(p, "pids.events.local")
				if _, err := os.Stat(f); err != nil {
					f = filepath.Join(p, "pids.events")
				}
				u.PidsRefused += readKey(f, "max")
			}
			return nil
		})
		u.MemoryBytes = readInt(filepath.Join(dir, "memory.current"))
		u.MemoryLimitBytes = readInt(filepath.Join(dir, "memory.max"))
		u.OOMKills = readKey(filepath.Join(dir, "memory.events"), "oom_kill")
		return u
	}
	hs, err := hierarchies()
	if err != nil {
		return u
	}
	if mp, ok := hs["pids"]; ok {
		dir := filepath.Join(mp, rel)
		u.Pids = int(readInt(filepath.Join(dir, "pids.current")))
		u.PidsMax = int(readInt(filepath.Join(dir, "pids.max")))
		// v1 counts a refused fork where it was refused: in the cgroup
		// of the process that forked, somewhere below.
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				u.PidsRefused += readKey(filepath.Join(p, "pids.events"), "max")
			}
			return nil
		})
	}
	if mp, ok := hs["memory"]; ok {
		dir := filepath.Join(mp, rel)
		u.MemoryBytes = readInt(filepath.Join(dir, "memory.usage_in_bytes"))
		u.MemoryLimitBytes = readInt(filepath.Join(dir, "memory.limit_in_bytes"))
		// v1 counts a kill in the cgroup of the process killed.
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				u.OOMKills += readKey(filepath.Join(p, "memory.oom_control"), "oom_kill")
			}
			return nil
		})
	}
	return u
}

func readInt(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// readKey reads "key N" from a flat keyed file.
func readKey(path, key string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// Join moves process pid into cgroup rel (below a lab's, where Apply set
// the limits): in every hierarchy that bounds a lab (pids, memory, cpu) on
// cgroup v1, into the unified one on v2. Its children follow it there.
func Join(rel string, pid int) error {
	files, err := Procs(rel)
	if err != nil {
		return err
	}
	if err := CountSockets(rel); err != nil {
		return err
	}
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(f, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("moving process %d into %s: %w", pid, filepath.Dir(f), err)
		}
	}
	return nil
}

// Procs are the cgroup.procs files of cgroup rel in every hierarchy that
// bounds a lab (pids, memory, cpu) on cgroup v1, the unified one's on v2.
func Procs(rel string) ([]string, error) {
	if unified() {
		return []string{filepath.Join(Root, rel, "cgroup.procs")}, nil
	}
	hs, err := hierarchies()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ctrl := range []string{"pids", "memory", "cpu"} {
		mp, ok := hs[ctrl]
		if !ok {
			return nil, fmt.Errorf("the %s cgroup controller is not mounted", ctrl)
		}
		out = append(out, filepath.Join(mp, rel, "cgroup.procs"))
	}
	return out, nil
}

// Members are the processes in cgroup rel, in any of the hierarchies that
// bound a lab (none when it does not exist).
func Members(rel string) []int {
	files, err := Procs(rel)
	if err != nil {
		return nil
	}
	seen := map[int]bool{}
	var out []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(field); err == nil && !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	return out
}

// Enter is the command line (/bin/sh's) that runs argv in the cgroups of
// the cgroup.procs files procs, with oom_score_adj adj: the shell sets its
// oom_score_adj, writes its PID into each file and becomes argv. A cgroup
// it cannot join stops it (exit 125) rather than letting argv run outside
// the lab's limits. Run by host root, as runc exec joins a container's.
func Enter(adj int, procs []string, argv ...string) []string {
	args := append([]string{"/bin/sh", "-c", enterScript, strconv.Itoa(adj)}, procs...)
	return append(append(args, "--"), argv...)
}

const enterScript = `echo "$0" > /proc/self/oom_score_adj || exit 125; for f; do shift; [ "$f" = -- ] && break; echo $$ > "$f" || { echo "svclab: cannot join $f" >&2; exit 125; }; done; exec "$@"`

// ProcsFiles are the cgroup.procs files of process pid's cgroups, one per
// hierarchy: a process that writes its own PID into each joins the cgroups
// pid is in (as runc exec joins a container's).
func ProcsFiles(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, err
	}
	hs, err := hierarchies()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctrls, path := parts[1], parts[2]
		first, _, _ := strings.Cut(ctrls, ",")
		mp, ok := hs[first]
		if !ok {
			continue
		}
		out = append(out, filepath.Join(mp, path, "cgroup.procs"))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("process %d is in no cgroup svclab knows", pid)
	}
	return out, nil
}
