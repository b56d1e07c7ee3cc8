package embedded

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded/hostexec"
	"github.com/svclab/svclab/lab/embedded/userns"
	"github.com/svclab/svclab/lab/kubebin"
)

// BackendName is what Summary.Backend says for embedded clusters.
const BackendName = "embedded"

// Provider creates embedded clusters: nodes are network namespaces on a
// per-cluster bridge, and the control plane runs as supervised processes in
// the control-plane node's namespace.
type Provider struct {
	// StateDir holds one directory per cluster under clusters/.
	StateDir string
	Runner   hostexec.Runner
	Log      *slog.Logger
	// KubeBin finds svclab-kube; kubebin.Locate when nil.
	KubeBin func(ctx context.Context, p cluster.Progress) (string, error)
	// ReadyTimeout bounds how long Create waits for the control plane.
	ReadyTimeout time.Duration
	// ImagesDir overrides where pods' images are kept.
	ImagesDir string
	// IDs hands out the labs' ranges of host ids, machine-wide.
	IDs userns.Allocator
	// Limits bound each lab it creates (DefaultLimits by New).
	Limits Limits
}

var _ cluster.Provider = (*Provider)(nil)

// New returns a Provider keeping its state in stateDir.
func New(stateDir string, log *slog.Logger) *Provider {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{StateDir: stateDir, Runner: hostexec.Exec{}, Log: log, KubeBin: kubebin.Locate, ReadyTimeout: 3 * time.Minute,
		IDs: userns.DefaultAllocator(), Limits: DefaultLimits()}
}

func (p *Provider) clustersDir() string    { return filepath.Join(p.StateDir, "clusters") }
func (p *Provider) dir(name string) string { return filepath.Join(p.clustersDir(), name) }
