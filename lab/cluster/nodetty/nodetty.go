// Package nodetty runs a command behind a pseudo-terminal that svclab makes
// and holds, as `docker exec -t` and `runc exec -t` do: the backends'
// NodeTerminal (cluster.NodeTerminaler) — node shells, in the browser and
// on the command line.
//
// svclab keeps the terminal's master side; the command gets the slave side
// as its standard streams and its controlling terminal, in a session of its
// own. So nothing of svclab's session reaches the node — not the terminal
// of the person who ran svclab, nor the server's — and the node's own
// programs (script, stty) never have to make a terminal inside the node:
// resizing is an ioctl on the master here, and closing the master hangs the
// session up.
package nodetty

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/cluster"
)

// Options say how to start the command and how to end what it leaves.
type Options struct {
	// Start starts the command once its terminal is set (nil:
	// cmd.Start). The embedded backend's gives the command a session
	// keyring of its own.
	Start func(*exec.Cmd) error
	// Open makes the pseudo-terminal (nil: one of this machine's
	// /dev/ptmx): its master, which Terminal takes over, and its slave,
	// which Start closes once the command has it. The embedded backend's
	// makes it in the node's own devpts, where the node's programs find
	// it by name.
	Open func() (master, slave *os.File, err error)
	// Hangup, when set, ends what remains of the command on its node once
	// the terminal is hung up, where the node's processes are beyond this
	// machine's session (kind: the shell runs under containerd, not under
	// the docker exec that holds the terminal). It runs once.
	Hangup func()
}

// drainTime is how long a terminal whose command has ended is still read:
// what the command wrote last may still be on its way to the master, and
// processes the command left in the background may hold the terminal
// open, so the end of the output is not reported by the terminal itself.
const drainTime = 500 * time.Millisecond

// closeWait is how long Close waits for the command after hanging it up
// before it kills it.
const closeWait = 5 * time.Second

// Terminal is a command running behind a pseudo-terminal of this
// process's; it implements cluster.Terminal.
type Terminal struct {
	cmd    *exec.Cmd
	master *os.File
	extra  func()

	hangOnce sync.Once
	endOnce  sync.Once
	// ended is closed when Read has seen the end of the output.
	ended chan struct{}
	done  chan struct{}
	err   error
}

var _ cluster.Terminal = (*Terminal)(nil)

// Start starts cmd behind a new pseudo-terminal of the given size: the
// slave side becomes its standard input, output and error and its
// controlling terminal, in a new session (cmd's SysProcAttr is set so);
// this process keeps the master. A size with a zero dimension is 24x80.
func Start(cmd *exec.Cmd, size cluster.TerminalSize, opts Options) (*Terminal, error) {
	openPTY := opts.Open
	if openPTY == nil {
		openPTY = pty.Open
	}
	m, slave, err := openPTY()
	if err != nil {
		return nil, fmt.Errorf("making a terminal: %w", err)
	}
	master, err := pollable(m)
	if err != nil {
		slave.Close()
		return nil, fmt.Errorf("making a terminal: %w", err)
	}
	if size.Rows == 0 || size.Cols == 0 {
		size = cluster.TerminalSize{Rows: 24, Cols: 80}
	}
	t := &Terminal{cmd: cmd, master: master, extra: opts.Hangup, ended: make(chan struct{}), done: make(chan struct{})}
	if err := t.Resize(size); err != nil {
		master.Close()
		slave.Close()
		return nil, fmt.Errorf("sizing a terminal: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// Ctty is a descriptor of the child: its standard input.
	cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, true, 0
	start := opts.Start
	if start == nil {
		start = (*exec.Cmd).Start
	}
	err = start(cmd)
	// The command has its own copies: the master reports the end of the
	// output once every process of the command has closed the slave.
	slave.Close()
	if err != nil {
		master.Close()
		return nil, err
	}
	go t.watch()
	return t, nil
}

// pollable returns the master m as a file of Go's poller, so that a Read
// waiting on it ends when the master is closed or its deadline passes; m
// is closed. creack/pty leaves its masters in blocking mode (its ioctls go
// through os.File.Fd), for which the poller is never used again: a
// duplicate made non-blocking is registered with it instead.
func pollable(m *os.File) (*os.File, error) {
	defer m.Close()
	rc, err := m.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var dupErr error
	if err := rc.Control(func(f uintptr) { fd, dupErr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if dupErr != nil {
		return nil, dupErr
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), m.Name()), nil
}

// watch waits for the command to end, lets Read drain what it wrote, hangs
// the terminal up and reaps the command. Where it can, it waits without
// reaping, so that the session's ID stays the command's (and can name no
// other session) until the session's remains have been hung up.
func (t *Terminal) watch() {
	reaped := false
	if err := waitExited(t.cmd.Process.Pid); err != nil {
		t.err = t.cmd.Wait()
		reaped = true
	}
	t.master.SetReadDeadline(time.Now().Add(drainTime))
	select {
	case <-t.ended:
	case <-time.After(drainTime):
	}
	t.hangUp()
	if !reaped {
		t.err = t.cmd.Wait()
	}
	close(t.done)
}

// hangUp closes the master, which hangs the terminal up (the session's
// leader gets SIGHUP, the slave's readers the end of their input), and
// sends SIGHUP to what remains of the command's session, as
// `pkill -HUP -t TTY` would: its background jobs too.
func (t *Terminal) hangUp() {
	t.hangOnce.Do(func() {
		t.master.Close()
		hangUpSession(t.cmd.Process.Pid)
		if t.extra != nil {
			t.extra()
		}
	})
}

// Read reads what the command writes to its terminal; io.EOF once it has
// ended (or the terminal is closed).
func (t *Terminal) Read(p []byte) (int, error) {
	n, err := t.master.Read(p)
	if err != nil && n == 0 {
		t.endOnce.Do(func() { close(t.ended) })
		return 0, io.EOF
	}
	return n, nil
}

// Write types into the terminal.
func (t *Terminal) Write(p []byte) (int, error) {
	n, err := t.master.Write(p)
	if errors.Is(err, os.ErrClosed) {
		err = io.ErrClosedPipe
	}
	return n, err
}

// Resize sets the terminal's size; the kernel sends SIGWINCH to the
// terminal's foreground process group.
func (t *Terminal) Resize(size cluster.TerminalSize) error {
	rc, err := t.master.SyscallConn()
	if err != nil {
		return err
	}
	var ioErr error
	if err := rc.Control(func(fd uintptr) {
		ioErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols})
	}); err != nil {
		return err
	}
	return ioErr
}

// Wait waits for the command to end and returns its error.
func (t *Terminal) Wait() error {
	<-t.done
	return t.err
}

// Done is closed once the command has ended and been hung up.
func (t *Terminal) Done() <-chan struct{} { return t.done }

// Close hangs the terminal up and waits for the command, killing it if it
// outlives the hangup by closeWait.
func (t *Terminal) Close() error {
	t.hangUp()
	select {
	case <-t.done:
	case <-time.After(closeWait):
		t.cmd.Process.Kill()
		<-t.done
	}
	return nil
}
