package model

import (
	"fmt"
	"net"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	netutils "k8s.io/utils/net"
)

// nodePortAddresses keywords, as in KubeProxyConfiguration.
const (
	NodePortAddressesPrimary   = "primary"
	NodePortAddressesLocalhost = "localhost"
	NodePortAddressesAll       = "all"
)

// NodePortAddresses selects the local addresses on which NodePorts are
// served (kube-proxy's --nodeport-addresses), for one IP family.
type NodePortAddresses struct {
	family   v1.IPFamily
	specs    []string
	cidrs    []*net.IPNet
	matchAll bool
}

// NewNodePortAddresses expands the keywords "primary" (nodeIP/32),
// "localhost" and "all", keeps the CIDRs of family and parses them. An empty
// result matches all local addresses.
func NewNodePortAddresses(family v1.IPFamily, specs []string, nodeIP net.IP) (*NodePortAddresses, error) {
	npa := &NodePortAddresses{family: family}
	for _, s := range specs {
		s = strings.TrimSpace(s)
		var expanded []string
		switch s {
		case NodePortAddressesPrimary:
			if nodeIP != nil && !nodeIP.IsLoopback() {
				if nodeIP.To4() != nil {
					expanded = []string{nodeIP.String() + "/32"}
				} else {
					expanded = []string{nodeIP.String() + "/128"}
				}
			}
		case NodePortAddressesLocalhost:
			expanded = []string{"127.0.0.0/8", "::1/128"}
		case NodePortAddressesAll:
			expanded = []string{"0.0.0.0/0", "::/0"}
		default:
			expanded = []string{s}
		}
		for _, e := range expanded {
			_, cidr, err := netutils.ParseCIDRSloppy(e)
			if err != nil {
				return nil, fmt.Errorf("nodePortAddresses: %q is neither a CIDR nor one of primary, localhost, all: %w", s, err)
			}
			if ipFamilyOf(cidr.IP) != family {
				continue
			}
			npa.specs = append(npa.specs, e)
			npa.cidrs = append(npa.cidrs, cidr)
		}
	}
	if len(npa.cidrs) == 0 {
		npa.matchAll = true
	}
	for _, c := range npa.cidrs {
		if ones, _ := c.Mask.Size(); ones == 0 {
			npa.matchAll = true
		}
	}
	return npa, nil
}

// MatchAll reports whether NodePorts are accepted on every local address.
func (n *NodePortAddresses) MatchAll() bool { return n.matchAll }

// String lists the CIDRs of this family.
func (n *NodePortAddresses) String() string { return fmt.Sprintf("%v", n.specs) }

// ContainsLoopback reports whether a CIDR includes 127.0.0.1 or ::1.
func (n *NodePortAddresses) ContainsLoopback() bool {
	if n.matchAll {
		return true
	}
	for _, c := range n.cidrs {
		if c.Contains(net.IPv4(127, 0, 0, 1)) || c.Contains(net.IPv6loopback) {
			return true
		}
	}
	return false
}

// NodeIPs returns the local addresses (e.g. the node's interface addresses)
// that fall into one of the CIDRs (all of this family if MatchAll),
// deduplicated and sorted.
func (n *NodePortAddresses) NodeIPs(localAddrs []net.IP) []net.IP {
	seen := map[string]net.IP{}
	for _, ip := range localAddrs {
		if ipFamilyOf(ip) != n.family {
			continue
		}
		match := n.matchAll
		for _, c := range n.cidrs {
			match = match || c.Contains(ip)
		}
		if match {
			seen[ip.String()] = ip
		}
	}
	out := make([]net.IP, 0, len(seen))
	for _, ip := range seen {
		out = append(out, ip)
	}
	slices.SortFunc(out, func(a, b net.IP) int { return strings.Compare(a.String(), b.String()) })
	return out
}
