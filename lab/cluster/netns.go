package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Netns is one network namespace of a lab — a node's or a Pod's — entered
// from the host by svclab's own code: connections it dials start there,
// and Command runs a program of the host's (nft, iptables-save,
// conntrack, ip, sysctl) there, as root of the lab and with nothing else
// of the lab's. Nothing a learner left in the lab (a replaced curl, nft
// or conntrack in a node or a Pod) takes part.
type Netns interface {
	// DialFrom connects from inside the namespace, from local (""
	// for any address; a fixed source port for a DNS query).
	DialFrom(ctx context.Context, network, local, address string) (net.Conn, error)
	// Command returns the host's program argv[0] (looked up on the
	// host's PATH) to be run in the namespace.
	Command(ctx context.Context, argv ...string) (*exec.Cmd, error)
}

// NetnsCluster is implemented by clusters whose network namespaces svclab
// enters from the host (the embedded backend). The grader, the live views
// and the faults use it for everything they do in the dataplane; clusters
// without it (kind, whose nodes are containers of a Docker engine that may
// run elsewhere) are reached through NodeExec and the nodes' own tools.
type NetnsCluster interface {
	// NodeNetns returns node's network namespace.
	NodeNetns(node string) (Netns, error)
	// PodNetns returns the network namespace of a running Pod of the
	// cluster (its node's, for a hostNetwork Pod).
	PodNetns(pod *corev1.Pod) (Netns, error)
}

// PolicyCluster is implemented by clusters whose nodes enforce
// NetworkPolicy with an agent that tells how far it has got (the embedded
// backend: lab/embedded/netpol). A grader that makes Pods of its own waits
// with it until every node enforces them: traffic from a Pod that no
// node's policy has taken in yet says nothing about the policies.
type PolicyCluster interface {
	// WaitPolicy returns once every node's NetworkPolicy agent enforces
	// the cluster's Pods and Namespaces at least up to these resource
	// versions (empty: any).
	WaitPolicy(ctx context.Context, pods, namespaces string) error
}

// LoadBalancerCluster is implemented by clusters with a load balancer in
// front of their nodes (the embedded backend: lab/embedded/loadbalancer).
type LoadBalancerCluster interface {
	// OutsideNetns returns the network namespace of the lab's load
	// balancer, entered from the host, and its address: a client there
	// stands outside the cluster, and its connections to a load-balancer
	// address go through the load balancer as an outside client's do.
	OutsideNetns() (ns Netns, ip string, err error)
	// LoadBalancerRoutes returns where the load balancer sends the
	// traffic of each of its addresses: the node addresses of its healthy
	// set (none: it drops it).
	LoadBalancerRoutes(ctx context.Context) (map[string][]string, error)
	// WaitLoadBalancer returns once the load balancer has checked the
	// nodes often enough, after the call, to act on what it found.
	WaitLoadBalancer(ctx context.Context) error
}

// MaxDataplaneOutput bounds what svclab reads from one dataplane command
// (a rule or conntrack listing): a learner who fills a node with rules or
// connections gets an error, not a server that reads without end.
const MaxDataplaneOutput = 16 << 20

// ErrOutputTooLarge is wrapped by DataplaneOutput when a command's output
// passes MaxDataplaneOutput.
var ErrOutputTooLarge = errors.New("the command's output is too large")

// DataplaneOutput runs cmd against node's dataplane and returns its
// standard output (at most MaxDataplaneOutput bytes): with the host's
// program in the node's network namespace when c is a NetnsCluster, else
// on the node (NodeExec). A failure carries the command's standard error.
func DataplaneOutput(ctx context.Context, c Cluster, node string, cmd ...string) (string, error) {
	if nc, ok := c.(NetnsCluster); ok {
		ns, err := nc.NodeNetns(node)
		if err != nil {
			return "", err
		}
		return NetnsOutput(ctx, ns, "node "+node, cmd...)
	}
	return output("node "+node, cmd, func(out, errOut io.Writer) error {
		return c.NodeExec(ctx, node, cmd, Stdio{Stdout: out, Stderr: errOut})
	})
}

// NetnsOutput runs the host's program cmd in ns (where names it in
// messages: "node lab-worker") and returns its standard output, at most
// MaxDataplaneOutput bytes; a failure carries the command's standard
// error.
func NetnsOutput(ctx context.Context, ns Netns, where string, cmd ...string) (string, error) {
	return output(where, cmd, func(out, errOut io.Writer) error {
		x, err := ns.Command(ctx, cmd...)
		if err != nil {
			return err
		}
		x.Stdout, x.Stderr = out, errOut
		if err := x.Run(); err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return fmt.Errorf("%s on %s: %w", strings.Join(cmd, " "), where, err)
			}
			return fmt.Errorf("running %s in the network of %s: %w", cmd[0], where, err)
		}
		return nil
	})
}

// output runs a command through run with capped output buffers.
func output(where string, cmd []string, run func(out, errOut io.Writer) error) (string, error) {
	if len(cmd) == 0 {
		return "", errors.New("no command given")
	}
	out := NewCappedBuffer(MaxDataplaneOutput)
	errOut := NewCappedBuffer(64 << 10)
	err := run(out, errOut)
	if out.over {
		return "", fmt.Errorf("%s on %s: %w (over %d MiB)", strings.Join(cmd, " "), where, ErrOutputTooLarge, MaxDataplaneOutput>>20)
	}
	if err != nil {
		if msg := strings.TrimSpace(errOut.String()); msg != "" {
			return out.String(), fmt.Errorf("%w: %s", err, msg)
		}
		return out.String(), err
	}
	return out.String(), nil
}

// CappedBuffer keeps at most max bytes of what a command in a lab prints;
// past that, writes fail, which ends the command (its pipe closes): a
// learner who makes a node's tools print without end cannot fill svclab's
// memory.
type CappedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

// NewCappedBuffer returns a CappedBuffer of max bytes.
func NewCappedBuffer(max int) *CappedBuffer { return &CappedBuffer{max: max} }

func (b *CappedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		b.over = true
		return 0, ErrOutputTooLarge
	}
	return b.Buffer.Write(p)
}
