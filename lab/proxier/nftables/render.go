//go:build linux

package nftables

import (
	"context"
	"fmt"
	"log/slog"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/svclab/svclab/lab/proxier/model"
)

// Rendered is the output of Render.
type Rendered struct {
	// Transaction is the "nft -f" input of the first full sync on a node
	// without a kube-proxy table (including the add+delete commands that
	// clean up leftovers).
	Transaction string
	// Ruleset is the resulting table as sorted "add" commands (the form of
	// knftables.Fake.Dump); it is also valid "nft -f" input.
	Ruleset string
}

// Render computes what kube-proxy would program for snap on a fresh node,
// without touching the kernel.
func Render(ctx context.Context, logger *slog.Logger, cfg Config, snap *model.Snapshot) (*Rendered, error) {
	family := knftables.IPv4Family
	if cfg.Family == v1.IPv6Protocol {
		family = knftables.IPv6Family
	}
	fake := knftables.NewFake(family, Table)
	s, err := New(cfg, fake, logger)
	if err != nil {
		return nil, err
	}
	res, err := s.Sync(ctx, snap)
	if err != nil {
		return nil, fmt.Errorf("render nftables: %w", err)
	}
	return &Rendered{Transaction: res.Transaction.String(), Ruleset: fake.Dump()}, nil
}
