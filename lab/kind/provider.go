package kind

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/images"
	"github.com/svclab/svclab/lab/kind/dockerd"
	"github.com/svclab/svclab/lab/kind/nodeimage"
)

// BackendName is what Summary.Backend says for kind clusters.
const BackendName = "kind"

// Provider creates svclab's kind clusters.
type Provider struct {
	// StateDir holds one directory per cluster under kind/.
	StateDir string
	Engine   Engine
	Images   ImageSource
	Log      *slog.Logger
	// Shape is the cluster shape: a kind-configs name or the path of a
	// kind configuration; "" picks the nftables or iptables shape by the
	// proxy mode.
	Shape string
	// NodeImage overrides the node image; "" is svclab's own
	// (nodeimage.DefaultImage), built offline and loaded when the engine
	// lacks it.
	NodeImage string
	// NodeImages makes svclab's node image available in the engine.
	NodeImages NodeImageSource
	// ReadyTimeout bounds the wait for nodes, kube-proxy and CoreDNS after
	// kind is done.
	ReadyTimeout time.Duration
	// Client makes a clientset from a kubeconfig; the real one when nil.
	Client ClientFunc
}

var _ cluster.Provider = (*Provider)(nil)

// New returns a Provider for Docker and kind with its state in stateDir.
func New(stateDir string, log *slog.Logger) *Provider {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	daemon := &Daemon{Options: dockerd.Options{Env: os.Getenv(dockerd.EnvHost), NoOwn: os.Getenv(dockerd.EnvOwn) == "no", Log: log}}
	return &Provider{StateDir: stateDir, Engine: Docker{Daemon: daemon}, Images: LabImages{Options: images.Options{Logger: log}},
		NodeImages: LabNodeImage{Log: log}, Log: log, ReadyTimeout: 5 * time.Minute}
}

func (p *Provider) clustersDir() string    { return filepath.Join(p.StateDir, "kind") }
func (p *Provider) dir(name string) string { return filepath.Join(p.clustersDir(), name) }

// Preflight checks that Docker is there and running, with errors that say
// what to do.
func (p *Provider) Preflight(ctx context.Context) (DockerInfo, error) {
	info, err := p.Engine.Check(ctx)
	switch {
	case err == nil:
		return info, nil
	case errors.Is(err, ErrNoDocker):
		return info, &learnerError{cause: err, msg: fmt.Sprintf("the kind backend needs Docker, which is not installed here (%s): %s, or use the embedded backend, which needs no Docker: svclab cluster create --backend embedded",
			detail(err, ErrNoDocker), installHint)}
	case errors.Is(err, ErrDockerDown):
		return info, &learnerError{cause: err, msg: fmt.Sprintf("Docker is installed but its daemon is not running (%s): start it (sudo systemctl start docker, or open Docker Desktop) and try again, or use the embedded backend: svclab cluster create --backend embedded",
			detail(err, ErrDockerDown))}
	case errors.Is(err, ErrDockerDenied):
		return info, &learnerError{cause: err, msg: fmt.Sprintf("this user may not use Docker (%s): run svclab with sudo, or add the user to the docker group (sudo usermod -aG docker $USER, then log in again)",
			detail(err, ErrDockerDenied))}
	}
	return info, fmt.Errorf("Docker does not answer: %w", err)
}

// learnerError is an error whose message is written for the learner in
// full; it still matches its cause with errors.Is.
type learnerError struct {
	cause error
	msg   string
}

func (e *learnerError) Error() string { return e.msg }
func (e *learnerError) Unwrap() error { return e.cause }

// detail is what err says past sentinel's text.
func detail(err, sentinel error) string {
	d := strings.TrimPrefix(strings.TrimPrefix(err.Error(), sentinel.Error()), ": ")
	d = strings.TrimSuffix(strings.TrimPrefix(d, "("), ")")
	if d == "" {
		return sentinel.Error()
	}
	return strings.TrimSuffix(d, ".")
}

// shape picks the shape for opts.
func (p *Provider) shape(opts cluster.CreateOptions) (Shape, error) {
	if p.Shape == "" {
		return DefaultShape(opts.ProxyMode)
	}
	return LoadShape(p.Shape, opts.ProxyMode)
}

