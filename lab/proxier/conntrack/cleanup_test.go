//go:build linux

package conntrack

import (
	"errors"
	"net"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svclab/svclab/lab/proxier/model"
)

// fakeHandle is an in-memory conntrack table.
type fakeHandle struct {
	flows     []*netlink.ConntrackFlow
	listErrs  []error // returned by successive list calls (after the list)
	deleteErr error
	lists     int
}

func (f *fakeHandle) ConntrackTableList(_ netlink.ConntrackTableType, fam netlink.InetFamily) ([]*netlink.ConntrackFlow, error) {
	f.lists++
	var err error
	if len(f.listErrs) > 0 {
		err, f.listErrs = f.listErrs[0], f.listErrs[1:]
	}
	var out []*netlink.ConntrackFlow
	for _, fl := range f.flows {
		if fl.FamilyType == uint8(fam) {
			out = append(out, fl)
		}
	}
	return out, err
}

func (f *fakeHandle) ConntrackDeleteFilters(_ netlink.ConntrackTableType, fam netlink.InetFamily, filters ...netlink.CustomConntrackFilter) (uint, error) {
	if f.deleteErr != nil {
		return 0, f.deleteErr
	}
	var kept []*netlink.ConntrackFlow
	var n uint
	for _, fl := range f.flows {
		match := false
		for _, filter := range filters {
			if fl.FamilyType == uint8(fam) && filter.MatchConntrackFlow(fl) {
				match = true
			}
		}
		if match {
			n++
		} else {
			kept = append(kept, fl)
		}
	}
	f.flows = kept
	return n, nil
}

// flow builds a flow: client → origDst, answered by replySrc.
func flow(proto uint8, client, origDst string, origPort uint16, replySrc string, replyPort uint16) *netlink.ConntrackFlow {
	fl := &netlink.ConntrackFlow{FamilyType: unix.AF_INET}
	fl.Forward.Protocol = proto
	fl.Forward.SrcIP = net.ParseIP(client)
	fl.Forward.SrcPort = 40000
	fl.Forward.DstIP = net.ParseIP(origDst)
	fl.Forward.DstPort = origPort
	fl.Reverse.Protocol = proto
	fl.Reverse.SrcIP = net.ParseIP(replySrc)
	fl.Reverse.SrcPort = replyPort
	fl.Reverse.DstIP = net.ParseIP(client)
	fl.Reverse.DstPort = 40000
	return fl
}

func udpPort(ns, name string, cip string, port, nodePort int, eps ...model.Endpoint) *model.ServicePort {
	return &model.ServicePort{
		Name:      model.ServicePortName{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}, Port: "dns", Protocol: v1.ProtocolUDP},
		ClusterIP: net.ParseIP(cip), Port: port, Protocol: v1.ProtocolUDP, NodePort: nodePort,
		Endpoints: eps,
	}
}

func ep(ip string, port int, serving bool) model.Endpoint {
	return model.Endpoint{IP: ip, Port: port, Ready: serving, Serving: serving}
}

