package daemon

import (
	"context"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svclab/svclab/lab/proxier/model"
)

// Applied describes what an Applier did.
type Applied struct {
	// Full is true for a full sync.
	Full bool
	// Rewritten lists the Services whose rules a partial sync rewrote.
	Rewritten []types.NamespacedName
	// CleanupFailed is set when deleting stale nftables chains failed
	// (the sync itself went on, as a full one).
	CleanupFailed bool
	// RulesWritten counts the rules written per table (iptables).
	RulesWritten map[string]int
	// LargeClusterMode is set by iptables above 1000 endpoints; the
	// periodic full resync is then skipped, as upstream.
	LargeClusterMode bool
}

// Applier programs model snapshots into the kernel.
type Applier interface {
	// Mode is "nftables" or "iptables".
	Mode() string
	// Apply programs snap; full forces a full sync (the applier may also
	// decide on one itself, e.g. after a failure). On error the previous
	// ruleset is still in place and the next Apply is full.
	Apply(ctx context.Context, snap *model.Snapshot, full bool) (*Applied, error)
	// Rules lists the currently programmed rules and set/map elements,
	// one comparable line each, for the event stream's rule diffs.
	Rules(ctx context.Context) ([]string, error)
	// SetServiceCIDRs records the cluster's ServiceCIDRs (used by the
	// next full sync).
	SetServiceCIDRs(cidrs []string)
}
