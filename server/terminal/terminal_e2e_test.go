package terminal

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded"
	"github.com/svclab/svclab/lab/kubebin"
	"github.com/svclab/svclab/lab/roles"
)

func TestMain(m *testing.M) {
	roles.Dispatch()
	os.Exit(m.Run())
}

// TestShellOnNode opens shells on a real cluster: kubectl works on the
// control plane (from the node image's svclab-kube, copied nowhere) and,
// copied in, on a node that lacks it; the terminal resizes, a command
// running in it gets SIGWINCH, and no resize runs a command on the node;
// the shell is the node's; closing the terminal hangs up what the shell
// left running in the background.
func TestShellOnNode(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("end-to-end: needs root and a cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p := embedded.New(t.TempDir(), nil)
	cc, err := p.Create(ctx, cluster.CreateOptions{Name: "term-e2e", Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := &countingCluster{Cluster: cc.(*embedded.Cluster)}
	t.Cleanup(func() { p.Delete(context.Background(), "term-e2e") })
	kube, err := kubebin.Locate(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(kube)
	if err != nil {
		t.Fatal(err)
	}
	sizeOnNode := func(node string) string {
		var out bytes.Buffer
		c.NodeExec(ctx, node, []string{"sh", "-c", "stat -c %s " + kubeOnNode + " 2>&1"}, cluster.Stdio{Stdout: &out})
		return strings.TrimSpace(out.String())
	}
	if got := sizeOnNode("term-e2e-control-plane"); got != fmt.Sprint(fi.Size()) {
		t.Errorf("the node image's svclab-kube: %s, want %d bytes", got, fi.Size())
	}
	// A node without it (as a kind node) gets a copy.
	if err := c.NodeExec(ctx, "term-e2e-worker", []string{"rm", kubeOnNode}, cluster.Stdio{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		node string
		want []string
	}{
		{"term-e2e-control-plane", []string{"term-e2e-control-plane\r\n", "40 120", "node/term-e2e-worker"}},
		{"term-e2e-worker", []string{"term-e2e-worker\r\n", "40 120", "node/term-e2e-control-plane"}},
	} {
		start := time.Now()
		sh, err := Open(ctx, c, tc.node, Options{KubeBin: kube, Rows: 30, Cols: 100})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: the shell with kubectl opened in %s", tc.node, time.Since(start).Round(time.Millisecond))
		var out syncBuf
		go func() {
			b := make([]byte, 4096)
			for {
				n, err := sh.Read(b)
				out.Write(b[:n])
				if err != nil {
					return
				}
			}
		}()
		waitOut := func(want string) {
			t.Helper()
			deadline := time.Now().Add(60 * time.Second)
			for !strings.Contains(out.String(), want) && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			if !strings.Contains(out.String(), want) {
				t.Fatalf("%s: the terminal did not show %q:\n%s", tc.node, want, out.String())
			}
		}
		execs := c.execs()
		if err := sh.Resize(40, 120); err != nil {
			t.Fatal(err)
		}
		sh.Write([]byte("hostname; stty size; kubectl get nodes -o name | sort; echo DONE-$((40+2))\r"))
		waitOut("DONE-42")
		got := out.String()
		for _, want := range tc.want {
			if !strings.Contains(got, want) {
				t.Errorf("%s: terminal output lacks %q:\n%s", tc.node, want, got)
			}
		}
		// A program in the foreground sees a resize as it happens.
		sh.Write([]byte(`bash -c 'trap "echo WINCH-\$(stty size); exit" WINCH; echo WAIT-$((1+1)); while :; do sleep 0.1; done'` + "\r"))
		waitOut("WAIT-2")
		if err := sh.Resize(50, 130); err != nil {
			t.Fatal(err)
		}
		waitOut("WINCH-50 130")
		if n := c.execs(); n != execs {
			t.Errorf("%s: resizing ran %d commands on the node", tc.node, n-execs)
		}
		if err := sh.Resize(0, 10); err == nil {
			t.Error("Resize(0, 10) accepted")
		}
		if tc.node == "term-e2e-worker" {
			// Closing the terminal hangs up the shell's background jobs
			// on the node, as a terminal's hangup does.
			sh.Write([]byte("sleep 4321 & echo BG-$((2+2))\r"))
			waitOut("BG-4")
			sh.Close()
			deadline := time.Now().Add(10 * time.Second)
			for nodeHas(ctx, c, tc.node, "sleep 4321") && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
			}
			if nodeHas(ctx, c, tc.node, "sleep 4321") {
				t.Errorf("%s: the shell's background job outlived its terminal", tc.node)
			}
			continue
		}
		sh.Write([]byte("exit\r"))
		select {
		case <-sh.Done():
		case <-time.After(10 * time.Second):
			t.Errorf("%s: the shell did not end after exit", tc.node)
		}
		if err := sh.Err(); err != nil {
			t.Errorf("%s: the shell ended with %v", tc.node, err)
		}
		sh.Close()
	}
	if got := sizeOnNode("term-e2e-worker"); got != fmt.Sprint(fi.Size()) {
		t.Errorf("svclab-kube copied to the worker: %s, want %d bytes", got, fi.Size())
	}
}

// countingCluster counts the commands run on the cluster's nodes.
type countingCluster struct {
	*embedded.Cluster
	mu sync.Mutex
	n  int
}

func (c *countingCluster) NodeExec(ctx context.Context, node string, cmd []string, stdio cluster.Stdio) error {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.Cluster.NodeExec(ctx, node, cmd, stdio)
}

func (c *countingCluster) execs() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// nodeHas says whether a process whose command line holds cmdline runs on
// node.
func nodeHas(ctx context.Context, c cluster.Cluster, node, cmdline string) bool {
	// The pattern's brackets keep pgrep from finding the shell it runs in.
	pattern := "[" + cmdline[:1] + "]" + cmdline[1:]
	return c.NodeExec(ctx, node, []string{"pgrep", "-f", pattern}, cluster.Stdio{}) == nil
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) { s.mu.Lock(); defer s.mu.Unlock(); s.b.Write(p) }
func (s *syncBuf) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
