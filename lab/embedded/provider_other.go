//go:build !linux

package embedded

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded/hostexec"
)

// The embedded backend is made of Linux: network namespaces on a bridge,
// nftables, user namespaces, cgroups and runc. This file lets svclab build
// on other systems (macOS, where the kind backend runs clusters in
// Docker's Linux VM): there the Provider has no clusters, makes none, and
// says why in one error.

// ErrNeedsLinux is what the embedded backend answers off Linux.
var ErrNeedsLinux = fmt.Errorf("the embedded backend needs Linux (network namespaces, nftables, runc); on this machine use --backend kind: %w", errors.ErrUnsupported)

// Preflight reports ErrNeedsLinux.
func Preflight() error { return ErrNeedsLinux }

// The roles of an embedded cluster's processes report ErrNeedsLinux.
func runSupervisor(string) int   { return needsLinux() }
func runNodeAgents(string) int   { return needsLinux() }
func runLoadBalancer(string) int { return needsLinux() }

func needsLinux() int {
	fmt.Fprintln(os.Stderr, ErrNeedsLinux)
	return 1
}

// Create reports ErrNeedsLinux.
func (p *Provider) Create(_ context.Context, opts cluster.CreateOptions) (cluster.Cluster, error) {
	if err := cluster.ValidateName(opts.Name); err != nil {
		return nil, err
	}
	return nil, ErrNeedsLinux
}

// Get finds no cluster: there are no embedded clusters here.
func (p *Provider) Get(_ context.Context, name string) (cluster.Cluster, error) {
	return nil, notHere(name)
}

// List is empty: there are no embedded clusters here.
func (p *Provider) List(context.Context) ([]cluster.Summary, error) { return nil, nil }

// Delete finds no cluster: there are no embedded clusters here.
func (p *Provider) Delete(_ context.Context, name string) error { return notHere(name) }

// DeleteAll reports ErrNeedsLinux.
func (p *Provider) DeleteAll(context.Context, func(name string) bool) error { return ErrNeedsLinux }

// Sweep reports ErrNeedsLinux.
func Sweep(context.Context, hostexec.Runner) error { return ErrNeedsLinux }

// notHere is Get's and Delete's answer: cluster.ErrNotFound, as on Linux
// for a name no cluster has, so that commands go on to the kind backend.
func notHere(name string) error {
	if err := cluster.ValidateName(name); err != nil {
		return err
	}
	return fmt.Errorf("no cluster named %q (see 'svclab cluster list'): %w", name, cluster.ErrNotFound)
}
