package clustertest

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/svclab/svclab/lab/cluster"
)

// Exec answers a command run on a node of a Cluster, as NodeExec would:
// it writes to stdio's streams (nil ones discard) and returns the
// command's error.
type Exec func(ctx context.Context, node string, cmd []string, stdio cluster.Stdio) error

// Cluster is the fake cluster.Cluster. Its methods are safe for
// concurrent use.
type Cluster struct {
	name    string
	backend string
	nodes   []cluster.Node
	cs      *fake.Clientset
	answers map[answerKey]answer
	exec    Exec

	mu    sync.Mutex
	calls []string
	life  int
	sizes []cluster.TerminalSize
}

type answerKey struct{ node, cmd string }

type answer struct {
	out string
	err error
}

// Option configures a Cluster.
type Option func(*Cluster)

// WithNodes gives the cluster these nodes instead of the default layout.
func WithNodes(nodes ...cluster.Node) Option {
	return func(c *Cluster) { c.nodes = slices.Clone(nodes) }
}

// WithWorkers gives the cluster the default layout with n workers: the
// nodes cluster.NodeNames names, at 172.29.1.2 (the control plane),
// 172.29.1.3, and so on.
func WithWorkers(n int) Option {
	return func(c *Cluster) { c.nodes = Nodes(c.name, n) }
}

// WithNodeLabels adds labels to nodes, by node name (as
// cluster.CreateOptions.NodeLabels). It applies to the nodes the options
// before it gave (or the default ones).
func WithNodeLabels(labels map[string]map[string]string) Option {
	return func(c *Cluster) {
		for i, n := range c.nodes {
			if l := labels[n.Name]; len(l) > 0 {
				merged := maps.Clone(n.Labels)
				if merged == nil {
					merged = map[string]string{}
				}
				maps.Copy(merged, l)
				c.nodes[i].Labels = merged
			}
		}
	}
}

// WithObjects puts objects in the cluster's clientset.
func WithObjects(objs ...runtime.Object) Option {
	return func(c *Cluster) { c.cs = fake.NewClientset(objs...) }
}

// WithAnswer scripts a node command: when cmd (its words joined by
// spaces) runs on node ("" for any node), it prints out and returns err.
// A scripted answer comes before WithExec's function.
func WithAnswer(node, cmd, out string, err error) Option {
	return func(c *Cluster) { c.answers[answerKey{node, cmd}] = answer{out, err} }
}

// WithRespond answers the node commands nobody scripted with WithAnswer:
// respond returns what the command prints on its standard output and its
// error.
func WithRespond(respond func(node string, cmd []string) (string, error)) Option {
	return WithExec(func(_ context.Context, node string, cmd []string, stdio cluster.Stdio) error {
		out, err := respond(node, cmd)
		if stdio.Stdout != nil {
			io.WriteString(stdio.Stdout, out)
		}
		return err
	})
}

// WithExec answers the node commands nobody scripted with WithAnswer with
// exec, which sees the standard streams (a terminal, a command that runs
// until its context ends).
func WithExec(exec Exec) Option {
	return func(c *Cluster) { c.exec = exec }
}

// WithBackend makes the cluster say it is of backend (its Backend method;
// the default is "embedded").
func WithBackend(backend string) Option {
	return func(c *Cluster) { c.backend = backend }
}

// NewCluster returns a fake cluster named name: by default three nodes
// (Nodes(name, 2)), an empty clientset, and node commands that succeed
// and print nothing.
func NewCluster(name string, opts ...Option) *Cluster {
	c := &Cluster{name: name, backend: "embedded", cs: fake.NewClientset(), answers: map[answerKey]answer{}}
	c.nodes = Nodes(name, 2)
	for _, o := range opts {
		o(c)
	}
	return c
}

// Nodes is the default node layout of a cluster with workers workers: the
// nodes cluster.NodeNames names, the control plane at 172.29.1.2 and the
// workers at the addresses after it.
func Nodes(name string, workers int) []cluster.Node {
	var out []cluster.Node
	for i, n := range cluster.NodeNames(name, workers) {
		role := cluster.RoleWorker
		if i == 0 {
			role = cluster.RoleControlPlane
		}
		out = append(out, cluster.Node{Name: n, Role: role, IP: fmt.Sprintf("172.29.1.%d", 2+i)})
	}
	return out
}

func (c *Cluster) Name() string { return c.name }

// Backend is the backend the cluster says it is of (WithBackend).
func (c *Cluster) Backend() string { return c.backend }

