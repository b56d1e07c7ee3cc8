package kind

import (
	"context"
	"errors"
	"io"

	kindlog "sigs.k8s.io/kind/pkg/log"

	"github.com/svclab/svclab/lab/cluster"
)

// Engine is what the kind backend needs from Docker and kind.
type Engine interface {
	// Check says whether Docker is installed and its daemon answers;
	// its errors match ErrNoDocker, ErrDockerDown or ErrDockerDenied.
	Check(ctx context.Context) (DockerInfo, error)
	// Clusters lists the kind clusters on the host, by kind's container
	// labels.
	Clusters(ctx context.Context) ([]string, error)
	// Create creates kind cluster name from a kind configuration, writing
	// its kubeconfig to kubeconfig and its progress to log. On failure kind
	// removes the nodes it made.
	Create(ctx context.Context, name string, config []byte, kubeconfig string, log kindlog.Logger) error
	// Delete deletes the kind cluster's nodes and its entry in kubeconfig.
	Delete(ctx context.Context, name, kubeconfig string) error
	// Nodes lists the cluster's nodes.
	Nodes(ctx context.Context, cluster string) ([]Node, error)
	// Release ends this process's use of the engine: svclab's own Docker
	// daemon stops when nothing uses it any more.
	Release(ctx context.Context) error
}

// Node is one node (container) of a kind cluster.
type Node interface {
	Name() string
	// Role is "control-plane" or "worker".
	Role() (string, error)
	// IP is the node's IPv4 address on Docker's kind network.
	IP() (string, error)
	// Exec runs argv in the node and waits for it.
	Exec(ctx context.Context, argv []string, stdio cluster.Stdio) error
	// LoadImageArchive imports an image archive into the node's containerd.
	LoadImageArchive(ctx context.Context, archive io.Reader) error
}

// DockerInfo is what the backend needs to know about the Docker daemon.
type DockerInfo struct {
	ServerVersion string
	// CgroupVersion is "1" or "2".
	CgroupVersion string
}

// Errors of Engine.Check, matched with errors.Is.
var (
	ErrNoDocker     = errors.New("Docker is not installed")
	ErrDockerDown   = errors.New("the Docker daemon is not running")
	ErrDockerDenied = errors.New("no permission to use Docker")
)
