package clustertest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/lab/cluster"
)

func TestNodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want []cluster.Node
	}{
		{name: "default", want: []cluster.Node{
			{Name: "lab-control-plane", Role: cluster.RoleControlPlane, IP: "172.29.1.2"},
			{Name: "lab-worker", Role: cluster.RoleWorker, IP: "172.29.1.3"},
			{Name: "lab-worker2", Role: cluster.RoleWorker, IP: "172.29.1.4"},
		}},
		{name: "one worker, labelled", opts: []Option{WithWorkers(1), WithNodeLabels(map[string]map[string]string{"lab-worker": {"zone": "a"}})},
			want: []cluster.Node{
				{Name: "lab-control-plane", Role: cluster.RoleControlPlane, IP: "172.29.1.2"},
				{Name: "lab-worker", Role: cluster.RoleWorker, IP: "172.29.1.3", Labels: map[string]string{"zone": "a"}},
			}},
		{name: "given", opts: []Option{WithNodes(cluster.Node{Name: "n1", Role: cluster.RoleControlPlane, IP: "10.0.0.1"})},
			want: []cluster.Node{{Name: "n1", Role: cluster.RoleControlPlane, IP: "10.0.0.1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCluster("lab", tc.opts...)
			got, err := c.Nodes(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, tc.want, func(a, b cluster.Node) bool {
				return a.Name == b.Name && a.Role == b.Role && a.IP == b.IP && len(a.Labels) == len(b.Labels) && a.Labels["zone"] == b.Labels["zone"]
			}) {
				t.Errorf("nodes %+v, want %+v", got, tc.want)
			}
			// What a caller does to the list does not change the cluster.
			if len(got) > 0 {
				got[0].Name = "changed"
				if again, _ := c.Nodes(context.Background()); again[0].Name == "changed" {
					t.Error("Nodes shares its slice")
				}
			}
		})
	}
}

func TestNodeExec(t *testing.T) {
	boom := errors.New("exit status 2")
	respond := WithRespond(func(node string, cmd []string) (string, error) {
		return "responded " + node + " " + strings.Join(cmd, "+"), nil
	})
	for _, tc := range []struct {
		name    string
		opts    []Option
		node    string
		cmd     []string
		wantOut string
		wantErr string
	}{
		{name: "unscripted succeeds", node: "lab-worker", cmd: []string{"true"}},
		{name: "unknown node", node: "lab-worker9", cmd: []string{"true"}, wantErr: `cluster lab has no node "lab-worker9"`},
		{name: "answer by node and command", opts: []Option{WithAnswer("lab-worker", "nft list ruleset", "table ip x", boom)},
			node: "lab-worker", cmd: []string{"nft", "list", "ruleset"}, wantOut: "table ip x", wantErr: "exit status 2"},
		{name: "answer for another node", opts: []Option{WithAnswer("lab-worker2", "true", "", boom)},
			node: "lab-worker", cmd: []string{"true"}},
		{name: "answer for any node", opts: []Option{WithAnswer("", "hostname", "any\n", nil)},
			node: "lab-worker2", cmd: []string{"hostname"}, wantOut: "any\n"},
		{name: "the node's answer first", opts: []Option{WithAnswer("", "hostname", "any\n", nil), WithAnswer("lab-worker", "hostname", "w1\n", nil)},
			node: "lab-worker", cmd: []string{"hostname"}, wantOut: "w1\n"},
		{name: "respond", opts: []Option{respond}, node: "lab-worker", cmd: []string{"ip", "route"}, wantOut: "responded lab-worker ip+route"},
		{name: "an answer before respond", opts: []Option{respond, WithAnswer("", "ip route", "answered", nil)},
			node: "lab-worker", cmd: []string{"ip", "route"}, wantOut: "answered"},
		{name: "exec sees the streams", opts: []Option{WithExec(func(_ context.Context, node string, cmd []string, stdio cluster.Stdio) error {
			_, err := stdio.Stdout.Write([]byte("exec " + node))
			stdio.Stderr.Write([]byte("warning"))
			return err
		})}, node: "lab-control-plane", cmd: []string{"sh"}, wantOut: "exec lab-control-plane"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCluster("lab", tc.opts...)
			var out, errOut bytes.Buffer
			err := c.NodeExec(context.Background(), tc.node, tc.cmd, cluster.Stdio{Stdout: &out, Stderr: &errOut})
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
			if out.String() != tc.wantOut {
				t.Errorf("out = %q, want %q", out.String(), tc.wantOut)
			}
			want := []string{tc.node + ": " + strings.Join(tc.cmd, " ")}
			if got := c.Calls(); !slices.Equal(got, want) {
				t.Errorf("calls %q, want %q", got, want)
			}
		})
	}
	// Nil streams discard.
	c := NewCluster("lab", WithAnswer("", "x", "out", nil), respond)
	for _, cmd := range []string{"x", "y"} {
		if err := c.NodeExec(context.Background(), "lab-worker", []string{cmd}, cluster.Stdio{}); err != nil {
			t.Errorf("%s: %v", cmd, err)
		}
	}
}

