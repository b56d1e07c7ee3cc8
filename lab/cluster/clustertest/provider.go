package clustertest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/svclab/svclab/lab/cluster"
)

// Provider is a hand-written cluster.Provider whose clusters are
// Clusters. When gate is set, Create waits for a value on it (or for its
// context, and then fails as the real backends roll back).
type Provider struct {
	mu       sync.Mutex
	clusters map[string]*Cluster
	options  map[string]cluster.CreateOptions
	build    func(cluster.CreateOptions) *Cluster
	gate     chan struct{}
	failNext error
	// failDelete, while set, fails every Delete of the named clusters.
	failDelete map[string]error
	// Created and Deleted are the names created and deleted, in order
	// (read them under Lock, or once the code under test is quiet).
	Created []string
	Deleted []string
}

// NewProvider returns a Provider holding the existing clusters (each
// NewCluster(name)).
func NewProvider(existing ...string) *Provider {
	p := &Provider{clusters: map[string]*Cluster{}, options: map[string]cluster.CreateOptions{}}
	for _, n := range existing {
		p.Add(NewCluster(n))
	}
	return p
}

// Add makes c one of the provider's clusters, as if it had been created
// (it replaces a cluster of the same name).
func (p *Provider) Add(c *Cluster) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clusters[c.Name()] = c
	p.options[c.Name()] = cluster.CreateOptions{Name: c.Name()}
}

// MakeWith makes Create build its clusters with build. By default a
// cluster is NewCluster with the options' name, workers and node labels.
func (p *Provider) MakeWith(build func(cluster.CreateOptions) *Cluster) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.build = build
}

// newCluster is the cluster Create makes for o.
func newCluster(o cluster.CreateOptions) *Cluster {
	return NewCluster(o.Name, WithWorkers(o.Workers), WithNodeLabels(o.NodeLabels))
}

func (p *Provider) Create(ctx context.Context, o cluster.CreateOptions) (cluster.Cluster, error) {
	if err := cluster.ValidateName(o.Name); err != nil {
		return nil, err
	}
	p.mu.Lock()
	gate, fail, build := p.gate, p.failNext, p.build
	p.failNext = nil
	if _, ok := p.clusters[o.Name]; ok {
		p.mu.Unlock()
		return nil, cluster.ErrExists
	}
	if build == nil {
		build = newCluster
	}
	c := build(o)
	// A cluster created again under a name is a new life of it, with a
	// new CA, as the real backends' are.
	for _, n := range p.Created {
		if n == o.Name {
			c.life++
		}
	}
	c.life++
	p.clusters[o.Name] = c
	p.options[o.Name] = o
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
		delete(p.options, o.Name)
		p.mu.Unlock()
		return nil, fail
	}
	return c, nil
}

// SetGate makes every later Create wait for the returned channel to
// receive or close (or for its context).
func (p *Provider) SetGate() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gate = make(chan struct{})
	return p.gate
}

// FailWith makes the next Create fail with err (nil: succeed).
func (p *Provider) FailWith(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failNext = err
}

func (p *Provider) Get(_ context.Context, name string) (cluster.Cluster, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.clusters[name]
	if !ok {
		return nil, cluster.ErrNotFound
	}
	return c, nil
}

func (p *Provider) List(context.Context) ([]cluster.Summary, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []cluster.Summary
	for n, c := range p.clusters {
		out = append(out, cluster.Summary{Name: n, Backend: c.Backend(), State: "running"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
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
	delete(p.options, name)
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
	return p.options[name]
}
