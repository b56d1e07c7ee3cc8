package conntrack

import (
	"fmt"
	"net"
	"strconv"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The pieces of the reconciler that read netlink's flows, whose fields
// vishvananda/netlink defines on Linux only (flows_other.go).

// table is the conntrack table the reconciler works on.
const table = netlink.ConntrackTable

// udpFlow reads a flow the way CleanStaleEntries matches it: whether it
// is UDP, its original destination and reply source (host:port), and its
// original destination port.
func udpFlow(f *netlink.ConntrackFlow) (ok bool, origDst, replySrc string, dstPort int) {
	if f.Forward.Protocol != unix.IPPROTO_UDP {
		return false, "", "", 0
	}
	origDst = net.JoinHostPort(f.Forward.DstIP.String(), strconv.Itoa(int(f.Forward.DstPort)))
	replySrc = net.JoinHostPort(f.Reverse.SrcIP.String(), strconv.Itoa(int(f.Reverse.SrcPort)))
	return true, origDst, replySrc, int(f.Forward.DstPort)
}

// deleteFilter matches exactly flows.
func deleteFilter(flows []*netlink.ConntrackFlow) netlink.CustomConntrackFilter {
	return newFlowFilter(flows)
}

// flowFilter matches flows by their full original and reply tuples.
type flowFilter struct {
	flows map[string]bool
}

var _ netlink.CustomConntrackFilter = (*flowFilter)(nil)

func newFlowFilter(flows []*netlink.ConntrackFlow) *flowFilter {
	f := &flowFilter{flows: make(map[string]bool, len(flows))}
	for _, flow := range flows {
		f.flows[flowKey(flow)] = true
	}
	return f
}

func flowKey(flow *netlink.ConntrackFlow) string {
	return fmt.Sprintf("%d#%s#%d#%s#%d#%s#%d#%s#%d",
		flow.Forward.Protocol,
		flow.Forward.SrcIP, flow.Forward.SrcPort,
		flow.Forward.DstIP, flow.Forward.DstPort,
		flow.Reverse.SrcIP, flow.Reverse.SrcPort,
		flow.Reverse.DstIP, flow.Reverse.DstPort)
}

// MatchConntrackFlow is part of netlink.CustomConntrackFilter.
func (f *flowFilter) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	return f.flows[flowKey(flow)]
}
