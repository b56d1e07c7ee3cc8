package kind

import (
	"bytes"
	"context"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/cluster"
)

// TTYCommand plays `docker exec -it` for the fake nodes: it runs the
// command that follows `ctr ... task exec --tty --exec-id ID svclab-node`
// on this machine, under the terminal it is given, and fails for any
// other command.
func (n *fakeNode) TTYCommand(ctx context.Context, argv []string) *exec.Cmd {
	n.mu.Lock()
	n.execs = append(n.execs, append([]string{"tty"}, argv...))
	n.mu.Unlock()
	if len(argv) < 10 || strings.Join(argv[:7], " ") != "ctr -n k8s.io task exec --tty --exec-id" || argv[8] != NodeToolsContainer {
		return exec.CommandContext(ctx, "sh", "-c", "echo not in the tools container; exit 99")
	}
	return exec.CommandContext(ctx, argv[9], argv[10:]...)
}

// A terminal on a kind node runs its command in the node's tools container
// with a terminal (ctr task exec --tty under docker exec -it) under a
// terminal of svclab's, at the size asked for; closing it hangs up that
// exec in the node, by its ID.
func TestNodeTerminal(t *testing.T) {
	eng := newFakeEngine()
	worker := &fakeNode{name: "lab-worker", role: "worker", ip: "172.18.0.3", tools: true}
	eng.clusters["lab"] = []*fakeNode{{name: "lab-control-plane", role: "control-plane", ip: "172.18.0.2", tools: true}, worker}
	c := &Cluster{name: "lab", engine: eng, st: &State{}}
	ctx := context.Background()
	if _, err := c.NodeTerminal(ctx, "lab-worker9", []string{"bash"}, cluster.TerminalSize{}); err == nil || !strings.Contains(err.Error(), `no node "lab-worker9"`) {
		t.Errorf("a terminal on a missing node: %v", err)
	}
	term, err := c.NodeTerminal(ctx, "lab-worker", []string{"sh", "-c", "stty size; echo ready; read x; echo got-$x"}, cluster.TerminalSize{Rows: 33, Cols: 111})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(&out, term)
	}()
	term.Write([]byte("hi\r"))
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal's command did not end")
	}
	if err := term.Wait(); err != nil {
		t.Errorf("Wait: %v", err)
	}
	for _, want := range []string{"33 111", "got-hi"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the terminal lacks %q: %q", want, out.String())
		}
	}
	term.Close()
	worker.mu.Lock()
	defer worker.mu.Unlock()
	var id string
	for _, x := range worker.execs {
		if x[0] == "tty" {
			id = x[8]
		}
	}
	if !strings.HasPrefix(id, "svclab-tty-") {
		t.Fatalf("no terminal exec with an ID of svclab's: %q", worker.execs)
	}
	kill := []string{"ctr", "-n", "k8s.io", "task", "kill", "--exec-id", id, "--signal", "SIGHUP", NodeToolsContainer}
	if !slices.ContainsFunc(worker.execs, func(x []string) bool { return slices.Equal(x, kill) }) {
		t.Errorf("the exec in the node was not hung up (%q): %q", kill, worker.execs)
	}
}
