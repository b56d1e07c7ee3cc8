package cluster

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Default network layout. They are kind's defaults, so scenarios behave the
// same on both backends.
const (
	DefaultServiceCIDR   = "10.96.0.0/16"
	DefaultPodCIDR       = "10.244.0.0/16"
	DefaultNodeCIDRMask  = 24
	DefaultNodePortRange = "30000-32767"
	DefaultClusterDNS    = "10.96.0.10"
	DefaultDNSDomain     = "cluster.local"
	// KubernetesVersion is the version of the control plane components.
	KubernetesVersion = "v1.37.2"
)

// Role is what a node is for.
type Role string

const (
	RoleControlPlane Role = "control-plane"
	RoleWorker       Role = "worker"
)

// Node describes one node of a lab cluster.
type Node struct {
	Name string
	Role Role
	// IP is the node's address on the cluster fabric (its InternalIP).
	IP string
	// Labels are extra node labels, such as topology.kubernetes.io/zone.
	Labels map[string]string
}

// Stdio carries the standard streams of a command run on a node. Nil fields
// mean no input or discarded output. A backend never hands the command a
// terminal of the caller's: a field that is one is relayed (a node command
// that needs a terminal runs behind one of svclab's: NodeTerminaler).
type Stdio struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// Cluster is a running lab cluster, whatever backend made it.
type Cluster interface {
	// Name is the cluster's name.
	Name() string
	// Kubeconfig returns the kubeconfig file's contents (a client
	// certificate, and the server verified against the cluster's CA).
	Kubeconfig() ([]byte, error)
	// RESTConfig returns a client configuration for the cluster.
	RESTConfig() (*rest.Config, error)
	// Client returns a clientset for the cluster.
	Client() (kubernetes.Interface, error)
	// Nodes lists the cluster's nodes.
	Nodes(ctx context.Context) ([]Node, error)
	// NodeExec runs cmd on node and waits for it.
	NodeExec(ctx context.Context, node string, cmd []string, stdio Stdio) error
}

// TerminalSize is the size of a terminal in character cells.
type TerminalSize struct {
	Rows, Cols uint16
}

// Terminal is a command running on a node behind a pseudo-terminal that
// svclab holds (its master side). Read returns what the command writes to
// its terminal (io.EOF once it has ended), Write types into it.
type Terminal interface {
	io.ReadWriter
	// Resize sets the terminal's size; the command gets SIGWINCH.
	Resize(size TerminalSize) error
	// Wait waits for the command to end and returns why: nil, an error
	// with an ExitCode method for an exit status, or why it could not run.
	Wait() error
	// Close hangs the terminal up, as closing a terminal window does: the
	// command's session gets SIGHUP (what remains of it on the node too),
	// and Close waits for the command.
	Close() error
}

// NodeTerminaler is a Cluster that runs commands on its nodes behind a
// pseudo-terminal of svclab's (node shells: the browser's terminal and
// 'svclab node shell'), as `docker exec -t` does. The command starts in a
// session of its own whose controlling terminal is that pseudo-terminal,
// and gets nothing else of the caller's: not its terminal, session,
// keyrings or descriptors. Both backends implement it; callers check for
// it with a type assertion.
type NodeTerminaler interface {
	// NodeTerminal starts cmd on node behind a new pseudo-terminal of
	// the given size. The command ends when ctx ends or the Terminal is
	// closed.
	NodeTerminal(ctx context.Context, node string, cmd []string, size TerminalSize) (Terminal, error)
}

// CreateOptions say what cluster to create.
type CreateOptions struct {
	Name string
	// Workers is the number of worker nodes (the control plane is extra).
	Workers int
	// NodeLabels are extra labels per node name.
	NodeLabels map[string]map[string]string
	// ProxyMode is the kube-proxy mode: "nftables" (the default) or
	// "iptables".
	ProxyMode string
	// Progress receives the steps of the create pipeline; nil discards them.
	Progress Progress
}

// Summary is what a backend knows about one of its clusters without
// contacting it.
type Summary struct {
	Name    string
	Backend string
	// State is a one-word state ("running", "degraded", "stopped").
	State string
	// Server is the API server URL.
	Server string
	// Detail says more about the state, for example which component is
	// crash-looping.
	Detail string
}

// Provider creates, finds and deletes clusters of one backend.
type Provider interface {
	Create(ctx context.Context, opts CreateOptions) (Cluster, error)
	Get(ctx context.Context, name string) (Cluster, error)
	List(ctx context.Context) ([]Summary, error)
	Delete(ctx context.Context, name string) error
	// DeleteAll deletes every cluster but those keep names (nil: none),
	// and sweeps every lab resource the backend may have left behind
	// (after a crash, for example) that no live cluster owns.
	DeleteAll(ctx context.Context, keep func(name string) bool) error
}

