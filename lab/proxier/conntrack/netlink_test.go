//go:build linux

package conntrack

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/proxier/model"
)

// TestCleanStaleEntriesKernel runs the reconciler against the real
// conntrack table of a network namespace the test creates.
func TestCleanStaleEntriesKernel(t *testing.T) {
	if testing.Short() {
		t.Skip("kernel test (-short)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	name := fmt.Sprintf("svpx-ct-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del: %v: %s", err, out)
		}
	})
	nsh, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh, unix.NETLINK_NETFILTER)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	mk := func(proto uint8, replySrc string, sport uint16) *netlink.ConntrackFlow {
		fl := flow(proto, "10.1.1.1", "172.30.0.53", 53, replySrc, 53)
		fl.Forward.SrcPort, fl.Reverse.DstPort = sport, sport
		fl.TimeOut = 100
		// The netlink encoder wants 4-byte IPv4 addresses.
		fl.Forward.SrcIP, fl.Forward.DstIP = fl.Forward.SrcIP.To4(), fl.Forward.DstIP.To4()
		fl.Reverse.SrcIP, fl.Reverse.DstIP = fl.Reverse.SrcIP.To4(), fl.Reverse.DstIP.To4()
		if proto == unix.IPPROTO_TCP {
			fl.ProtoInfo = &netlink.ProtoInfoTCP{State: 3} // ESTABLISHED
		}
		return fl
	}
	for _, fl := range []*netlink.ConntrackFlow{
		mk(unix.IPPROTO_UDP, "10.180.0.53", 4001), // answered by the old DNS pod: stale
		mk(unix.IPPROTO_UDP, "10.180.0.54", 4002), // the serving pod
		mk(unix.IPPROTO_TCP, "10.180.0.53", 4003), // TCP is never touched
	} {
		if err := h.ConntrackCreate(netlink.ConntrackTable, unix.AF_INET, fl); err != nil {
			t.Skipf("cannot create conntrack entries here: %v", err)
		}
	}

	snap := &model.Snapshot{Family: v1.IPv4Protocol, Ports: []*model.ServicePort{
		udpPort("kube-system", "kube-dns", "172.30.0.53", 53, 0, ep("10.180.0.54", 53, true)),
	}}
	res, err := CleanStaleEntries(t.Context(), nil, NewWithHandle(h), snap)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 1 {
		t.Errorf("deleted %d entries, want 1", res.Deleted)
	}
	left, err := h.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	var ports []uint16
	for _, fl := range left {
		ports = append(ports, fl.Forward.SrcPort)
		if fl.Forward.SrcPort == 4001 {
			t.Errorf("the stale flow is still there: %v", fl)
		}
	}
	if len(left) != 2 {
		t.Errorf("flows left (by source port): %v, want 4002 and 4003", ports)
	}
}
