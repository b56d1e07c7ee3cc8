//go:build linux

package nodeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Containers without a terminal or stdin run detached (runc create, runc
// start): no runc process stays behind per container, and a container
// outlives the agent that started it, as under containerd, so a restarted
// agent adopts it. Its output goes through two named pipes in its bundle
// that the container holds open for reading and writing: it never gets
// SIGPIPE while no agent reads, and the next agent reads on where the last
// one stopped. The agent is the child subreaper of the containers it starts
// and reaps them itself; when it dies, its containers pass to the cluster's
// supervisor (a subreaper too), which records their exits (ReapOrphans)
// for the agent that adopts them.

// SetSubreaper makes this process the reaper of its orphaned descendants:
// a container's process, once runc create has exited.
func SetSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// ReapStrays reaps, every interval until ctx ends, the children of this
// process that have stayed zombies for a whole round: processes orphaned
// to it as their subreaper that nobody waits for — runc's intermediate
// processes (runc:[0:PARENT], runc:[1:CHILD]) once the runc that started
// them is gone, a command whose parent ended first. Without it every
// runc exec leaves one behind, and thousands of zombies slow the whole
// machine. The agent's own commands and the containers it follows are
// waited for the moment they end, well within a round. It returns how
// many it reaped.
func ReapStrays(ctx context.Context, every time.Duration, log *slog.Logger) int {
	self := strconv.Itoa(os.Getpid())
	seen := map[int]string{} // zombie PID → its start time, last round
	total := 0
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return total
		case <-t.C:
		}
		children, err := childrenOf(self)
		if err != nil {
			continue
		}
		next := map[int]string{}
		reaped := 0
		for _, pid := range children {
			f, err := processStat(pid)
			if err != nil || len(f) < 20 || f[0] != "Z" {
				continue
			}
			if start, ok := seen[pid]; ok && start == f[19] {
				var ws unix.WaitStatus
				if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err == nil && got == pid {
					reaped++
				}
				continue
			}
			next[pid] = f[19]
		}
		seen = next
		if reaped > 0 {
			total += reaped
			log.Debug("reaped orphaned processes", "count", reaped)
		}
	}
}

// fifoPaths are a detached container's stdout and stderr pipes.
func fifoPaths(bundle string) (stdout, stderr string) {
	return filepath.Join(bundle, "stdout.fifo"), filepath.Join(bundle, "stderr.fifo")
}

