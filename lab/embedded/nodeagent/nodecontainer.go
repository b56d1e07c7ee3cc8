//go:build linux

package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/nodetty"
	"github.com/svclab/svclab/lab/embedded/cgroups"
)

// nodeInit is the node container's init: it waits, and exits on SIGTERM
// (a plain sleep as PID 1 would ignore it).
var nodeInit = []string{"/bin/sh", "-c", `trap "exit 0" TERM INT; while :; do sleep 3600 & wait $!; done`}

// PrepareNodeContainer writes the bundle of node's own container nc and
// mounts its filesystem: the tools image under a writable layer that lasts
// as long as the cluster, privileged in the lab's user namespace iso (root
// over the node, nothing beyond it), in the node's network namespace, with
// the node's hostname. Node shells and node-level commands run in it, so
// they see the node's network and rules but never the host's filesystem or
// processes; hostPath volumes of the node's Pods are inside its filesystem.
// The node's agent runs it (see NodeContainer). Its cgroup is under
// cgroupParent (see Config.CgroupParent).
func PrepareNodeContainer(nc NodeContainer, img Image, netnsPath, node, cgroupParent string, iso Isolation) error {
	r := &runc{cgroupParent: cgroupParent, iso: iso, node: node}
	return r.prepare(containerSpec{
		ID:         nc.ID,
		Bundle:     nc.Bundle,
		Image:      img,
		Args:       nodeInit,
		Env:        append(append([]string(nil), img.Env...), "TERM=xterm-256color", "HOME=/root"),
		Cwd:        "/root",
		Hostname:   node,
		Netns:      netnsPath,
		Privileged: true,
	})
}

// NodeContainer is the node's own container (see PrepareNodeContainer),
// which the agent keeps running, detached: like the machine under a
// kubelet, it goes on while the agent is stopped.
type NodeContainer struct {
	RuncRoot, Bundle, ID string
}

// Command returns a command that runs argv in the node's container as
// `runc exec` would — in its namespaces (the lab's user namespace first),
// root and working directory, with its environment and privileges (the
// container is privileged in the lab and has no seccomp profile) — but
// entered with nsenter from
// the container's first process: a fork and an exec instead of a runc
// process, a tenth of the CPU (the live views run a command on every node
// of a lab every second). It fails when the container is not running.
// Run it with Run, or behind a terminal with Terminal: both start it in a
// session of its own with nothing of this process's (see NodeCommand).
func (nc NodeContainer) Command(ctx context.Context, argv []string) (*NodeCommand, error) {
	pid, start, err := nc.initProcess()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(nc.Bundle, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("reading the node container's spec: %w", err)
	}
	var spec struct {
		Process struct {
			Env []string `json:"env"`
		} `json:"process"`
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, fmt.Errorf("reading the node container's spec: %w", err)
	}
	// The command joins the node container's cgroups first, and so the
	// lab's limits (see package cgroups): a shell's fork bomb counts
	// against the lab, not the host. A host shell moves itself there and
	// then becomes nsenter.
	procs, err := cgroups.ProcsFiles(pid)
	if err != nil {
		return nil, fmt.Errorf("the node container's cgroups: %w", err)
	}
	// And it takes the container's oom_score_adj, as runc exec does: the
	// lab's processes go before its control plane at its memory limit.
	adj, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid))
	if err != nil {
		return nil, fmt.Errorf("the node container's oom_score_adj: %w", err)
	}
	score, err := strconv.Atoi(strings.TrimSpace(string(adj)))
	if err != nil {
		return nil, fmt.Errorf("the node container's oom_score_adj %q: %w", adj, err)
	}
	args := cgroups.Enter(score, procs, append([]string{"nsenter", "--target", strconv.Itoa(pid), "--user", "--mount", "--uts", "--ipc", "--net", "--pid", "--root", "--wd", "--"}, argv...)...)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = spec.Process.Env
	return &NodeCommand{cmd: cmd, pid: pid, start: start}, nil
}