func TestCleanStaleEntries(t *testing.T) {
	dns := udpPort("kube-system", "kube-dns", "10.96.0.10", 53, 0, ep("10.244.1.5", 53, true), ep("10.244.2.7", 53, false))
	np := udpPort("demo", "udp-np", "10.96.0.20", 9000, 30900, ep("10.244.1.9", 9000, true))
	empty := udpPort("demo", "gone", "10.96.0.30", 7000, 30700)
	lb := udpPort("demo", "lb", "10.96.0.40", 5000, 0, ep("10.244.1.11", 5000, true))
	lb.LoadBalancerVIPs = []net.IP{net.ParseIP("192.0.2.40")}
	lb.ExternalIPs = []net.IP{net.ParseIP("198.51.100.40")}
	tcp := &model.ServicePort{
		Name:      model.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "demo", Name: "web"}, Protocol: v1.ProtocolTCP},
		ClusterIP: net.ParseIP("10.96.0.50"), Port: 80, Protocol: v1.ProtocolTCP,
	}
	snap := &model.Snapshot{Family: v1.IPv4Protocol, Ports: []*model.ServicePort{dns, np, empty, lb, tcp}}

	tests := []struct {
		name       string
		flow       *netlink.ConntrackFlow
		wantDelete bool
	}{
		{"UDP ClusterIP flow to a serving endpoint stays", flow(unix.IPPROTO_UDP, "10.244.3.3", "10.96.0.10", 53, "10.244.1.5", 53), false},
		{"UDP ClusterIP flow to a deleted endpoint goes", flow(unix.IPPROTO_UDP, "10.244.3.3", "10.96.0.10", 53, "10.244.9.9", 53), true},
		{"UDP ClusterIP flow to a non-serving endpoint goes", flow(unix.IPPROTO_UDP, "10.244.3.3", "10.96.0.10", 53, "10.244.2.7", 53), true},
		{"UDP flow answered on the wrong port goes", flow(unix.IPPROTO_UDP, "10.244.3.3", "10.96.0.10", 53, "10.244.1.5", 54), true},
		{"UDP flow to another port of the ClusterIP stays", flow(unix.IPPROTO_UDP, "10.244.3.3", "10.96.0.10", 54, "10.244.9.9", 53), false},
		{"TCP flow to a deleted endpoint stays", flow(unix.IPPROTO_TCP, "10.244.3.3", "10.96.0.50", 80, "10.244.9.9", 80), false},
		{"UDP NodePort flow to a stale endpoint goes", flow(unix.IPPROTO_UDP, "172.29.0.1", "172.29.0.3", 30900, "10.244.8.8", 9000), true},
		{"UDP NodePort flow to a serving endpoint stays", flow(unix.IPPROTO_UDP, "172.29.0.1", "172.29.0.3", 30900, "10.244.1.9", 9000), false},
		{"v1.37: UDP ClusterIP flow of a Service without endpoints goes", flow(unix.IPPROTO_UDP, "10.244.3.3", "10.96.0.30", 7000, "10.96.0.30", 7000), true},
		{"v1.37: UDP NodePort flow of a Service without endpoints stays", flow(unix.IPPROTO_UDP, "172.29.0.1", "172.29.0.3", 30700, "172.29.0.3", 30700), false},
		{"UDP load-balancer VIP flow to a stale endpoint goes", flow(unix.IPPROTO_UDP, "203.0.113.1", "192.0.2.40", 5000, "10.244.7.7", 5000), true},
		{"UDP external IP flow to a serving endpoint stays", flow(unix.IPPROTO_UDP, "203.0.113.1", "198.51.100.40", 5000, "10.244.1.11", 5000), false},
		{"UDP flow to something else stays", flow(unix.IPPROTO_UDP, "10.244.3.3", "8.8.8.8", 53, "8.8.8.8", 53), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &fakeHandle{flows: []*netlink.ConntrackFlow{tc.flow}}
			res, err := CleanStaleEntries(t.Context(), nil, NewWithHandle(h), snap)
			if err != nil {
				t.Fatal(err)
			}
			deleted := len(h.flows) == 0
			if deleted != tc.wantDelete {
				t.Errorf("deleted = %v, want %v", deleted, tc.wantDelete)
			}
			if want := map[bool]int{true: 1, false: 0}[tc.wantDelete]; res.Deleted != want || len(res.Stale) != want {
				t.Errorf("result %+v", res)
			}
		})
	}
}

func TestCleanStaleEntriesErrors(t *testing.T) {
	snap := &model.Snapshot{Family: v1.IPv4Protocol, Ports: []*model.ServicePort{udpPort("a", "b", "10.96.0.10", 53, 0)}}
	stale := flow(unix.IPPROTO_UDP, "10.244.3.3", "10.96.0.10", 53, "10.244.9.9", 53)
	fresh := func() []*netlink.ConntrackFlow {
		return []*netlink.ConntrackFlow{stale, flow(unix.IPPROTO_UDP, "10.244.3.4", "10.96.0.10", 53, "10.244.9.8", 53)}
	}

	t.Run("EINTR is retried", func(t *testing.T) {
		h := &fakeHandle{flows: fresh(), listErrs: []error{unix.EINTR, unix.EINTR}}
		res, err := CleanStaleEntries(t.Context(), nil, NewWithHandle(h), snap)
		if err != nil || res.Deleted != 2 || h.lists != 3 {
			t.Errorf("res %+v err %v lists %d", res, err, h.lists)
		}
	})
	t.Run("persistent EINTR cleans the partial result", func(t *testing.T) {
		h := &fakeHandle{flows: fresh(), listErrs: slices.Repeat([]error{unix.EINTR}, maxAttemptsEINTR)}
		res, err := CleanStaleEntries(t.Context(), nil, NewWithHandle(h), snap)
		if err != nil || res.Deleted != 2 {
			t.Errorf("res %+v err %v", res, err)
		}
	})
	t.Run("list failure deletes nothing", func(t *testing.T) {
		h := &fakeHandle{flows: fresh(), listErrs: []error{unix.EPERM}}
		_, err := CleanStaleEntries(t.Context(), nil, NewWithHandle(h), snap)
		if !errors.Is(err, unix.EPERM) || len(h.flows) != 2 {
			t.Errorf("err %v flows %d", err, len(h.flows))
		}
	})
	t.Run("delete failure is reported", func(t *testing.T) {
		h := &fakeHandle{flows: fresh(), deleteErr: unix.ENOBUFS}
		_, err := CleanStaleEntries(t.Context(), nil, NewWithHandle(h), snap)
		if !errors.Is(err, unix.ENOBUFS) {
			t.Errorf("err %v", err)
		}
	})
}