// startDetached creates and starts the container and follows it.
func (r *runc) startDetached(c containerSpec, log *containerLog) (*runningContainer, error) {
	if err := r.prepare(c); err != nil {
		return nil, err
	}
	ctx := context.Background()
	r.delete(ctx, c.ID) // a leftover of a crashed agent
	outPath, errPath := fifoPaths(c.Bundle)
	var ends []*os.File // the container's ends, held until it has them
	defer func() {
		for _, f := range ends {
			f.Close()
		}
	}()
	// The pipes are made and opened from a descriptor of the bundle,
	// following no link.
	bundle, err := openDir(c.Bundle)
	if err != nil {
		return nil, err
	}
	defer unix.Close(bundle)
	for _, p := range []string{outPath, errPath} {
		name := filepath.Base(p)
		unix.Unlinkat(bundle, name, 0)
		if err := unix.Mkfifoat(bundle, name, 0o600); err != nil {
			return nil, fmt.Errorf("creating the container's output pipe: %w", err)
		}
		fd, err := unix.Openat(bundle, name, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("opening the container's output pipe: %w", err)
		}
		ends = append(ends, os.NewFile(uintptr(fd), p))
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer devNull.Close()
	pidFile, runcLog := filepath.Join(c.Bundle, "pid"), filepath.Join(c.Bundle, "runc.log")
	create := r.cmd(ctx, "--log", runcLog, "--log-format", "json", "create", "--bundle", c.Bundle, "--pid-file", pidFile, c.ID)
	// runc hands its stdio to the container; its own errors go to its
	// log.
	create.Stdin, create.Stdout, create.Stderr = devNull, ends[0], ends[1]
	if err := create.Run(); err != nil {
		r.delete(ctx, c.ID)
		return nil, fmt.Errorf("runc create: %s", runcError(runcLog, err))
	}
	pid, err := readPidFile(pidFile)
	if err != nil {
		r.delete(ctx, c.ID)
		return nil, err
	}
	start, err := processStart(pid)
	if err != nil {
		r.delete(ctx, c.ID)
		return nil, err
	}
	rc, err := r.follow(c.ID, c.Bundle, pid, start, time.Now(), log)
	if err != nil {
		r.delete(ctx, c.ID)
		return nil, err
	}
	for _, f := range ends {
		f.Close()
	}
	ends = nil
	if err := r.cmd(ctx, "--log", runcLog, "--log-format", "json", "start", c.ID).Run(); err != nil {
		r.kill(ctx, c.ID, syscall.SIGKILL)
		<-rc.done
		return nil, fmt.Errorf("runc start: %s", runcError(runcLog, err))
	}
	return rc, nil
}

// runcError is the last error runc logged (as JSON lines) to logPath, or
// err.
func runcError(logPath string, err error) string {
	b, _ := os.ReadFile(logPath)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var entry struct{ Level, Msg string }
		if json.Unmarshal([]byte(lines[i]), &entry) == nil && entry.Level == "error" && entry.Msg != "" {
			return entry.Msg
		}
	}
	return err.Error()
}

// follow copies the container's output to log and reports its exit on
// done: the container of a detached run, started by this agent or an
// earlier one (pid with its start time, so a reused PID is not mistaken
// for it).
func (r *runc) follow(id, bundle string, pid int, start uint64, started time.Time, log *containerLog) (*runningContainer, error) {
	outPath, errPath := fifoPaths(bundle)
	var readers []*os.File
	for _, p := range []string{outPath, errPath} {
		// Non-blocking: the open does not wait for a writer, and reads
		// go through the runtime's poller.
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
		if err != nil {
			for _, f := range readers {
				f.Close()
			}
			return nil, fmt.Errorf("reading the container's output: %w", err)
		}
		readers = append(readers, f)
	}
	rc := &runningContainer{id: id, pid: pid, pidStart: start, started: started, done: make(chan struct{}), detached: make(chan struct{})}
	var wg sync.WaitGroup
	for i, stream := range []string{"stdout", "stderr"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			log.copy(stream, readers[i])
			readers[i].Close()
		}()
	}
	go func() {
		waitExit(pid, start, rc.detached)
		select {
		case <-rc.detached:
			// The agent stops; the container goes on, and the next
			// agent follows it.
			for _, f := range readers {
				f.Close()
			}
			return
		default:
		}
		code, err := r.exitCode(pid, start)
		// The output ends with the container (every writer gone);
		// what it left in the pipes is read first.
		copied := make(chan struct{})
		go func() { wg.Wait(); close(copied) }()
		select {
		case <-copied:
		case <-time.After(5 * time.Second):
			for _, f := range readers {
				f.Close()
			}
		}
		rc.exitCode, rc.err, rc.finished = code, err, time.Now()
		r.delete(context.Background(), id)
		close(rc.done)
	}()
	return rc, nil
}