// Kubeconfig is a kubeconfig that names the cluster (and reaches no
// server).
func (c *Cluster) Kubeconfig() ([]byte, error) {
	return []byte("apiVersion: v1\nkind: Config\n# the fake cluster " + c.name + "\n"), nil
}

// RESTConfig is a configuration that reaches no server, whose CA names the
// cluster and its life (Rebuild).
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ca := fmt.Sprintf("fake CA of %s, life %d", c.name, c.life)
	return &rest.Config{Host: "https://127.0.0.1:1", TLSClientConfig: rest.TLSClientConfig{CAData: []byte(ca)}}, nil
}

// Rebuild makes the fake a new life of its cluster: a new CA, so a new
// cluster.Generation.
func (c *Cluster) Rebuild() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.life++
}

func (c *Cluster) Client() (kubernetes.Interface, error) { return c.cs, nil }

// Clientset is the cluster's fake clientset, for a test to look at or to
// add reactors to.
func (c *Cluster) Clientset() *fake.Clientset { return c.cs }

func (c *Cluster) Nodes(context.Context) ([]cluster.Node, error) {
	out := slices.Clone(c.nodes)
	for i := range out {
		out[i].Labels = maps.Clone(out[i].Labels)
	}
	return out, nil
}

// NodeExec records the command and answers it: with a scripted answer
// (WithAnswer), else the function of WithExec or WithRespond, else with
// success and no output. A command on a node the cluster lacks fails.
func (c *Cluster) NodeExec(ctx context.Context, node string, cmd []string, stdio cluster.Stdio) error {
	line := strings.Join(cmd, " ")
	c.mu.Lock()
	c.calls = append(c.calls, node+": "+line)
	c.mu.Unlock()
	if !slices.ContainsFunc(c.nodes, func(n cluster.Node) bool { return n.Name == node }) {
		return fmt.Errorf("cluster %s has no node %q", c.name, node)
	}
	a, ok := c.answers[answerKey{node, line}]
	if !ok {
		a, ok = c.answers[answerKey{"", line}]
	}
	switch {
	case ok:
		if stdio.Stdout != nil {
			io.WriteString(stdio.Stdout, a.out)
		}
		return a.err
	case c.exec != nil:
		return c.exec(ctx, node, cmd, stdio)
	}
	return nil
}

var _ cluster.NodeTerminaler = (*Cluster)(nil)

// NodeTerminal opens a terminal on node: its command is recorded and
// answered as NodeExec's are (WithAnswer, WithExec), with what is typed as
// its standard input and its standard output and error as what the
// terminal shows. These are pipes, not a pseudo-terminal: what is typed
// reaches the answer as it is, and nothing echoes but what the answer
// writes. Resizes are recorded (TerminalSizes). The command ends when ctx
// ends or the terminal is closed, as the real backends' do.
func (c *Cluster) NodeTerminal(ctx context.Context, node string, cmd []string, size cluster.TerminalSize) (cluster.Terminal, error) {
	if !slices.ContainsFunc(c.nodes, func(n cluster.Node) bool { return n.Name == node }) {
		return nil, fmt.Errorf("cluster %s has no node %q", c.name, node)
	}
	ctx, cancel := context.WithCancel(ctx)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	t := &terminal{c: c, in: inW, out: outR, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		t.err = c.NodeExec(ctx, node, cmd, cluster.Stdio{Stdin: inR, Stdout: outW, Stderr: outW})
		outW.Close()
		inR.Close()
	}()
	return t, nil
}

// TerminalSizes are the sizes the cluster's terminals were resized to, in
// order.
func (c *Cluster) TerminalSizes() []cluster.TerminalSize {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sizes)
}

// terminal is the fake's cluster.Terminal.
type terminal struct {
	c      *Cluster
	in     *io.PipeWriter
	out    *io.PipeReader
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func (t *terminal) Read(p []byte) (int, error)  { return t.out.Read(p) }
func (t *terminal) Write(p []byte) (int, error) { return t.in.Write(p) }

func (t *terminal) Resize(size cluster.TerminalSize) error {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.c.sizes = append(t.c.sizes, size)
	return nil
}

func (t *terminal) Wait() error {
	<-t.done
	return t.err
}

// Close ends the command's context and input, and waits for it.
func (t *terminal) Close() error {
	t.cancel()
	t.in.Close()
	t.out.Close()
	<-t.done
	return nil
}

// Calls are the commands run on the nodes so far, in order, as
// "NODE: CMD" (the command's words joined by spaces).
func (c *Cluster) Calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}