// Errors a provider returns, matched with errors.Is.
var (
	ErrExists   = errors.New("cluster already exists")
	ErrNotFound = errors.New("cluster not found")
)

// ValidateProxyMode checks a kube-proxy mode; "" means nftables.
func ValidateProxyMode(mode string) error {
	switch mode {
	case "", "nftables", "iptables":
		return nil
	case "ipvs":
		return errors.New("proxy mode ipvs is not available: this kernel has no IPVS, and kube-proxy deprecated it; use nftables or iptables")
	}
	return fmt.Errorf("unknown proxy mode %q: use nftables or iptables", mode)
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// MaxNameLength bounds cluster names so that derived names (node names,
// network namespaces) stay short.
const MaxNameLength = 24

// ValidateName checks that name can name a cluster: a DNS label of at most
// MaxNameLength characters.
func ValidateName(name string) error {
	if name == "" {
		return errors.New("cluster name is empty: pass --name, for example --name lab")
	}
	if len(name) > MaxNameLength {
		return fmt.Errorf("cluster name %q is %d characters long: use at most %d", name, len(name), MaxNameLength)
	}
	if !nameRE.MatchString(name) {
		return fmt.Errorf("cluster name %q is not valid: use lower-case letters, digits and '-', starting and ending with a letter or digit", name)
	}
	return nil
}

// NodeNames returns kind's node names for a cluster with the given number of
// workers: NAME-control-plane, NAME-worker, NAME-worker2, ...
func NodeNames(cluster string, workers int) []string {
	names := []string{cluster + "-control-plane"}
	for i := 1; i <= workers; i++ {
		if i == 1 {
			names = append(names, cluster+"-worker")
			continue
		}
		names = append(names, fmt.Sprintf("%s-worker%d", cluster, i))
	}
	return names
}

// Generation names one life of a cluster: it changes when the cluster is
// deleted and created again under the same name (a new cluster has a new
// certificate authority), and stays while the cluster lives. It is the
// first 12 hex digits of the SHA-256 of the CA's certificate.
func Generation(c Cluster) (string, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return "", fmt.Errorf("the client configuration of cluster %s: %w", c.Name(), err)
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			return "", fmt.Errorf("the CA of cluster %s: %w", c.Name(), err)
		}
	}
	if len(ca) == 0 {
		// No CA (a fake, or a plain-HTTP server): the server's address
		// and the client's credentials stand in.
		ca = []byte(cfg.Host + "\x00" + string(cfg.CertData) + cfg.BearerToken)
	}
	sum := sha256.Sum256(ca)
	return hex.EncodeToString(sum[:6]), nil
}

// APIReady asks the cluster's API server whether it is ready (/readyz),
// within ctx. A clientset without a REST client (client-go's fake) is asked
// for its version instead.
func APIReady(ctx context.Context, cs kubernetes.Interface) error {
	if rc, ok := cs.Discovery().RESTClient().(*rest.RESTClient); ok && rc != nil {
		_, err := rc.Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}
	_, err := cs.Discovery().ServerVersion()
	return err
}

// FreeName is prefix and five random letters and digits, naming no cluster
// of p: a name for a cluster a run makes for itself, which never lands on
// somebody's lab.
func FreeName(ctx context.Context, p Provider, prefix string) (string, error) {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	for range 10 {
		b := make([]byte, 5)
		rand.Read(b)
		for i := range b {
			b[i] = letters[int(b[i])%len(letters)]
		}
		name := prefix + string(b)
		if _, err := p.Get(ctx, name); errors.Is(err, ErrNotFound) {
			return name, nil
		}
	}
	return "", errors.New("could not find a free cluster name for the run: pass --cluster NAME")
}

// Client-side rate limits of svclab's own clients of a lab cluster. The
// client-go defaults (5 requests a second, bursts of 10) stall the grader
// and a session's teardown on a scenario of a hundred Pods; kubectl, on
// the same clusters, allows 50 and bursts of 300.
const (
	ClientQPS   = 50
	ClientBurst = 300
)

// RESTConfigFromKubeconfig is the client configuration svclab uses for a
// lab cluster: the kubeconfig's, with ClientQPS and ClientBurst, reading
// no more than MaxAPIResponse of an answer and MaxAPIEvent of an event.
func RESTConfigFromKubeconfig(kubeconfig []byte) (*rest.Config, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = ClientQPS, ClientBurst
	BoundAnswers(cfg)
	return cfg, nil
}