// NodeCommand is a command to run in a node's container (Command). Whoever
// runs svclab must not be reachable from the lab through it: it starts in
// a session of its own — with no controlling terminal (Run) or with a
// terminal of svclab's (Terminal), never the caller's —, with a new, empty
// session keyring instead of the caller's (keys a host program put there,
// for a registry, a disk or a VPN, stay out of the lab), and with no
// descriptor of this process's but the standard streams it is given.
type NodeCommand struct {
	cmd *exec.Cmd
	// pid and start name the node container's first process (0: none,
	// a test's command on the host).
	pid   int
	start uint64
}

// Args are the command's arguments on the host: the step that joins the
// node's cgroups, nsenter, and the command in the node.
func (c *NodeCommand) Args() []string { return slices.Clone(c.cmd.Args) }

// Env is the command's environment: the node container's.
func (c *NodeCommand) Env() []string { return slices.Clone(c.cmd.Env) }

// Run runs the command with the given streams (nil: none) and waits for
// it. A stream that is a file other than a pipe — the caller's terminal
// above all — is relayed through a pipe, never handed over: with the
// terminal's descriptor the lab could read what the caller types, push
// input into the caller's shell (TIOCSTI), take the terminal's foreground
// (TIOCSPGRP), or reopen a file through /proc/self/fd. Pipes (the ones
// svclab makes for the purpose, or a caller's shell pipeline) are passed.
func (c *NodeCommand) Run(stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := c.cmd
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// A new session without a controlling terminal: /dev/tty opens
	// nothing, and signals for the caller's session never reach it.
	cmd.SysProcAttr.Setsid = true
	in, stopInput, err := relayInput(stdin)
	if err != nil {
		return fmt.Errorf("relaying the command's input: %w", err)
	}
	defer stopInput()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, relayOutput(stdout), relayOutput(stderr)
	// What the command started in the node may hold its output open
	// after it is killed.
	cmd.WaitDelay = time.Second
	if err := startIsolated(cmd); err != nil {
		return err
	}
	err = cmd.Wait()
	if errors.Is(err, exec.ErrWaitDelay) {
		// The command succeeded; what it left running in the node held
		// its output, which svclab stopped relaying.
		return nil
	}
	return err
}

// Terminal starts the command behind a new pseudo-terminal of this
// process's, in a session of its own whose controlling terminal it is
// (package nodetty), with a new session keyring and no other descriptor,
// as Run starts it.
func (c *NodeCommand) Terminal(size cluster.TerminalSize) (*nodetty.Terminal, error) {
	opts := nodetty.Options{Start: startIsolated}
	if c.pid != 0 {
		opts.Open = func() (*os.File, *os.File, error) { return openNodePTY(c.pid, c.start) }
	}
	return nodetty.Start(c.cmd, size, opts)
}