// waitExit returns once the process pid (started at start) has ended, or
// stop is closed.
func waitExit(pid int, start uint64, stop <-chan struct{}) {
	poll := func() {
		for processAlive(pid, start) {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		// No pidfd (an old kernel), or the process is gone already.
		poll()
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	if s, err := processStart(pid); err != nil || s != start {
		return // the PID was reused: ours ended before we looked
	}
	raw, err := f.SyscallConn()
	if err != nil {
		poll()
		return
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-stop:
			f.Close() // ends the wait below
		case <-done:
		}
	}()
	// A pidfd becomes readable when its process ends; the runtime's
	// poller waits for that.
	raw.Read(func(fd uintptr) bool {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
		return err != nil || n > 0
	})
}

// exitCode reaps the ended process pid and returns its exit code (128+n
// for signal n): directly when this agent is its reaper, else from the
// record the supervisor wrote when it reaped the container of an earlier
// agent.
func (r *runc) exitCode(pid int, start uint64) (int, error) {
	var ws unix.WaitStatus
	got, err := unix.Wait4(pid, &ws, 0, nil)
	if err == nil && got == pid {
		return waitStatusCode(ws), nil
	}
	if r.exits == "" {
		return -1, errors.New("the container ended, and its exit code is unknown")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if code, ok := readExitRecord(r.exits, pid, start); ok {
			return code, nil
		}
		if time.Now().After(deadline) {
			return -1, errors.New("the container ended while the node agent was down, and its exit code is unknown")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitStatusCode(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

func readPidFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading the container's pid: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("the container's pid file holds %q", b)
	}
	return pid, nil
}

// processStat returns the fields of /proc/PID/stat after the command
// name: field 3 (the state) is index 0.
func processStat(pid int) ([]string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("unreadable /proc/%d/stat", pid)
	}
	return strings.Fields(string(b[i+1:])), nil
}

// processStart is the start time of pid (clock ticks after boot), which
// tells a process from a later one with the same PID.
func processStart(pid int) (uint64, error) {
	f, err := processStat(pid)
	if err != nil || len(f) < 20 {
		return 0, fmt.Errorf("reading the start time of process %d: %v", pid, err)
	}
	return strconv.ParseUint(f[19], 10, 64) // field 22
}

// processAlive says whether pid is the process that started at start and
// has not ended (a zombie has ended).
func processAlive(pid int, start uint64) bool {
	f, err := processStat(pid)
	if err != nil || len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return false
	}
	s, err := strconv.ParseUint(f[19], 10, 64)
	return err == nil && s == start
}

// exitRecordPath names the exit record of pid started at start.
func exitRecordPath(dir string, pid int, start uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%d-%d", pid, start))
}

// readExitRecord reads and removes the exit record of pid.
func readExitRecord(dir string, pid int, start uint64) (int, bool) {
	p := exitRecordPath(dir, pid, start)
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, false
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, false
	}
	os.Remove(p)
	return code, true
}

// exitRecordTTL is how long an unclaimed exit record is kept: the
// container of a pod deleted while its agent was down has no one to read
// it.
const exitRecordTTL = time.Hour

// ReapOrphans reaps the ended children of this process that ours does not
// claim (the containers of a node agent that died, passed to this process
// as their subreaper), recording each one's exit code in dir for the agent
// that adopts the container. It removes records older than an hour.
func ReapOrphans(dir string, ours func(pid int) bool) error {
	self := strconv.Itoa(os.Getpid())
	children, err := childrenOf(self)
	if err != nil {
		return err
	}
	var errs []error
	for _, pid := range children {
		if ours(pid) {
			continue
		}
		f, err := processStat(pid)
		if err != nil || len(f) < 20 || f[0] != "Z" {
			continue
		}
		start, _ := strconv.ParseUint(f[19], 10, 64)
		var ws unix.WaitStatus
		if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err != nil || got != pid {
			continue
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.WriteFile(exitRecordPath(dir, pid, start), []byte(strconv.Itoa(waitStatusCode(ws))), 0o600); err != nil {
			errs = append(errs, err)
		}
	}
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > exitRecordTTL {
				os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	return errors.Join(errs...)
}

// childrenOf lists the PIDs whose parent is ppid.
func childrenOf(ppid string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := processStat(pid)
		if err == nil && len(f) > 1 && f[1] == ppid {
			out = append(out, pid)
		}
	}
	return out, nil
}
