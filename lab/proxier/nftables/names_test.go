//go:build linux

package nftables

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/knftables"

	"github.com/svclab/svclab/lab/proxier/model"
)

const (
	longNS   = "very-long-namespace-name-abcdefghijklmnopqrstuvwxyz0123456789xx"
	longSvc  = "very-long-service-name-why-would-you-even-do-this-i-mean-really"
	longPort = "port-443-providing-the-hypertext-transmission-protocol-with-tls"
)

// Cases from upstream Test_servicePortChainNameBase.
func TestServicePortChainBase(t *testing.T) {
	tests := []struct {
		ns, svc, port string
		proto         v1.Protocol
		want          string
	}{
		{"testing", "service", "http", v1.ProtocolTCP, "P4ZYZVCF-testing/service/tcp/http"},
		{"testing", "service", "https", v1.ProtocolTCP, "LZBRENCP-testing/service/tcp/https"},
		{longNS, longSvc, longPort, v1.ProtocolSCTP, "KR6NACJP-" + longNS + "/" + longSvc + "/sctp/" + longPort},
		// From the fact sheet.
		{"demo", "web", "http", v1.ProtocolTCP, "AXK6CI2C-demo/web/tcp/http"},
	}
	for _, tc := range tests {
		name := model.ServicePortName{NamespacedName: types.NamespacedName{Namespace: tc.ns, Name: tc.svc}, Port: tc.port, Protocol: tc.proto}
		if got := ServicePortChainBase(name); got != tc.want {
			t.Errorf("ServicePortChainBase(%v) = %q, want %q", name, got, tc.want)
		}
	}
}

// Cases from upstream Test_servicePortEndpointChainNameBase.
func TestEndpointChainBase(t *testing.T) {
	long := longNS + "/" + longSvc + "/sctp/" + longPort
	tests := []struct {
		ns, svc, port string
		proto         v1.Protocol
		endpoint      string
		want          string
	}{
		{"testing", "service", "http", v1.ProtocolTCP, "10.180.0.1:80", "JO2XBXZR-testing/service/tcp/http__10.180.0.1/80"},
		{"testing", "service", "http", v1.ProtocolTCP, "10.180.0.2:80", "5S6H3H22-testing/service/tcp/http__10.180.0.2/80"},
		{"testing", "service", "http", v1.ProtocolTCP, "[fd80:abcd:12::a1b2:c3d4:e5f6:9999]:80", "U7E2ET36-testing/service/tcp/http__fd80.abcd.12..a1b2.c3d4.e5f6.9999/80"},
		{longNS, longSvc, longPort, v1.ProtocolSCTP, "[1234:5678:9abc:def0::abc:1234]:443", "5YS7AFEA-" + long + "__1234.5678.9abc.def0..abc.1234/443"},
		{longNS, longSvc, longPort, v1.ProtocolSCTP, "[1234:5678:9abc:def0::abcd:1234:5678]:443", "CI6C53Q3-" + long + "__1234.5678.9abc.def0..abcd.1234..."},
		{longNS, longSvc, longPort, v1.ProtocolSCTP, "[1234:5678:9abc:def0::abcd:1234:8765]:443", "2FLXFK6X-" + long + "__1234.5678.9abc.def0..abcd.1234..."},
	}
	for _, tc := range tests {
		host, port, err := net.SplitHostPort(tc.endpoint)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(port)
		name := model.ServicePortName{NamespacedName: types.NamespacedName{Namespace: tc.ns, Name: tc.svc}, Port: tc.port, Protocol: tc.proto}
		if got := EndpointChainBase(name, model.Endpoint{IP: host, Port: p}); got != tc.want {
			t.Errorf("EndpointChainBase(%v, %s) = %q, want %q", name, tc.endpoint, got, tc.want)
		}
	}
}

