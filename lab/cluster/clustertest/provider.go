// Package clustertest is the hand-written cluster.Provider that unit tests
// share: clusters are names in a map, creation can be held (SetGate) or made
// to fail (FailWith), and a cancelled creation rolls back as the real
// backends do.
package clustertest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svclab/svclab/lab/cluster"
)

// Provider is a hand-written cluster.Provider: clusters are names in a
// map. When gate is set, Create waits for a value on it (or for its
// context, and then fails as the real backends roll back).
type Provider struct {
	mu       sync.Mutex
	clusters map[string]cluster.CreateOptions
	gate     chan struct{}
	failNext error
	// failDelete, while set, fails every Delete of the named clusters.
	failDelete map[string]error
	// Created and Deleted are the names created and deleted, in order
	// (read them under Lock, or once the code under test is quiet).
	Created []string
	Deleted []string
}

// NewProvider returns a Provider holding the existing clusters.
func NewProvider(existing ...string) *Provider {
	p := &Provider{clusters: map[string]cluster.CreateOptions{}}
	for _, n := range existing {
		p.clusters[n] = cluster.CreateOptions{Name: n}
	}
	return p
}

// Cluster is a cluster of the fake Provider: a name, and a kubeconfig
// that names it (and reaches no server).
type Cluster struct{ name string }

func (c Cluster) Name() string { return c.name }
func (c Cluster) Kubeconfig() ([]byte, error) {
	return []byte("apiVersion: v1\nkind: Config\n# the fake cluster " + c.name + "\n"), nil
}
func (c Cluster) RESTConfig() (*rest.Config, error)     { return nil, errors.New("fake") }
func (c Cluster) Client() (kubernetes.Interface, error) { return nil, errors.New("fake") }
func (c Cluster) Nodes(context.Context) ([]cluster.Node, error) {
	return nil, errors.New("fake")
}
func (c Cluster) NodeExec(context.Context, string, []string, cluster.Stdio) error {
	return errors.New("fake")
}

func (p *Provider) Create(ctx context.Context, o cluster.CreateOptions) (cluster.Cluster, error) {
	if err := cluster.ValidateName(o.Name); err != nil {
		return nil, err
	}
	p.mu.Lock()
	gate, fail := p.gate, p.failNext
	p.failNext = nil
	if _, ok := p.clusters[o.Name]; ok {
		p.mu.Unlock()
		return nil, cluster.ErrExists
	}
	p.clusters[o.Name] = o
	p.Created = append(p.Created, o.Name)
	p.mu.Unlock()
	pr := cluster.OrNop(o.Progress)
	done := pr.Start("Starting etcd")
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			fail = ctx.Err()
		}
	}
	done(fail)
	if fail != nil {
		p.mu.Lock()
		delete(p.clusters, o.Name) // rolled back
		p.mu.Unlock()
		return nil, fail
	}
	return Cluster{o.Name}, nil
}

// SetGate makes every later Create wait for the returned channel to
// receive or close (or for its context).
func (p *Provider) SetGate() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gate = make(chan struct{})
	return p.gate
}

// FailWith makes the next Create fail with err.
func (p *Provider) FailWith(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failNext = err
}

func (p *Provider) Get(_ context.Context, name string) (cluster.Cluster, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.clusters[name]; !ok {
		return nil, cluster.ErrNotFound
	}
	return Cluster{name}, nil
}

func (p *Provider) List(context.Context) ([]cluster.Summary, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []cluster.Summary
	for n := range p.clusters {
		out = append(out, cluster.Summary{Name: n, Backend: "fake", State: "running"})
	}
	return out, nil
}

func (p *Provider) Delete(_ context.Context, name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.failDelete[name]; err != nil {
		return err
	}
	if _, ok := p.clusters[name]; !ok {
		return fmt.Errorf("no cluster %s: %w", name, cluster.ErrNotFound)
	}
	delete(p.clusters, name)
	p.Deleted = append(p.Deleted, name)
	return nil
}

func (p *Provider) DeleteAll(context.Context, func(string) bool) error {
	return errors.New("clustertest: DeleteAll refused: nothing under test may delete every cluster")
}

// FailDelete makes every Delete of name fail with err (nil: succeed
// again).
func (p *Provider) FailDelete(name string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failDelete == nil {
		p.failDelete = map[string]error{}
	}
	if err == nil {
		delete(p.failDelete, name)
		return
	}
	p.failDelete[name] = err
}

// Names are the clusters that exist, sorted.
func (p *Provider) Names() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for n := range p.clusters {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Options are what cluster name was created with.
func (p *Provider) Options(name string) cluster.CreateOptions {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.clusters[name]
}
