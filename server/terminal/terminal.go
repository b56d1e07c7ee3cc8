package terminal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/images"
)

// Options configure a shell.
type Options struct {
	// KubeBin is svclab-kube on the host; when set, kubectl is installed
	// on the node (once) and configured for the cluster.
	KubeBin string
	Rows    uint16
	Cols    uint16
}

// Shell is a running shell on a node behind a pseudo-terminal of the
// server's (cluster.NodeTerminaler).
type Shell struct {
	t    cluster.Terminal
	done chan struct{}
	err  error
	once sync.Once
}

// kubeOnNode is where svclab-kube lives on a node: where the nodes' images
// have it.
const kubeOnNode = images.KubePath

// shellCommand is the login shell a terminal runs, in root's home, with
// the terminal type of the browser's terminal (xterm.js). The node's own
// programs run only in the shell's own session on the node: the server
// makes the terminal, and resizes and hangs it up itself.
var shellCommand = []string{"env", "--chdir=/root", "SHELL=/bin/bash", "HOME=/root", "TERM=xterm-256color", "bash", "-l"}

// Open starts bash -l on node behind a new pseudo-terminal. The shell ends
// when ctx ends or Close is called.
func Open(ctx context.Context, c cluster.Cluster, node string, opts Options) (*Shell, error) {
	tc, ok := c.(cluster.NodeTerminaler)
	if !ok {
		return nil, fmt.Errorf("the backend of cluster %s opens no terminals on its nodes", c.Name())
	}
	if opts.KubeBin != "" {
		if err := installKubectl(ctx, c, node, opts.KubeBin); err != nil {
			return nil, err
		}
	}
	rows, cols := opts.Rows, opts.Cols
	if !validSize(rows, cols) {
		rows, cols = 24, 80
	}
	t, err := tc.NodeTerminal(ctx, node, shellCommand, cluster.TerminalSize{Rows: rows, Cols: cols})
	if err != nil {
		return nil, err
	}
	s := &Shell{t: t, done: make(chan struct{})}
	go func() {
		s.err = t.Wait()
		close(s.done)
	}()
	return s, nil
}

func validSize(rows, cols uint16) bool {
	return rows > 0 && cols > 0 && rows <= 1000 && cols <= 1000
}

// Read reads the terminal's output; io.EOF once the shell has ended.
func (s *Shell) Read(p []byte) (int, error) {
	n, err := s.t.Read(p)
	if err != nil && n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// Write types into the terminal.
func (s *Shell) Write(p []byte) (int, error) { return s.t.Write(p) }

// Resize sets the terminal's size (the shell gets SIGWINCH): an ioctl on
// the server's side of the terminal, nothing run on the node.
func (s *Shell) Resize(rows, cols uint16) error {
	if !validSize(rows, cols) {
		return fmt.Errorf("terminal size %dx%d: rows and columns must be 1 to 1000", cols, rows)
	}
	return s.t.Resize(cluster.TerminalSize{Rows: rows, Cols: cols})
}

// Done is closed when the shell has ended.
func (s *Shell) Done() <-chan struct{} { return s.done }

// Err is why the shell ended (nil for a plain exit, or one by a signal:
// a hangup).
func (s *Shell) Err() error {
	<-s.done
	var ee interface{ ExitCode() int }
	if errors.As(s.err, &ee) {
		return nil
	}
	return s.err
}

// Close hangs the terminal up — the shell and what it started in its
// session on the node get SIGHUP — and waits for the shell.
func (s *Shell) Close() error {
	s.once.Do(func() {
		s.t.Close()
		<-s.done
	})
	return nil
}

// installKubectl copies svclab-kube into the node (unless a copy of the
// same size is there), with a kubectl wrapper, the cluster's kubeconfig,
// completion and the alias k.
func installKubectl(ctx context.Context, c cluster.Cluster, node, kubeBin string) error {
	fi, err := os.Stat(kubeBin)
	if err != nil {
		return fmt.Errorf("kubectl for the terminal: %w", err)
	}
	out := cluster.NewCappedBuffer(4 << 10)
	_ = c.NodeExec(ctx, node, []string{"sh", "-c", "stat -c %s " + kubeOnNode + " 2>/dev/null || true"}, cluster.Stdio{Stdout: out})
	if strings.TrimSpace(out.String()) != fmt.Sprint(fi.Size()) {
		f, err := os.Open(kubeBin)
		if err != nil {
			return fmt.Errorf("kubectl for the terminal: %w", err)
		}
		defer f.Close()
		script := "set -e; mkdir -p " + path.Dir(kubeOnNode) + "; cat > " + kubeOnNode + ".tmp; chmod 755 " + kubeOnNode + ".tmp; mv " + kubeOnNode + ".tmp " + kubeOnNode
		errb := cluster.NewCappedBuffer(64 << 10)
		if err := c.NodeExec(ctx, node, []string{"sh", "-c", script}, cluster.Stdio{Stdin: f, Stderr: errb}); err != nil {
			return fmt.Errorf("copying kubectl to node %s: %w %s", node, err, strings.TrimSpace(errb.String()))
		}
	}
	kubeconfig, err := c.Kubeconfig()
	if err != nil {
		return fmt.Errorf("the kubeconfig of cluster %s: %w", c.Name(), err)
	}
	script := `set -e
mkdir -p /root/.kube
cat > /root/.kube/config
chmod 600 /root/.kube/config
printf '#!/bin/sh\nexec ` + kubeOnNode + ` kubectl "$@"\n' > /usr/local/bin/kubectl
chmod 755 /usr/local/bin/kubectl
grep -q svclab-kubectl /root/.bashrc 2>/dev/null || cat >> /root/.bashrc <<'RC'
# svclab-kubectl
source <(kubectl completion bash 2>/dev/null)
alias k=kubectl
complete -o default -F __start_kubectl k
RC
`
	errb := cluster.NewCappedBuffer(64 << 10)
	if err := c.NodeExec(ctx, node, []string{"bash", "-c", script}, cluster.Stdio{Stdin: bytes.NewReader(kubeconfig), Stderr: errb}); err != nil {
		return fmt.Errorf("configuring kubectl on node %s: %w %s", node, err, strings.TrimSpace(errb.String()))
	}
	return nil
}