// Create creates a kind cluster of the provider's shape and installs the
// bundled proxier. On any failure, or when ctx is cancelled, it deletes
// what it made and leaves alone what was there before.
func (p *Provider) Create(ctx context.Context, opts cluster.CreateOptions) (_ cluster.Cluster, err error) {
	pr := cluster.OrNop(opts.Progress)
	if err := cluster.ValidateName(opts.Name); err != nil {
		return nil, err
	}
	if err := cluster.ValidateProxyMode(opts.ProxyMode); err != nil {
		return nil, err
	}
	shape, err := p.shape(opts)
	if err != nil {
		return nil, err
	}
	setProgress(p.Engine, pr)
	info, err := p.Preflight(ctx)
	if err != nil {
		return nil, err
	}
	nodeImage, svclabNode := p.NodeImage, p.NodeImage == ""
	if svclabNode {
		nodeImage = nodeimage.DefaultImage
	}
	cgroupV1 := info.CgroupVersion == "1"
	config, labels, err := Render(shape, RenderOptions{Name: opts.Name, Workers: opts.Workers, NodeLabels: opts.NodeLabels,
		ProxyMode: opts.ProxyMode, CgroupV1: cgroupV1, NodeImage: nodeImage})
	if err != nil {
		return nil, err
	}
	if err := p.Collect(ctx); err != nil {
		p.Log.Warn("removing orphaned kind clusters", "err", err)
	}
	existing, err := p.Engine.Clusters(ctx)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(p.clustersDir(), 0o755); err != nil {
		return nil, fmt.Errorf("the state directory %s is not writable: %w", p.StateDir, err)
	}
	dir := p.dir(opts.Name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("a kind cluster named %q exists already: delete it with 'svclab cluster delete --backend kind --name %s' or choose another --name: %w", opts.Name, opts.Name, cluster.ErrExists)
		}
		return nil, fmt.Errorf("the state directory %s is not writable: %w", p.StateDir, err)
	}
	if slices.Contains(existing, opts.Name) {
		os.Remove(dir)
		return nil, fmt.Errorf("kind has a cluster named %q already, which svclab did not make (see 'kind get clusters'): choose another --name, or delete it with 'kind delete cluster --name %s': %w", opts.Name, opts.Name, cluster.ErrExists)
	}
	pa := paths{dir}
	st := &State{Name: opts.Name, Shape: shape.Name, Proxier: shape.Proxier, NodeLabels: labels, NodeImage: nodeImage, SvclabNode: svclabNode,
		Created: time.Now().UTC(), Creator: os.Getpid()}
	defer func() {
		if err == nil {
			return
		}
		// Roll back with a fresh context: ctx may be the one cancelled.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		done := pr.Start("Removing the half-created cluster")
		derr := p.destroy(rctx, opts.Name)
		done(derr)
		p.release(rctx)
	}()
	if err := st.save(pa); err != nil {
		return nil, err
	}
	if err := os.WriteFile(pa.config(), config, 0o644); err != nil {
		return nil, err
	}
	if cgroupV1 {
		msg := "this host runs cgroup v1, which Kubernetes deprecated: the kubelets get failCgroupV1: false so that they start; move the host to cgroup v2 (systemd.unified_cgroup_hierarchy=1) when you can"
		pr.Infof("warning: %s", msg)
		p.Log.Warn(msg)
	}
	c := &Cluster{name: opts.Name, dir: dir, st: st, engine: p.Engine, client: p.client()}
	var archive string
	prepare := []cluster.Action{{Name: "Preparing the lab's images", Run: func(ctx context.Context) error {
		var err error
		archive, st.ProxierImage, err = p.Images.Archive(ctx, pr, nil)
		return err
	}}}
	if svclabNode {
		prepare = append(prepare, cluster.Action{Name: "Preparing the node image " + nodeImage, Run: func(ctx context.Context) error {
			if p.NodeImages == nil {
				return errors.New("no node image source")
			}
			return p.NodeImages.EnsureNodeImage(ctx, pr, nodeImage)
		}})
	}
	err = cluster.RunActions(ctx, pr, prepare)
	if err != nil {
		return nil, err
	}
	kl := newProgressLogger(pr, p.Log)
	err = p.Engine.Create(ctx, opts.Name, config, pa.kubeconfig(), kl)
	kl.Close(err)
	if err != nil {
		return nil, fmt.Errorf("kind could not create the cluster: %w", err)
	}
	deadline := time.Now().Add(p.ReadyTimeout)
	actions := []cluster.Action{
		{Name: "Loading the lab's images into the nodes", Run: func(ctx context.Context) error {
			return c.loadArchive(ctx, archive)
		}},
		{Name: "Starting the nodes' tools containers (nft, iptables, conntrack, tcpdump, curl, dig)", Run: c.startNodeTools},
	}
	if st.Proxier != "" {
		actions = append(actions, cluster.Action{Name: fmt.Sprintf("Installing kube-proxy (the bundled proxier, %s mode)", st.Proxier), Run: func(ctx context.Context) error {
			return c.installProxier(ctx)
		}})
	}
	if svclabNode {
		actions = append(actions, cluster.Action{Name: "Keeping CoreDNS's answers inside the lab (no forwarding to outside resolvers)", Run: c.confineCoreDNS})
	}
	actions = append(actions, cluster.Action{Name: "Waiting for the nodes, kube-proxy and CoreDNS to be ready", Run: func(ctx context.Context) error {
		return c.waitReady(ctx, deadline)
	}})
	if err := cluster.RunActions(ctx, pr, actions); err != nil {
		return nil, err
	}
	st.Complete, st.Creator = true, 0
	if err := st.save(pa); err != nil {
		return nil, err
	}
	pr.Infof("kubeconfig: %s", pa.kubeconfig())
	return c, nil
}

