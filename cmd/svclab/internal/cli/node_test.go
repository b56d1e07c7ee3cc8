package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/term"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/clustertest"
)

// A node shell relays the caller's terminal, in raw mode, to a terminal of
// the backend's and back, follows the caller's window size, restores the
// terminal at the end and passes the shell's exit status on; without a
// terminal it says what to use instead.
func TestRunOnTerminal(t *testing.T) {
	t.Setenv("TERM", "xterm-test")
	started := make(chan struct{})
	c := clustertest.NewCluster("lab", clustertest.WithExec(func(ctx context.Context, node string, cmd []string, stdio cluster.Stdio) error {
		close(started)
		buf := make([]byte, 64)
		for {
			n, err := stdio.Stdin.Read(buf)
			if err != nil {
				return err
			}
			stdio.Stdout.Write([]byte("node got " + string(buf[:n])))
			if strings.Contains(string(buf[:n]), "bye") {
				return &exitStatus{3}
			}
		}
	}))
	m, s, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	defer s.Close()
	if err := pty.Setsize(s, &pty.Winsize{Rows: 30, Cols: 90}); err != nil {
		t.Fatal(err)
	}
	before, err := term.GetState(int(s.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	errc := make(chan error, 1)
	go func() { errc <- runOnTerminal(context.Background(), c, "lab-worker", []string{"bash", "-l"}, s, &out) }()
	<-started
	// Raw mode: a line's end and Ctrl-C pass as they are.
	m.Write([]byte("ls\x03\r"))
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(out.String(), "ls\x03\r") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "node got ls\x03\r") {
		t.Errorf("the node got %q, want the keys as typed", out.String())
	}
	pty.Setsize(s, &pty.Winsize{Rows: 40, Cols: 100})
	syscall.Kill(os.Getpid(), syscall.SIGWINCH)
	for deadline := time.Now().Add(5 * time.Second); len(c.TerminalSizes()) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := c.TerminalSizes(); !slices.Contains(got, cluster.TerminalSize{Rows: 40, Cols: 100}) {
		t.Errorf("resizes %v, want 40x100", got)
	}
	m.Write([]byte("bye"))
	var es *exitStatus
	if err := <-errc; !errors.As(err, &es) || es.code != 3 {
		t.Errorf("the shell's end: %v, want its exit status", err)
	}
	after, err := term.GetState(int(s.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if *after != *before {
		t.Error("the caller's terminal was not restored")
	}
	if calls := c.Calls(); !slices.Equal(calls, []string{"lab-worker: env TERM=xterm-test bash -l"}) {
		t.Errorf("calls %q", calls)
	}

	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := runOnTerminal(context.Background(), c, "lab-worker", []string{"bash"}, f, &out); err == nil || !strings.Contains(err.Error(), "svclab node exec lab-worker -- COMMAND") {
		t.Errorf("without a terminal: %v", err)
	}
}

type exitStatus struct{ code int }

func (e *exitStatus) Error() string { return "exit status" }
func (e *exitStatus) ExitCode() int { return e.code }

// syncBuffer is a bytes.Buffer written and read from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