// Cases from upstream TestTruncateNFTablesComment.
func TestTruncateComment(t *testing.T) {
	tests := []struct{ in, want string }{
		{"kube-system/kube-dns:dns", "kube-system/kube-dns:dns"},
		{strings.Repeat("a", knftables.CommentLengthMax), strings.Repeat("a", knftables.CommentLengthMax)},
		{strings.Repeat("a", knftables.CommentLengthMax+1), strings.Repeat("a", knftables.CommentLengthMax)},
		{
			"loft-acme-platform-services-team-dev-v-shared-workloads-ns-001/my-api-svc-x-my-api-namespace-x-acme-shared-vcluster--a1b2c3d4e:http",
			"loft-acme-platform-services-team-dev-v-shared-workloads-ns-001/my-api-svc-x-my-api-namespace-x-acme-shared-vcluster--a1b2c3d4e:h",
		},
	}
	for _, tc := range tests {
		if got := truncateComment(tc.in); got != tc.want {
			t.Errorf("truncateComment(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestSyncTruncatesNoEndpointServiceComment transcribes upstream's
// TestSyncProxyRulesTruncatesNoEndpointServiceComment.
func TestSyncTruncatesNoEndpointServiceComment(t *testing.T) {
	nft, s := newFakeSyncer(t, upstreamConfig(t))
	ns := "loft-acme-platform-services-team-dev-v-shared-workloads-ns-001"
	name := "my-api-svc-x-my-api-namespace-x-acme-shared-vcluster--a1b2c3d4e"
	snap := decodeSnapshot(t, yamlClusterIP(ns, name, "172.30.0.47", "http", 80))
	if _, err := s.Sync(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	full := ns + "/" + name + ":http"
	elem := nft.Table.Maps[noEndpointServicesMap].FindElement("172.30.0.47", "tcp", "80")
	if elem == nil || elem.Comment == nil || *elem.Comment != full[:knftables.CommentLengthMax] {
		t.Fatalf("want truncated comment, got %+v", elem)
	}
	if strings.Contains(nft.Dump(), full) {
		t.Fatal("dump contains the untruncated comment")
	}
}

// TestEndpointDNATRules transcribes upstream's test of the same name.
func TestEndpointDNATRules(t *testing.T) {
	tests := []struct {
		name   string
		family v1.IPFamily
		svcIP  string
		epIPs  []string
		want   string
	}{
		{"ipv4 single endpoint", v1.IPv4Protocol, "172.30.0.41", []string{"10.180.0.1"}, "meta l4proto tcp dnat to 10.180.0.1:80"},
		{"ipv6 single endpoint", v1.IPv6Protocol, "fd00:172:30::41", []string{"fd00:10:180::1"}, "meta l4proto tcp dnat to [fd00:10:180::1]:80"},
		{"ipv4 multiple endpoints", v1.IPv4Protocol, "172.30.0.41", []string{"10.180.0.1", "10.180.0.2"}, "meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.180.0.1 . 80 , 1 : 10.180.0.2 . 80 }"},
		{"ipv6 multiple endpoints", v1.IPv6Protocol, "fd00:172:30::41", []string{"fd00:10:180::1", "fd00:10:180::2"}, "meta l4proto tcp dnat ip6 addr . port to numgen random mod 2 map { 0 : fd00:10:180::1 . 80 , 1 : fd00:10:180::2 . 80 }"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sp := &model.ServicePort{
				Name:      model.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns1", Name: "svc1"}, Port: "p80", Protocol: v1.ProtocolTCP},
				ClusterIP: net.ParseIP(tc.svcIP), Port: 80, Protocol: v1.ProtocolTCP,
			}
			for _, ip := range tc.epIPs {
				sp.Endpoints = append(sp.Endpoints, model.Endpoint{IP: ip, Port: 80, Local: true, Ready: true, Serving: true})
			}
			fam, cidr := knftables.IPv4Family, "10.0.0.0/8"
			if tc.family == v1.IPv6Protocol {
				fam, cidr = knftables.IPv6Family, "fd00:10::/64"
			}
			nft := knftables.NewFake(fam, Table)
			s, err := New(Config{Family: tc.family, ClusterCIDR: cidr}, nft, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Sync(context.Background(), &model.Snapshot{Family: tc.family, NodeName: testNodeName, Ports: []*model.ServicePort{sp}}); err != nil {
				t.Fatal(err)
			}
			rules, err := nft.ListRules(context.Background(), "service-ULMVA6XW-ns1/svc1/tcp/p80")
			if err != nil {
				t.Fatal(err)
			}
			if len(rules) != 1 || rules[0].Rule != tc.want {
				t.Errorf("got rules %v, want [%q]", rules, tc.want)
			}
		})
	}
}
