//go:build linux

package nftables

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	netutils "k8s.io/utils/net"
)

// SetServiceCIDRs replaces the ServiceCIDRs whose unallocated addresses
// cluster-ips-check drops; CIDRs of the other family are ignored. Like
// kube-proxy's OnServiceCIDRsChanged it does not force a sync: the rule is
// rewritten by the next full sync. It reports whether the list changed.
func (s *Syncer) SetServiceCIDRs(cidrs []string) bool {
	var mine []string
	for _, c := range cidrs {
		if _, _, err := netutils.ParseCIDRSloppy(c); err != nil {
			continue
		}
		if netutils.IsIPv6CIDRString(c) == (s.cfg.Family == v1.IPv6Protocol) {
			mine = append(mine, c)
		}
	}
	if slices.Equal(mine, s.cfg.ServiceCIDRs) {
		return false
	}
	s.cfg.ServiceCIDRs = mine
	return true
}
