package terminal

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"
	"time"

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

// Shell is a running shell on a node behind a pseudo-terminal.
type Shell struct {
	c      cluster.Cluster
	node   string
	id     string
	in     *os.File
	out    *os.File
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	once   sync.Once
}

// kubeOnNode is where svclab-kube lives on a node: where the nodes' images
// have it.
const kubeOnNode = images.KubePath

// Open starts bash -l on node behind a new pseudo-terminal. The shell ends
// when ctx ends or Close is called.
//
// NodeExec carries the shell's input and output over pipes, so the
// pseudo-terminal is made on the node, by script(1); its name is kept in
// /run/svclab-tty-ID so that Resize can set its size (stty, which also
// sends the shell SIGWINCH).
func Open(ctx context.Context, c cluster.Cluster, node string, opts Options) (*Shell, error) {
	if opts.KubeBin != "" {
		if err := installKubectl(ctx, c, node, opts.KubeBin); err != nil {
			return nil, err
		}
	}
	rows, cols := opts.Rows, opts.Cols
	if rows == 0 || cols == 0 || rows > 1000 || cols > 1000 {
		rows, cols = 24, 80
	}
	var idb [8]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return nil, err
	}
	// Real pipes, not io.Pipe: NodeExec's command gets the files
	// themselves, so waiting for it never waits on a copy of the input.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Shell{c: c, node: node, id: hex.EncodeToString(idb[:]), in: inW, out: outR, cancel: cancel, done: make(chan struct{})}
	// script(1) waits for the end of its input after the shell exits; the
	// shell's parent (script) is told to go instead.
	inner := fmt.Sprintf(`tty > %s; stty rows %d cols %d; cd /root; bash -l; kill -TERM $PPID`, s.ttyFile(), rows, cols)
	cmd := []string{"env", "SHELL=/bin/bash", "script", "-qfec", inner, "/dev/null"}
	go func() {
		defer close(s.done)
		s.err = c.NodeExec(ctx, node, cmd, cluster.Stdio{Stdin: inR, Stdout: outW, Stderr: outW})
		inR.Close()
		outW.Close()
	}()
	return s, nil
}

func (s *Shell) ttyFile() string { return "/run/svclab-tty-" + s.id }

// Read reads the terminal's output; io.EOF once the shell has ended.
func (s *Shell) Read(p []byte) (int, error) {
	n, err := s.out.Read(p)
	if err != nil && n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// Write types into the terminal.
func (s *Shell) Write(p []byte) (int, error) { return s.in.Write(p) }

// Resize sets the terminal's size (the shell gets SIGWINCH).
func (s *Shell) Resize(ctx context.Context, rows, cols uint16) error {
	if rows == 0 || cols == 0 || rows > 1000 || cols > 1000 {
		return fmt.Errorf("terminal size %dx%d: rows and columns must be 1 to 1000", cols, rows)
	}
	script := fmt.Sprintf(`for i in 1 2 3 4 5 6 7 8 9 10; do [ -s %[1]s ] && exec stty -F "$(cat %[1]s)" rows %[2]d cols %[3]d; sleep 0.2; done; echo "the terminal is not there" >&2; exit 1`, s.ttyFile(), rows, cols)
	errb := cluster.NewCappedBuffer(64 << 10)
	if err := s.c.NodeExec(ctx, s.node, []string{"sh", "-c", script}, cluster.Stdio{Stderr: errb}); err != nil {
		return fmt.Errorf("resizing the terminal on %s: %w %s", s.node, err, strings.TrimSpace(errb.String()))
	}
	return nil
}

// Done is closed when the shell has ended.
func (s *Shell) Done() <-chan struct{} { return s.done }

// Err is why the shell ended (nil for a plain exit).
func (s *Shell) Err() error {
	<-s.done
	var ee interface{ ExitCode() int }
	if errors.As(s.err, &ee) {
		return nil
	}
	return s.err
}

// Close ends the shell, waits for it and removes its tty file.
func (s *Shell) Close() error {
	s.once.Do(func() {
		s.in.Close()
		s.cancel()
		<-s.done
		s.hangup()
		s.out.Close()
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

// hangup ends the terminal's processes on the node and removes its tty
// file: ending the command on the host does not end what it started in the
// node.
func (s *Shell) hangup() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	script := fmt.Sprintf(`t=$(cat %[1]s 2>/dev/null) && [ -n "$t" ] && pkill -HUP -t "${t#/dev/}"; rm -f %[1]s`, s.ttyFile())
	_ = s.c.NodeExec(ctx, s.node, []string{"sh", "-c", script}, cluster.Stdio{})
}
