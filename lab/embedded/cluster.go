//go:build linux

package embedded

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded/nodeagent"
	"github.com/svclab/svclab/lab/proxier/control"
)

// Cluster is a running embedded cluster.
type Cluster struct {
	st  *State
	dir string
}

var _ cluster.Cluster = (*Cluster)(nil)

func (c *Cluster) Name() string { return c.st.Name }

// State returns the cluster's recorded layout.
func (c *Cluster) State() *State { return c.st }

// KubeconfigPath is the admin kubeconfig's file.
func (c *Cluster) KubeconfigPath() string { return paths{c.dir}.kubeconfig() }

// LogTail is the last n lines of a control-plane component's log
// (kube-apiserver, etcd, …; "supervisor" for the supervisor's own), for
// tests and reports that say why a cluster stopped answering.
func (c *Cluster) LogTail(component string, n int) string {
	return logTail(filepath.Join(paths{c.dir}.logs(), component+".log"), n)
}

func (c *Cluster) Kubeconfig() ([]byte, error) { return os.ReadFile(c.KubeconfigPath()) }

func (c *Cluster) RESTConfig() (*rest.Config, error) {
	b, err := c.Kubeconfig()
	if err != nil {
		return nil, err
	}
	return cluster.RESTConfigFromKubeconfig(b)
}

func (c *Cluster) Client() (kubernetes.Interface, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func (c *Cluster) Nodes(context.Context) ([]cluster.Node, error) {
	out := make([]cluster.Node, 0, len(c.st.Nodes))
	for _, n := range c.st.Nodes {
		out = append(out, cluster.Node{Name: n.Name, Role: n.Role, IP: n.IP, Labels: n.Labels})
	}
	return out, nil
}

// NodeExec runs cmd on the node: in the node's own container (its network
// namespace, the tools image's filesystem, the node's hostname), never on
// the host; in a session of its own, with nothing of the caller's (see
// nodeagent.NodeCommand).
func (c *Cluster) NodeExec(ctx context.Context, node string, cmd []string, stdio cluster.Stdio) error {
	x, err := c.nodeCommand(ctx, node, cmd)
	if err != nil {
		return err
	}
	if err := x.Run(stdio.Stdin, stdio.Stdout, stdio.Stderr); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("%s on %s: %w", strings.Join(cmd, " "), node, err)
		}
		return fmt.Errorf("running a command on node %s (is the node's container running? see 'svclab cluster list'): %w", node, err)
	}
	return nil
}

var _ cluster.NodeTerminaler = (*Cluster)(nil)

// NodeTerminal runs cmd on the node as NodeExec does, behind a new
// pseudo-terminal of svclab's that is the controlling terminal of the
// command's session.
func (c *Cluster) NodeTerminal(ctx context.Context, node string, cmd []string, size cluster.TerminalSize) (cluster.Terminal, error) {
	x, err := c.nodeCommand(ctx, node, cmd)
	if err != nil {
		return nil, err
	}
	t, err := x.Terminal(size)
	if err != nil {
		return nil, fmt.Errorf("opening a terminal on node %s (is the node's container running? see 'svclab cluster list'): %w", node, err)
	}
	return t, nil
}

// nodeCommand is cmd to run in node's container.
func (c *Cluster) nodeCommand(ctx context.Context, node string, cmd []string) (*nodeagent.NodeCommand, error) {
	n, ok := c.st.Node(node)
	if !ok {
		return nil, fmt.Errorf("cluster %s has no node %q", c.st.Name, node)
	}
	if len(cmd) == 0 {
		return nil, fmt.Errorf("no command given")
	}
	x, err := paths{c.dir}.nodeContainer(n.Name).Command(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("running a command on node %s (see 'svclab cluster list'): %w", node, err)
	}
	return x, nil
}

// ProxierControlKey is the key svclab signs its requests to the cluster's
// proxiers' teaching hooks with (see package control).
func (c *Cluster) ProxierControlKey() (ed25519.PrivateKey, error) {
	k, err := control.ReadPrivateFile(paths{c.dir}.controlKey())
	if err != nil {
		return nil, fmt.Errorf("the proxiers' control key: %w", err)
	}
	return k, nil
}

// StopNodeAgent stops the agent (the kubelet) of node, as stopping the
// kubelet service on a kind node does: its pods' containers go on running,
// the Lease is no longer renewed and its kubelet endpoint closes, so the
// node-lifecycle controller marks the node NotReady after its grace period
// (nodeMonitorGracePeriod), taints it and in time evicts its pods. The
// agent stays stopped until StartNodeAgent, across restarts of the
// cluster's agents.
func (c *Cluster) StopNodeAgent(node string) error {
	if _, ok := c.st.Node(node); !ok {
		return fmt.Errorf("cluster %s has no node %q", c.st.Name, node)
	}
	return os.WriteFile(paths{c.dir}.agentStopped(node), nil, 0o644)
}

// StartNodeAgent starts the stopped agent of node again; it adopts the
// containers its node kept running.
func (c *Cluster) StartNodeAgent(node string) error {
	if _, ok := c.st.Node(node); !ok {
		return fmt.Errorf("cluster %s has no node %q", c.st.Name, node)
	}
	if err := os.Remove(paths{c.dir}.agentStopped(node)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