func TestClientAndConfig(t *testing.T) {
	ctx := context.Background()
	c := NewCluster("lab", WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}))
	cs, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "shop", metav1.GetOptions{}); err != nil {
		t.Errorf("the object given: %v", err)
	}
	if cs != c.Clientset() {
		t.Error("Client and Clientset differ")
	}
	if err := cluster.APIReady(ctx, cs); err != nil {
		t.Errorf("APIReady: %v", err)
	}
	kc, err := c.Kubeconfig()
	if err != nil || !strings.Contains(string(kc), "the fake cluster lab") {
		t.Errorf("kubeconfig %q, %v", kc, err)
	}
	gen, err := cluster.Generation(c)
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := cluster.Generation(NewCluster("other")); g == gen {
		t.Error("two clusters have one generation")
	}
	if g, _ := cluster.Generation(c); g != gen {
		t.Errorf("generation changed from %s to %s without a rebuild", gen, g)
	}
	c.Rebuild()
	if g, _ := cluster.Generation(c); g == gen {
		t.Error("a rebuilt cluster keeps its generation")
	}
	if b := c.Backend(); b != "embedded" {
		t.Errorf("backend %q", b)
	}
	if b := NewCluster("k", WithBackend("kind")).Backend(); b != "kind" {
		t.Errorf("backend %q", b)
	}
}

// A terminal runs its command as a node command whose streams are what is
// typed and what the terminal shows; its resizes are recorded; closing it
// ends the command.
func TestNodeTerminal(t *testing.T) {
	c := NewCluster("lab", WithExec(func(ctx context.Context, node string, cmd []string, stdio cluster.Stdio) error {
		buf := make([]byte, 64)
		for {
			n, err := stdio.Stdin.Read(buf)
			if err != nil {
				<-ctx.Done() // the input ends as the terminal closes
				return ctx.Err()
			}
			if _, err := stdio.Stdout.Write([]byte(node + " got " + string(buf[:n]))); err != nil {
				return err
			}
		}
	}))
	if _, err := c.NodeTerminal(context.Background(), "lab-worker9", []string{"bash"}, cluster.TerminalSize{}); err == nil || !strings.Contains(err.Error(), `no node "lab-worker9"`) {
		t.Errorf("a terminal on a node the cluster lacks: %v", err)
	}
	term, err := c.NodeTerminal(context.Background(), "lab-worker", []string{"bash", "-l"}, cluster.TerminalSize{Rows: 24, Cols: 80})
	if err != nil {
		t.Fatal(err)
	}
	go term.Write([]byte("ls"))
	buf := make([]byte, 64)
	n, err := term.Read(buf)
	if err != nil || string(buf[:n]) != "lab-worker got ls" {
		t.Errorf("the terminal shows %q, %v", buf[:n], err)
	}
	term.Resize(cluster.TerminalSize{Rows: 40, Cols: 120})
	term.Resize(cluster.TerminalSize{Rows: 41, Cols: 121})
	if got := c.TerminalSizes(); !slices.Equal(got, []cluster.TerminalSize{{Rows: 40, Cols: 120}, {Rows: 41, Cols: 121}}) {
		t.Errorf("sizes %v", got)
	}
	if err := term.Close(); err != nil {
		t.Fatal(err)
	}
	if err := term.Wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("the command ended with %v, want its context's end", err)
	}
	if got := c.Calls(); !slices.Equal(got, []string{"lab-worker: bash -l"}) {
		t.Errorf("calls %q", got)
	}
}