// Get returns the kind cluster called name.
func (p *Provider) Get(ctx context.Context, name string) (cluster.Cluster, error) {
	if err := cluster.ValidateName(name); err != nil {
		return nil, err
	}
	dir := p.dir(name)
	st, err := loadState(paths{dir})
	if errors.Is(err, cluster.ErrNotFound) {
		return nil, fmt.Errorf("no kind cluster named %q (see 'svclab cluster list --backend kind'): %w", name, err)
	}
	if err != nil {
		return nil, err
	}
	if !st.Complete {
		if st.creating() {
			return nil, fmt.Errorf("kind cluster %q is still being created (by process %d)", name, st.Creator)
		}
		return nil, fmt.Errorf("kind cluster %q was not created completely (svclab stopped while creating it): delete it with 'svclab cluster delete --backend kind --name %s'", name, name)
	}
	return &Cluster{name: name, dir: dir, st: st, engine: p.Engine, client: p.client()}, nil
}

// List summarises svclab's kind clusters.
func (p *Provider) List(ctx context.Context) ([]cluster.Summary, error) {
	states, err := p.states()
	if err != nil || len(states) == 0 {
		return nil, err
	}
	existing, listErr := p.Engine.Clusters(ctx)
	var out []cluster.Summary
	for _, st := range states {
		s := cluster.Summary{Name: st.Name, Backend: BackendName}
		c := &Cluster{name: st.Name, dir: p.dir(st.Name), st: st}
		s.Server, _ = c.server()
		exists := slices.Contains(existing, st.Name)
		switch {
		case listErr != nil:
			// Docker is down: say so, and let the embedded clusters be
			// listed all the same.
			s.State, s.Detail = "unknown", "Docker does not answer: "+firstLine(listErr.Error())
		case st.creating():
			s.State = "creating"
		case !st.Complete:
			s.State, s.Detail = "orphaned", "its creation was cut short; 'svclab cluster delete --backend kind --all' or the next create removes it"
		case !exists:
			s.State, s.Detail = "missing", "its nodes are gone (deleted outside svclab?); delete it with 'svclab cluster delete --backend kind --name "+st.Name+"'"
		default:
			s.State = "running"
			s.Detail = "shape " + filepath.Base(st.Shape)
			if st.Proxier != "" {
				s.Detail += ", bundled proxier (" + st.Proxier + ")"
			} else {
				s.Detail += ", kind's kube-proxy"
			}
			if nodes, err := p.Engine.Nodes(ctx, st.Name); err == nil {
				s.Detail = fmt.Sprintf("%d nodes, %s", len(nodes), s.Detail)
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// states reads every cluster's state, sorted by name; a damaged one is
// reported with its name only.
func (p *Provider) states() ([]*State, error) {
	entries, err := os.ReadDir(p.clustersDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*State
	for _, e := range entries {
		if !e.IsDir() || cluster.ValidateName(e.Name()) != nil {
			continue
		}
		st, err := loadState(paths{p.dir(e.Name())})
		if err != nil {
			// Made by a create that stopped before writing its state.
			st = &State{Name: e.Name()}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Delete deletes svclab's kind cluster called name.
func (p *Provider) Delete(ctx context.Context, name string) error {
	if err := cluster.ValidateName(name); err != nil {
		return err
	}
	if _, err := os.Stat(p.dir(name)); errors.Is(err, os.ErrNotExist) {
		existing, lerr := p.Engine.Clusters(ctx)
		if lerr == nil && slices.Contains(existing, name) {
			return fmt.Errorf("the kind cluster %q was not made by svclab (or with another --state-dir); svclab leaves it alone: delete it with 'kind delete cluster --name %s'", name, name)
		}
		return fmt.Errorf("no kind cluster named %q (see 'svclab cluster list --backend kind'): %w", name, cluster.ErrNotFound)
	}
	if st, err := loadState(paths{p.dir(name)}); err == nil && st.creating() {
		return fmt.Errorf("kind cluster %q is being created by process %d; stop that first", name, st.Creator)
	}
	if _, err := p.Preflight(ctx); err != nil {
		return err
	}
	err := p.destroy(ctx, name)
	p.release(ctx)
	return err
}

// release ends this process's use of the Docker engine, after the kind
// network is removed when no kind cluster is left on it (svclab's own
// engine then stops).
func (p *Provider) release(ctx context.Context) {
	if err := p.Engine.Release(ctx); err != nil {
		p.Log.Warn("stopping svclab's Docker engine", "err", err)
	}
}

// setProgress shows the engine's own steps (svclab's dockerd starting) in
// p, when the engine has any.
func setProgress(e Engine, p cluster.Progress) {
	if s, ok := e.(interface{ SetProgress(cluster.Progress) }); ok {
		s.SetProgress(p)
	}
}

// destroy deletes the kind cluster (when kind has it) and its state.
func (p *Provider) destroy(ctx context.Context, name string) error {
	pa := paths{p.dir(name)}
	existing, err := p.Engine.Clusters(ctx)
	if err != nil {
		return err
	}
	if slices.Contains(existing, name) {
		if err := p.Engine.Delete(ctx, name, pa.kubeconfig()); err != nil {
			return fmt.Errorf("deleting kind cluster %s: %w", name, err)
		}
	}
	return os.RemoveAll(pa.dir)
}

// Collect removes orphans: clusters whose creation svclab did not finish
// (it was killed) with their nodes, found by kind's labels, and states
// left by a crash before kind was called.
func (p *Provider) Collect(ctx context.Context) error {
	states, err := p.states()
	if err != nil {
		return err
	}
	var errs []error
	for _, st := range states {
		if st.Complete || st.creating() {
			continue
		}
		p.Log.Info("removing an orphaned kind cluster", "cluster", st.Name)
		if err := p.destroy(ctx, st.Name); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", st.Name, err))
		}
	}
	return errors.Join(errs...)
}

// DeleteAll deletes every svclab kind cluster but those keep names, and
// the orphans. kind clusters svclab did not make stay.
func (p *Provider) DeleteAll(ctx context.Context, keep func(name string) bool) error {
	states, err := p.states()
	if err != nil || len(states) == 0 {
		return err
	}
	if _, err := p.Preflight(ctx); err != nil {
		return err
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, st := range states {
		if st.creating() || (keep != nil && keep(st.Name)) {
			continue
		}
		wg.Go(func() {
			if err := p.destroy(ctx, st.Name); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", st.Name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	p.release(ctx)
	return errors.Join(errs...)
}

// client returns the provider's ClientFunc.
func (p *Provider) client() ClientFunc {
	if p.Client != nil {
		return p.Client
	}
	return realClient
}

// serverOf reads the API server URL from a kubeconfig.
func serverOf(kubeconfig []byte) (string, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return "", err
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return "", errors.New("the kubeconfig has no current context")
	}
	cl, ok := cfg.Clusters[ctx.Cluster]
	if !ok {
		return "", errors.New("the kubeconfig's context names no cluster")
	}
	return strings.TrimSpace(cl.Server), nil
}

// LoadImages packs the lab's images, with the extra references (as pods
// name them: nginx:1.25), and imports them into every node of cluster
// name. When the bundled proxier's image changed (a new svclab binary), the
// kube-proxy DaemonSet moves to it.
func (p *Provider) LoadImages(ctx context.Context, name string, extra []string, pr cluster.Progress) error {
	pr = cluster.OrNop(pr)
	if _, err := p.Preflight(ctx); err != nil {
		return err
	}
	cl, err := p.Get(ctx, name)
	if err != nil {
		return err
	}
	c := cl.(*Cluster)
	var archive, proxier string
	actions := []cluster.Action{
		{Name: "Preparing the lab's images", Run: func(ctx context.Context) error {
			var err error
			archive, proxier, err = p.Images.Archive(ctx, pr, extra)
			return err
		}},
		{Name: "Loading the lab's images into the nodes", Run: func(ctx context.Context) error {
			return c.loadArchive(ctx, archive)
		}},
		{Name: "Restarting the nodes' tools containers", Run: c.startNodeTools},
	}
	if c.st.Proxier != "" {
		actions = append(actions, cluster.Action{Name: "Updating kube-proxy (the bundled proxier)", Run: func(ctx context.Context) error {
			if proxier == c.st.ProxierImage {
				pr.Infof("kube-proxy runs %s already", proxier)
				return nil
			}
			old := c.st.ProxierImage
			c.st.ProxierImage = proxier
			if err := c.installProxier(ctx); err != nil {
				c.st.ProxierImage = old
				return err
			}
			pr.Infof("kube-proxy: %s → %s", old, proxier)
			return c.st.save(paths{c.dir})
		}})
	}
	return cluster.RunActions(ctx, pr, actions)
}