// openNodePTY makes a pseudo-terminal in the devpts of the node container
// whose first process is pid (started at start): the one the node's
// /dev/pts shows, as `runc exec -t` makes it, so that the node's programs
// find their terminal there by name (tty, ps). A terminal of the host's
// devpts works as well but has no name in the node. The node's root
// filesystem is the lab's to change, so nothing of it is trusted: the
// directory dev/pts is resolved beneath the node's root with no symbolic
// link followed and must be a devpts, its ptmx must be on that very mount
// and be the ptmx device; the slave is opened from the master
// (TIOCGPTPEER), by no name, and given to the node's root.
func openNodePTY(pid int, start uint64) (master, slave *os.File, err error) {
	proc, err := unix.Open("/proc/"+strconv.Itoa(pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("the node's container is not running: %w", err)
	}
	defer unix.Close(proc)
	// The handle names the process checked, not one that took its PID.
	if !processAlive(pid, start) {
		return nil, nil, fmt.Errorf("the node's container is not running (its process %d has ended)", pid)
	}
	var owner unix.Stat_t
	if err := unix.Fstat(proc, &owner); err != nil {
		return nil, nil, err
	}
	root, err := unix.Openat(proc, "root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("the node's root: %w", err)
	}
	defer unix.Close(root)
	const noLinks = unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS
	pts, err := unix.Openat2(root, "dev/pts", &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | noLinks})
	if err != nil {
		return nil, nil, fmt.Errorf("the node's /dev/pts: %w", err)
	}
	defer unix.Close(pts)
	var fs unix.Statfs_t
	if err := unix.Fstatfs(pts, &fs); err != nil || fs.Type != unix.DEVPTS_SUPER_MAGIC {
		return nil, nil, fmt.Errorf("the node's /dev/pts is not a devpts (%x, %v)", fs.Type, err)
	}
	m, err := unix.Openat2(pts, "ptmx", &unix.OpenHow{Flags: unix.O_RDWR | unix.O_NOCTTY | unix.O_CLOEXEC | unix.O_NONBLOCK, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_XDEV | noLinks})
	if err != nil {
		return nil, nil, fmt.Errorf("the node's /dev/pts/ptmx: %w", err)
	}
	master = os.NewFile(uintptr(m), "ptmx")
	defer func() {
		if err != nil {
			master.Close()
		}
	}()
	var st unix.Stat_t
	if err := unix.Fstat(m, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(st.Rdev) != 5 || unix.Minor(st.Rdev) != 2 {
		return nil, nil, fmt.Errorf("the node's /dev/pts/ptmx is not the ptmx device (%v)", err)
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		return nil, nil, fmt.Errorf("unlocking a terminal: %w", err)
	}
	sfd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		return nil, nil, fmt.Errorf("opening a terminal's slave: %w", errno)
	}
	slave = os.NewFile(sfd, "pts")
	// The node's root (the owner of its first process) owns the
	// terminal, as it would had it opened it.
	if err := unix.Fchown(int(sfd), int(owner.Uid), -1); err != nil {
		slave.Close()
		return nil, nil, fmt.Errorf("giving the terminal to the node's root: %w", err)
	}
	return master, slave, nil
}

// relayInput returns what to give a node command as its input for r, and
// a function that ends the relay once the command has ended. A file (a
// terminal, a pipe, a file) is copied into a pipe of svclab's own, never
// handed to the lab: a process the command leaves in the node cannot read
// the caller's input once svclab is gone. That copy is not waited for, so
// a command that never reads its input ends without waiting for the
// caller to type (the copy, blocked reading a terminal, ends at its next
// input, its pipe closed).
func relayInput(r io.Reader) (io.Reader, func(), error) {
	f, ok := r.(*os.File)
	if !ok {
		return r, func() {}, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	go func() {
		io.Copy(pw, f)
		pw.Close()
	}()
	return pr, func() { pr.Close(); pw.Close() }, nil
}

// relayOutput returns what to give a node command as an output stream for
// w: never a file of the caller's (a terminal, a pipe), which os/exec then
// feeds through a pipe of its own — a process the command leaves in the
// node cannot write into the caller's pipe once svclab is gone.
func relayOutput(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok {
		return struct{ io.Writer }{f}
	}
	return w
}

// startIsolated starts cmd with a new, empty session keyring and none of
// this process's descriptors but the ones cmd names. A child gets its
// credentials, the session keyring among them, from the thread that forks
// it, and Go's SysProcAttr cannot change keyrings in the child; so a
// thread of its own joins a new anonymous keyring (only that thread's
// credentials change) and forks the command, and is never used again: a
// goroutine that ends locked to its thread ends the thread too, and Go
// makes its new threads from a clean one, not from a locked one.
func startIsolated(cmd *exec.Cmd) error {
	if err := closeOnExec(); err != nil {
		return fmt.Errorf("keeping this process's files from the node command: %w", err)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := joinNewSessionKeyring(); err != nil {
			errc <- fmt.Errorf("a session keyring for the node command: %w", err)
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}

// joinNewSessionKeyring makes the calling thread join a new anonymous
// session keyring (KEYCTL_JOIN_SESSION_KEYRING with no name: a named one
// would be shared with whoever joins that name). A kernel without keyrings
// (ENOSYS), or a seccomp filter that forbids them to svclab (EPERM: the
// lab's processes inherit the filter), leaves nothing to keep from the
// lab.
func joinNewSessionKeyring() error {
	_, _, errno := unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0)
	if errno != 0 && errno != unix.ENOSYS && errno != unix.EPERM {
		return errno
	}
	return nil
}

// closeOnExec marks every descriptor of this process past the standard
// ones close-on-exec. Go opens all of its own so; the ones this process
// inherited without the flag (from a terminal emulator, a shell's
// redirection such as 3</dev/tty, a service manager) would otherwise pass
// to every child, node commands among them.
func closeOnExec() error {
	err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL) {
		return err
	}
	// Before Linux 5.11: one by one.
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC)
		}
	}
	return nil
}

