//go:build linux

package nodetty

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/cluster"
)

// output collects what a terminal's command writes, until its end.
type output struct {
	mu   sync.Mutex
	b    bytes.Buffer
	done chan struct{}
}

func readAll(t *Terminal) *output {
	o := &output{done: make(chan struct{})}
	go func() {
		defer close(o.done)
		buf := make([]byte, 4096)
		for {
			n, err := t.Read(buf)
			o.mu.Lock()
			o.b.Write(buf[:n])
			o.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return o
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// waitFor waits until the output holds want.
func (o *output) waitFor(t *testing.T, want string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(o.String(), want); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal did not show %q; it showed %q", want, o.String())
		}
	}
}

// The command runs in a session of its own whose controlling terminal is
// the new one, of the size asked for; input typed reaches it, a resize
// reaches it as SIGWINCH, and its exit status comes back.
func TestTerminal(t *testing.T) {
	script := `trap 'echo "winch $(stty size)"' WINCH
echo "size $(stty size)"
echo "session $(cut -d' ' -f6 /proc/$$/stat) self $$"
[ "$(readlink /proc/$$/fd/0)" = "$(tty)" ] && echo "tty ok"
echo probe > /dev/tty && echo "ctty ok"
echo ready
read line
echo "got $line"
read line
exit 3`
	term, err := Start(exec.Command("sh", "-c", script), cluster.TerminalSize{Rows: 30, Cols: 100}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	out := readAll(term)
	out.waitFor(t, "ready")
	for _, want := range []string{"size 30 100", "tty ok", "ctty ok", "session " + strconv.Itoa(term.cmd.Process.Pid) + " self " + strconv.Itoa(term.cmd.Process.Pid)} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the terminal lacks %q:\n%s", want, out)
		}
	}
	if sid, _ := unix.Getsid(0); strings.Contains(out.String(), "session "+strconv.Itoa(sid)+" ") {
		t.Errorf("the command runs in the test's session %d", sid)
	}
	if _, err := term.Write([]byte("hello\r")); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "got hello")
	if err := term.Resize(cluster.TerminalSize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "winch 40 120")
	term.Write([]byte("\r"))
	var ee *exec.ExitError
	if err := term.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("Wait: %v, want exit status 3", err)
	}
	select {
	case <-out.done:
	case <-time.After(5 * time.Second):
		t.Error("Read did not report the end of the output")
	}
}

// A command that ends leaving a background job that holds the terminal
// ends the terminal all the same (Read reports the end within drainTime of
// its exit, having read what it wrote), and the job is hung up. The job
// has a process group of its own (set -m), so the kernel's SIGHUP to the
// foreground group, as the session's leader exits, misses it.
func TestTerminalEndsWithItsCommand(t *testing.T) {
	term, err := Start(exec.Command("sh", "-c", `set -m; sleep 300 & echo "job $!"; echo last words`), cluster.TerminalSize{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	out := readAll(term)
	select {
	case <-out.done:
	case <-time.After(10 * time.Second):
		t.Fatal("Read did not report the end of the output")
	}
	if !strings.Contains(out.String(), "last words") {
		t.Errorf("the last output was lost: %q", out)
	}
	if err := term.Wait(); err != nil {
		t.Errorf("Wait: %v", err)
	}
	job := jobPID(t, out.String())
	waitGone(t, job)
}

// Close hangs the terminal up: the command and its background jobs (in
// process groups of their own: set -m) get SIGHUP (a job that ignores it
// is left, as a real hangup leaves it), and
// Close waits for the command; writes after it fail.
func TestTerminalClose(t *testing.T) {
	var hung []string
	var mu sync.Mutex
	term, err := Start(exec.Command("sh", "-c", `set -m; sleep 300 & echo "job $!"; (trap '' HUP; exec sleep 300) & echo "immune $!"; echo ready; read x`), cluster.TerminalSize{}, Options{
		Hangup: func() { mu.Lock(); hung = append(hung, "hangup"); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	out := readAll(term)
	out.waitFor(t, "ready")
	job, immune := jobPID(t, out.String()), fieldPID(t, out.String(), "immune")
	defer syscall.Kill(immune, syscall.SIGKILL)
	start := time.Now()
	if err := term.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Close took %s", d)
	}
	term.Close() // a second Close is harmless
	var ee *exec.ExitError
	if err := term.Wait(); !errors.As(err, &ee) {
		t.Errorf("Wait after a hangup: %v, want the shell killed by SIGHUP", err)
	}
	waitGone(t, job)
	if err := syscall.Kill(immune, 0); err != nil {
		t.Errorf("a job that ignores SIGHUP was killed: %v", err)
	}
	if _, err := term.Write([]byte("x")); err == nil {
		t.Error("a write after Close succeeded")
	}
	if _, err := term.Read(make([]byte, 10)); err != io.EOF {
		t.Errorf("a read after Close: %v, want io.EOF", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(hung) != 1 {
		t.Errorf("the backend's hangup ran %d times, want once", len(hung))
	}
}

// A command that cannot start leaves no terminal behind.
func TestTerminalStartFails(t *testing.T) {
	before := openFDs(t)
	if _, err := Start(exec.Command("/nonexistent/shell"), cluster.TerminalSize{}, Options{}); err == nil {
		t.Fatal("a missing program started")
	}
	boom := errors.New("boom")
	if _, err := Start(exec.Command("true"), cluster.TerminalSize{}, Options{Start: func(*exec.Cmd) error { return boom }}); !errors.Is(err, boom) {
		t.Errorf("Start's error: %v", err)
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open before, %d after", before, after)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	e, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(e)
}

func jobPID(t *testing.T, out string) int { return fieldPID(t, out, "job") }

// fieldPID finds "WORD PID" in out.
func fieldPID(t *testing.T, out, word string) int {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), word+" "); ok {
			if pid, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil {
				return pid
			}
		}
	}
	t.Fatalf("no %q line in %q", word, out)
	return 0
}

// waitGone waits until process pid has ended (a zombie has: its parent,
// the shell, is gone or reaps it).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		if i := bytes.LastIndexByte(b, ')'); i > 0 && len(b) > i+2 && (b[i+2] == 'Z' || b[i+2] == 'X') {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("process %d outlived the hangup: %s", pid, b)
			syscall.Kill(pid, syscall.SIGKILL)
			return
		}
	}
}
