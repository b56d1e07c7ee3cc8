package render

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"

	v1 "k8s.io/api/core/v1"
	netutils "k8s.io/utils/net"

	"github.com/svclab/svclab/lab/proxier/model"
	"github.com/svclab/svclab/lab/proxier/nftables"
)

// renderNFTables writes what kube-proxy's nftables proxier programs for
// snap: the resulting ruleset, or the first sync's transaction.
func renderNFTables(ctx context.Context, logger *slog.Logger, opts Options, family v1.IPFamily, nodeIP net.IP, npa *model.NodePortAddresses, localAddrs []net.IP, snap *model.Snapshot, w io.Writer) error {
	var serviceCIDRs []string
	for _, c := range opts.ServiceCIDRs {
		if _, _, err := netutils.ParseCIDRSloppy(c); err != nil {
			return fmt.Errorf("--service-cidr %q: %w", c, err)
		}
		// Like kube-proxy, keep only the CIDRs of this family.
		if netutils.IsIPv6CIDRString(c) == (family == v1.IPv6Protocol) {
			serviceCIDRs = append(serviceCIDRs, c)
		}
	}
	out, err := nftables.Render(ctx, logger, nftables.Config{
		Family:            family,
		NodeIP:            nodeIP,
		ClusterCIDR:       familyCIDR(opts.ClusterCIDR, family),
		ServiceCIDRs:      serviceCIDRs,
		NodePortAddresses: npa,
		LocalAddresses:    localAddrs,
		MasqueradeAll:     opts.MasqueradeAll,
	}, snap)
	if err != nil {
		return err
	}
	text := out.Ruleset
	if opts.Output == OutputTransaction {
		text = out.Transaction
	}
	_, err = io.WriteString(w, text)
	return err
}