// initPID reads the node container's first process from runc's state,
// checking its start time so that a recycled PID is never entered.
func (nc NodeContainer) initPID() (int, error) {
	pid, _, err := nc.initProcess()
	return pid, err
}

// initProcess is initPID with the process's start time.
func (nc NodeContainer) initProcess() (int, uint64, error) {
	b, err := os.ReadFile(filepath.Join(nc.RuncRoot, nc.ID, "state.json"))
	if err != nil {
		return 0, 0, fmt.Errorf("the node's container is not running: %w", err)
	}
	var st struct {
		Pid   int    `json:"init_process_pid"`
		Start uint64 `json:"init_process_start"`
	}
	if err := json.Unmarshal(b, &st); err != nil || st.Pid <= 0 {
		return 0, 0, fmt.Errorf("reading the state of the node's container: %v", err)
	}
	if !processAlive(st.Pid, st.Start) {
		return 0, 0, fmt.Errorf("the node's container is not running (its process %d has ended)", st.Pid)
	}
	return st.Pid, st.Start, nil
}

// keepNodeContainer starts the node's container unless it runs already
// (an earlier agent started it), and starts it again whenever it ends,
// until ctx ends. It returns once the container runs.
func keepNodeContainer(ctx context.Context, nc NodeContainer, marker, exits string, log *slog.Logger) error {
	r := &runc{root: nc.RuncRoot, marker: marker, exits: exits}
	pid, start, err := r.ensureQuiet(ctx, nc)
	if err != nil {
		return fmt.Errorf("starting the node's container: %w", err)
	}
	go func() {
		for {
			waitExit(pid, start, ctx.Done())
			if ctx.Err() != nil {
				return // the agent stops; the node's container goes on
			}
			code, _ := r.exitCode(pid, start)
			log.Warn("the node's container ended; starting it again", "exitCode", code)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			if pid, start, err = r.ensureQuiet(ctx, nc); err != nil {
				log.Error("starting the node's container", "err", err)
				return
			}
		}
	}()
	return nil
}

// ensureQuiet returns the process of container nc, creating and starting
// it (output discarded) unless it runs.
func (r *runc) ensureQuiet(ctx context.Context, nc NodeContainer) (int, uint64, error) {
	if out, err := r.cmd(ctx, "state", nc.ID).Output(); err == nil {
		var st struct {
			Status string `json:"status"`
			Pid    int    `json:"pid"`
		}
		if json.Unmarshal(out, &st) == nil && st.Status == "running" && st.Pid > 0 {
			if start, err := processStart(st.Pid); err == nil {
				return st.Pid, start, nil
			}
		}
	}
	r.delete(ctx, nc.ID)
	devNull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return 0, 0, err
	}
	defer devNull.Close()
	pidFile, runcLog := filepath.Join(nc.Bundle, "pid"), filepath.Join(nc.Bundle, "runc.log")
	create := r.cmd(ctx, "--log", runcLog, "--log-format", "json", "create", "--bundle", nc.Bundle, "--pid-file", pidFile, nc.ID)
	create.Stdin, create.Stdout, create.Stderr = devNull, devNull, devNull
	if err := create.Run(); err != nil {
		return 0, 0, fmt.Errorf("runc create: %s", runcError(runcLog, err))
	}
	pid, err := readPidFile(pidFile)
	if err != nil {
		return 0, 0, err
	}
	start, err := processStart(pid)
	if err != nil {
		return 0, 0, err
	}
	if err := r.cmd(ctx, "--log", runcLog, "--log-format", "json", "start", nc.ID).Run(); err != nil {
		r.delete(ctx, nc.ID)
		return 0, 0, fmt.Errorf("runc start: %s", runcError(runcLog, err))
	}
	return pid, start, nil
}
