//go:build !linux

package conntrack

import "github.com/vishvananda/netlink"

// This file lets svclab build on systems other than Linux (macOS, where
// only the kind backend runs, and the proxier only inside kind's Linux
// nodes). conntrack is a Linux table: there vishvananda/netlink's flows
// have no fields and its calls fail, so ListEntries reports that error
// and CleanStaleEntries stops before it reads a flow.

// table is the conntrack table the reconciler works on (netlink's
// ConntrackTable, which it defines on Linux only).
const table netlink.ConntrackTableType = 1

// udpFlow reads no flow: they have no fields here.
func udpFlow(*netlink.ConntrackFlow) (ok bool, origDst, replySrc string, dstPort int) {
	return false, "", "", 0
}

// deleteFilter matches nothing: netlink's filter is a placeholder here.
func deleteFilter([]*netlink.ConntrackFlow) netlink.CustomConntrackFilter {
	return netlink.CustomConntrackFilter{}
}
