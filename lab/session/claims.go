package session

import (
	"context"
	"fmt"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/owner"
)

// claimCluster claims cluster name of backend for this process while it
// runs (nil owners: nothing is claimed); the error says who holds it when
// somebody does.
func claimCluster(ctx context.Context, owners *owner.Registry, backend, name string, force bool) (*owner.Lease, error) {
	if owners == nil {
		return nil, nil
	}
	if backend == "" {
		backend = "embedded"
	}
	l, err := owners.Acquire(ctx, owner.Claim{Backend: backend, Cluster: name}, force)
	if owner.IsInUse(err) {
		return nil, fmt.Errorf("%w: wait until it is done, run on another cluster (--cluster NAME; without it the run makes clusters of its own), or take it over with --force", err)
	}
	return l, err
}

// ownClusterBase is the base name of the clusters a run makes for itself
// when it is given none: "ex-" and five random letters and digits, which
// name no cluster p has (so that a run never lands on somebody's lab).
func ownClusterBase(ctx context.Context, p cluster.Provider) (string, error) {
	return cluster.FreeName(ctx, p, "ex-")
}
