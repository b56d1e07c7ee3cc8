package model

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

const testNode = "node-a"

func svc(ns, name string, mutate func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{
			ClusterIP: "172.30.0.10",
			Ports:     []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromString("web")}},
		},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func slice(ns, svcName, name string, mutate func(*discovery.EndpointSlice)) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{discovery.LabelServiceName: svcName},
		},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.180.0.1"}, NodeName: ptr.To(testNode)},
			{Addresses: []string{"10.180.2.1"}, NodeName: ptr.To("node-b")},
		},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

// describe renders the interesting parts of a snapshot, one line per port.
func describe(s *Snapshot) string {
	var b strings.Builder
	for _, sp := range s.Ports {
		fmt.Fprintf(&b, "%s/%s cip=%s port=%d", sp.Name, sp.Protocol, sp.ClusterIP, sp.Port)
		if sp.NodePort != 0 {
			fmt.Fprintf(&b, " np=%d", sp.NodePort)
		}
		if sp.HealthCheckNodePort != 0 {
			fmt.Fprintf(&b, " hc=%d", sp.HealthCheckNodePort)
		}
		if len(sp.ExternalIPs) > 0 {
			fmt.Fprintf(&b, " ext=%v", sp.ExternalIPs)
		}
		if len(sp.LoadBalancerVIPs) > 0 {
			fmt.Fprintf(&b, " lb=%v", sp.LoadBalancerVIPs)
		}
		if len(sp.LoadBalancerSourceRanges) > 0 {
			fmt.Fprintf(&b, " lbsr=%v", sp.LoadBalancerSourceRanges)
		}
		if sp.SessionAffinityClientIP {
			fmt.Fprintf(&b, " affinity=%ds", sp.StickyMaxAgeSeconds)
		}
		if sp.ExternalPolicyLocal {
			b.WriteString(" etp=Local")
		}
		if sp.InternalPolicyLocal {
			b.WriteString(" itp=Local")
		}
		b.WriteString(" eps=[")
		for i, ep := range sp.Endpoints {
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(ep.String())
			var flags []string
			if ep.Local {
				flags = append(flags, "local")
			}
			if ep.Ready {
				flags = append(flags, "ready")
			}
			if ep.Serving {
				flags = append(flags, "serving")
			}
			if ep.Terminating {
				flags = append(flags, "terminating")
			}
			if len(ep.ZoneHints) > 0 {
				flags = append(flags, "zones="+strings.Join(ep.ZoneHints, "+"))
			}
			if len(ep.NodeHints) > 0 {
				flags = append(flags, "nodes="+strings.Join(ep.NodeHints, "+"))
			}
			fmt.Fprintf(&b, "(%s)", strings.Join(flags, ","))
		}
		b.WriteString("]\n")
	}
	return b.String()
}

func TestBuild(t *testing.T) {
	tests := []struct {
		name     string
		family   v1.IPFamily
		services []*v1.Service
		slices   []*discovery.EndpointSlice
		want     string
	}{{
		name:     "ClusterIP with named target port resolved from the slice",
		services: []*v1.Service{svc("demo", "web", nil)},
		slices:   []*discovery.EndpointSlice{slice("demo", "web", "web-1", nil)},
		want:     "demo/web:http/TCP cip=172.30.0.10 port=80 eps=[10.180.0.1:8080(local,ready,serving) 10.180.2.1:8080(ready,serving)]\n",
	}, {
		name: "headless and ExternalName are skipped",
		services: []*v1.Service{
			svc("demo", "headless", func(s *v1.Service) { s.Spec.ClusterIP = v1.ClusterIPNone }),
			svc("demo", "noip", func(s *v1.Service) { s.Spec.ClusterIP = "" }),
			svc("demo", "extname", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeExternalName
				s.Spec.ExternalName = "example.com"
			}),
		},
		want: "",
	}, {
		name: "service of the other family is skipped, dual-stack picks this family's ClusterIP",
		services: []*v1.Service{
			svc("demo", "v6only", func(s *v1.Service) { s.Spec.ClusterIP = "fd00::10" }),
			svc("demo", "dual", func(s *v1.Service) {
				s.Spec.ClusterIP = "fd00::11"
				s.Spec.ClusterIPs = []string{"fd00::11", "172.30.0.11"}
				s.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol}
				s.Spec.ExternalIPs = []string{"2001:db8::5", "192.168.99.5"}
			}),
		},
		want: "demo/dual:http/TCP cip=172.30.0.11 port=80 ext=[192.168.99.5] eps=[]\n",
	}, {
		name:   "IPv6 family",
		family: v1.IPv6Protocol,
		services: []*v1.Service{
			svc("demo", "v6", func(s *v1.Service) { s.Spec.ClusterIP = "fd00:10:96::10" }),
		},
		slices: []*discovery.EndpointSlice{
			slice("demo", "v6", "v4-slice", nil),
			slice("demo", "v6", "v6-slice", func(s *discovery.EndpointSlice) {
				s.AddressType = discovery.AddressTypeIPv6
				s.Endpoints = []discovery.Endpoint{{Addresses: []string{"fd00:10::1"}}}
			}),
		},
		want: "demo/v6:http/TCP cip=fd00:10:96::10 port=80 eps=[[fd00:10::1]:8080(ready,serving)]\n",
	}, {
		name: "LoadBalancer: ipMode Proxy is not a VIP, source ranges trimmed, health check node port",
		services: []*v1.Service{svc("demo", "lb", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeLoadBalancer
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = 30000
			s.Spec.Ports[0].NodePort = 30080
			s.Spec.LoadBalancerSourceRanges = []string{" 203.0.113.0/25", "2001:db8::/64", "bogus"}
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{
				{IP: "1.2.3.4"},
				{IP: "5.6.7.8", IPMode: ptr.To(v1.LoadBalancerIPModeProxy)},
				{IP: "9.10.11.12", IPMode: ptr.To(v1.LoadBalancerIPModeVIP)},
				{Hostname: "lb.example.com"},
			}
		})},
		want: "demo/lb:http/TCP cip=172.30.0.10 port=80 np=30080 hc=30000 lb=[1.2.3.4 9.10.11.12] lbsr=[203.0.113.0/25] etp=Local eps=[]\n",
	}, {
		name: "zero CIDR source range disables filtering",
		services: []*v1.Service{svc("demo", "lb", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeLoadBalancer
			s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/25", "0.0.0.0/0"}
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "1.2.3.4"}}
		})},
		want: "demo/lb:http/TCP cip=172.30.0.10 port=80 lb=[1.2.3.4] eps=[]\n",
	}, {
		name: "eTP Local only applies to externally accessible services, no health check for NodePort",
		services: []*v1.Service{
			svc("demo", "cip", func(s *v1.Service) {
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			}),
			svc("demo", "np", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeNodePort
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				s.Spec.HealthCheckNodePort = 30000
				s.Spec.Ports[0].NodePort = 30081
				s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
			}),
		},
		want: "demo/cip:http/TCP cip=172.30.0.10 port=80 eps=[]\n" +
			"demo/np:http/TCP cip=172.30.0.10 port=80 np=30081 etp=Local itp=Local eps=[]\n",
	}, {
		name: "session affinity timeout and default",
		services: []*v1.Service{
			svc("demo", "a", func(s *v1.Service) {
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
			}),
			svc("demo", "b", func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }),
		},
		want: "demo/a:http/TCP cip=172.30.0.10 port=80 affinity=60s eps=[]\n" +
			"demo/b:http/TCP cip=172.30.0.10 port=80 affinity=10800s eps=[]\n",
	}, {
		name: "multi-port, multi-protocol: endpoints matched by port name and protocol",
		services: []*v1.Service{svc("demo", "dns", func(s *v1.Service) {
			s.Spec.Ports = []v1.ServicePort{
				{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP},
				{Name: "dns-tcp", Port: 53, Protocol: v1.ProtocolTCP},
				{Name: "sctp", Port: 9999, Protocol: v1.ProtocolSCTP},
				{Name: "metrics", Port: 9153},
			}
		})},
		slices: []*discovery.EndpointSlice{slice("demo", "dns", "dns-1", func(s *discovery.EndpointSlice) {
			s.Ports = []discovery.EndpointPort{
				{Name: ptr.To("dns"), Port: ptr.To[int32](5353), Protocol: ptr.To(v1.ProtocolUDP)},
				{Name: ptr.To("dns-tcp"), Port: ptr.To[int32](5353), Protocol: ptr.To(v1.ProtocolTCP)},
				{Name: ptr.To("sctp"), Port: ptr.To[int32](9999), Protocol: ptr.To(v1.ProtocolSCTP)},
				{Name: ptr.To("metrics"), Port: ptr.To[int32](9153)},
				{Name: ptr.To("dns"), Port: ptr.To[int32](5353), Protocol: ptr.To(v1.ProtocolTCP)}, // wrong protocol: no service port
				{Name: nil, Port: ptr.To[int32](1)},                                                // nil name: ignored
				{Name: ptr.To("zero"), Port: ptr.To[int32](0)},                                     // no number: ignored
			}
			s.Endpoints = s.Endpoints[:1]
		})},
		want: "demo/dns:dns/UDP cip=172.30.0.10 port=53 eps=[10.180.0.1:5353(local,ready,serving)]\n" +
			"demo/dns:dns-tcp/TCP cip=172.30.0.10 port=53 eps=[10.180.0.1:5353(local,ready,serving)]\n" +
			"demo/dns:metrics/TCP cip=172.30.0.10 port=9153 eps=[10.180.0.1:9153(local,ready,serving)]\n" +
			"demo/dns:sctp/SCTP cip=172.30.0.10 port=9999 eps=[10.180.0.1:9999(local,ready,serving)]\n",
	}, {
		name:     "conditions, hints, multiple slices, duplicates and bad endpoints",
		services: []*v1.Service{svc("demo", "web", nil)},
		slices: []*discovery.EndpointSlice{
			slice("demo", "web", "web-1", func(s *discovery.EndpointSlice) {
				s.Endpoints = []discovery.Endpoint{
					{Addresses: []string{"10.180.0.3"}, Conditions: discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}},
					{Addresses: []string{"10.180.0.4"}, Conditions: discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false)}},
					{Addresses: []string{"10.180.0.5"}, Hints: &discovery.EndpointHints{
						ForZones: []discovery.ForZone{{Name: "zone-b"}, {Name: "zone-a"}},
						ForNodes: []discovery.ForNode{{Name: testNode}},
					}},
					{Addresses: nil},
					{Addresses: []string{"not-an-ip"}},
				}
			}),
			slice("demo", "web", "web-2", func(s *discovery.EndpointSlice) {
				// 10.180.0.3 shows up again, not terminating: that copy wins.
				s.Endpoints = []discovery.Endpoint{{Addresses: []string{"10.180.0.3"}, NodeName: ptr.To(testNode)}}
			}),
			slice("demo", "other", "other-1", nil),
			slice("other", "web", "web-1", nil),
			slice("demo", "web", "nolabel", func(s *discovery.EndpointSlice) { s.Labels = nil }),
		},
		want: "demo/web:http/TCP cip=172.30.0.10 port=80 eps=[10.180.0.3:8080(local,ready,serving) 10.180.0.4:8080() 10.180.0.5:8080(ready,serving,zones=zone-a+zone-b,nodes=node-a)]\n",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			family := tc.family
			if family == "" {
				family = v1.IPv4Protocol
			}
			snap, err := Build(context.Background(), nil, Input{Family: family, NodeName: testNode, Services: tc.services, EndpointSlices: tc.slices})
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if got := describe(snap); got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestBuildErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Build(ctx, nil, Input{Family: "IPv5"}); err == nil || !strings.Contains(err.Error(), "IPv5") {
		t.Errorf("want unknown family error, got %v", err)
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	if _, err := Build(ctx, nil, Input{Family: v1.IPv4Protocol, Node: node, NodeName: "node-b"}); err == nil {
		t.Error("want node name mismatch error")
	}
	dup := svc("demo", "dup", func(s *v1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "http", Port: 81, Protocol: v1.ProtocolTCP})
	})
	if _, err := Build(ctx, nil, Input{Family: v1.IPv4Protocol, Services: []*v1.Service{dup}}); err == nil || !strings.Contains(err.Error(), "demo/dup") {
		t.Errorf("want duplicate port error, got %v", err)
	}
}

// TestBuildAndCategorize checks the whole path from API objects to the
// endpoint lists a renderer uses, including topology from the Node object
// and the serving+terminating fallback.
func TestBuildAndCategorize(t *testing.T) {
	zoneNode := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, Labels: map[string]string{v1.LabelTopologyZone: "zone-a"}}}
	terminating := discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
	tests := []struct {
		name                 string
		service              *v1.Service
		endpoints            []discovery.Endpoint
		node                 *v1.Node
		cluster, local, all  []string
		hasAny               bool
		wantTopologyModeName string
	}{{
		name:    "zone hints filter cluster endpoints",
		service: svc("demo", "web", nil),
		node:    zoneNode,
		endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.0.0.1"}, Hints: &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-a"}}}},
			{Addresses: []string{"10.0.0.2"}, Hints: &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-b"}}}},
		},
		cluster: []string{"10.0.0.1:8080"}, all: []string{"10.0.0.1:8080"}, hasAny: true,
		wantTopologyModeName: TopologyPreferSameZone,
	}, {
		name:    "node hints win over zone hints",
		service: svc("demo", "web", nil),
		node:    zoneNode,
		endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.0.0.1"}, Hints: &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-a"}}, ForNodes: []discovery.ForNode{{Name: "node-x"}}}},
			{Addresses: []string{"10.0.0.2"}, Hints: &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-a"}}, ForNodes: []discovery.ForNode{{Name: testNode}}}},
		},
		cluster: []string{"10.0.0.2:8080"}, all: []string{"10.0.0.2:8080"}, hasAny: true,
		wantTopologyModeName: TopologyPreferSameNode,
	}, {
		name:    "no node object: zone hints ignored",
		service: svc("demo", "web", nil),
		endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.0.0.1"}, Hints: &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-a"}}}},
			{Addresses: []string{"10.0.0.2"}, Hints: &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-b"}}}},
		},
		cluster: []string{"10.0.0.1:8080", "10.0.0.2:8080"}, all: []string{"10.0.0.1:8080", "10.0.0.2:8080"}, hasAny: true,
	}, {
		name:    "cluster falls back to serving+terminating",
		service: svc("demo", "web", nil),
		endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.0.0.1"}, Conditions: terminating},
			{Addresses: []string{"10.0.0.2"}, Conditions: discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(true)}},
			{Addresses: []string{"10.0.0.3"}, Conditions: discovery.EndpointConditions{Ready: ptr.To(false)}},
		},
		cluster: []string{"10.0.0.1:8080"}, all: []string{"10.0.0.1:8080"}, hasAny: true,
	}, {
		name: "eTP Local: local falls back independently of cluster",
		service: svc("demo", "web", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = 30080
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		}),
		endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.0.0.1"}, NodeName: ptr.To(testNode), Conditions: terminating},
			{Addresses: []string{"10.0.0.2"}, NodeName: ptr.To("node-b")},
		},
		cluster: []string{"10.0.0.2:8080"}, local: []string{"10.0.0.1:8080"},
		all: []string{"10.0.0.1:8080", "10.0.0.2:8080"}, hasAny: true,
	}, {
		name: "iTP Local with only remote endpoints: nothing reachable but endpoints exist",
		service: svc("demo", "web", func(s *v1.Service) {
			s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
		}),
		endpoints: []discovery.Endpoint{{Addresses: []string{"10.0.0.2"}, NodeName: ptr.To("node-b")}},
		local:     []string{}, all: []string{}, hasAny: true,
	}, {
		name:      "no usable endpoints",
		service:   svc("demo", "web", nil),
		endpoints: []discovery.Endpoint{{Addresses: []string{"10.0.0.2"}, Conditions: discovery.EndpointConditions{Ready: ptr.To(false)}}},
		cluster:   []string{}, all: []string{}, hasAny: false,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sl := slice("demo", "web", "web-1", func(s *discovery.EndpointSlice) { s.Endpoints = tc.endpoints })
			in := Input{Family: v1.IPv4Protocol, Node: tc.node, Services: []*v1.Service{tc.service}, EndpointSlices: []*discovery.EndpointSlice{sl}}
			if tc.node == nil {
				in.NodeName = testNode
			}
			snap, err := Build(context.Background(), nil, in)
			if err != nil {
				t.Fatal(err)
			}
			sp := snap.Port(ServicePortName{NamespacedName: types.NamespacedName{Namespace: "demo", Name: "web"}, Port: "http", Protocol: v1.ProtocolTCP})
			if sp == nil {
				t.Fatal("port demo/web:http not found")
			}
			c := snap.Categorize(sp)
			for _, chk := range []struct {
				kind string
				want []string
				got  []Endpoint
			}{{"cluster", tc.cluster, c.Cluster}, {"local", tc.local, c.Local}, {"all", tc.all, c.AllReachable}} {
				if g := endpointStrings(chk.got); !slices.Equal(g, append([]string{}, chk.want...)) {
					t.Errorf("%s: got %v, want %v", chk.kind, g, chk.want)
				}
			}
			if c.HasAnyEndpoints != tc.hasAny {
				t.Errorf("HasAnyEndpoints = %v, want %v", c.HasAnyEndpoints, tc.hasAny)
			}
			if c.TopologyMode != tc.wantTopologyModeName {
				t.Errorf("TopologyMode = %q, want %q", c.TopologyMode, tc.wantTopologyModeName)
			}
		})
	}
}

func TestChangedServices(t *testing.T) {
	ctx := context.Background()
	build := func(svcs []*v1.Service, sl []*discovery.EndpointSlice) *Snapshot {
		s, err := Build(ctx, nil, Input{Family: v1.IPv4Protocol, NodeName: testNode, Services: svcs, EndpointSlices: sl})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := svc("demo", "a", nil)
	b := svc("demo", "b", nil)
	b2 := svc("demo", "b", func(s *v1.Service) { s.Spec.Ports[0].Port = 81 })
	c := svc("demo", "c", nil)
	prev := build([]*v1.Service{a, b, c}, []*discovery.EndpointSlice{slice("demo", "a", "a-1", nil), slice("demo", "c", "c-1", nil)})
	cur := build([]*v1.Service{a, b2, svc("demo", "d", nil), c}, []*discovery.EndpointSlice{
		slice("demo", "a", "a-1", nil),
		slice("demo", "c", "c-1", func(s *discovery.EndpointSlice) { s.Endpoints = s.Endpoints[:1] }),
	})
	got := ChangedServices(prev, cur)
	var names []string
	for n := range got {
		names = append(names, n.String())
	}
	slices.Sort(names)
	if want := []string{"demo/b", "demo/c", "demo/d"}; !slices.Equal(names, want) {
		t.Errorf("changed = %v, want %v", names, want)
	}
	gone := ChangedServices(cur, build(nil, nil))
	if len(gone) != 4 {
		t.Errorf("removing everything should change 4 services, got %v", gone)
	}
	if n := ChangedServices(cur, cur); len(n) != 0 {
		t.Errorf("identical snapshots changed %v", n)
	}
}

func TestNodePortAddresses(t *testing.T) {
	nodeIP := net.ParseIP("192.168.0.2")
	local := []net.IP{net.ParseIP("127.0.0.1"), nodeIP, net.ParseIP("192.168.1.2"), net.ParseIP("10.1.0.7"), net.ParseIP("2001:db8::1")}
	tests := []struct {
		specs     []string
		family    v1.IPFamily
		matchAll  bool
		ips       string
		loopback  bool
		wantError bool
	}{
		{specs: nil, matchAll: true, ips: "[10.1.0.7 127.0.0.1 192.168.0.2 192.168.1.2]", loopback: true},
		{specs: []string{"primary"}, ips: "[192.168.0.2]"},
		{specs: []string{"192.168.0.0/16", "2001:db8::/64"}, ips: "[192.168.0.2 192.168.1.2]"},
		{specs: []string{"all"}, matchAll: true, ips: "[10.1.0.7 127.0.0.1 192.168.0.2 192.168.1.2]", loopback: true},
		{specs: []string{"localhost", "primary"}, ips: "[127.0.0.1 192.168.0.2]", loopback: true},
		{specs: []string{"2001:db8::/64"}, matchAll: true, ips: "[10.1.0.7 127.0.0.1 192.168.0.2 192.168.1.2]", loopback: true},
		{specs: []string{"primary"}, family: v1.IPv6Protocol, matchAll: true, ips: "[2001:db8::1]", loopback: true},
		{specs: []string{"eth0"}, wantError: true},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.specs, ","), func(t *testing.T) {
			fam := tc.family
			if fam == "" {
				fam = v1.IPv4Protocol
			}
			npa, err := NewNodePortAddresses(fam, tc.specs, nodeIP)
			if tc.wantError {
				if err == nil {
					t.Fatal("want error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if npa.MatchAll() != tc.matchAll {
				t.Errorf("MatchAll = %v", npa.MatchAll())
			}
			if npa.ContainsLoopback() != tc.loopback {
				t.Errorf("ContainsLoopback = %v", npa.ContainsLoopback())
			}
			ips := npa.NodeIPs(local)
			if got := fmt.Sprint(ips); got != tc.ips {
				t.Errorf("ips = %s, want %s", got, tc.ips)
			}
		})
	}
}

func TestBuilderReusesUnchangedServices(t *testing.T) {
	ctx := context.Background()
	a, b := svc("demo", "a", nil), svc("demo", "b", func(s *v1.Service) { s.Spec.ClusterIP = "172.30.0.11" })
	sa, sb := slice("demo", "a", "a-1", nil), slice("demo", "b", "b-1", nil)
	in := func(node string, svcs []*v1.Service, sl ...*discovery.EndpointSlice) Input {
		return Input{Family: v1.IPv4Protocol, NodeName: node, Services: svcs, EndpointSlices: sl}
	}
	var builder Builder
	build := func(in Input) *Snapshot {
		t.Helper()
		got, err := builder.Build(ctx, nil, in)
		if err != nil {
			t.Fatal(err)
		}
		// Always what a fresh Build makes.
		want, err := Build(ctx, nil, in)
		if err != nil {
			t.Fatal(err)
		}
		if describe(got) != describe(want) {
			t.Fatalf("builder:\n%s\nfresh build:\n%s", describe(got), describe(want))
		}
		return got
	}
	first := build(in(testNode, []*v1.Service{b, a}, sb, sa))
	first.Categorize(first.Ports[0])

	same := build(in(testNode, []*v1.Service{a, b}, sa, sb))
	for i := range same.Ports {
		if same.Ports[i] != first.Ports[i] {
			t.Errorf("port %s was rebuilt although nothing changed", same.Ports[i].Name)
		}
	}
	if _, ok := same.categorized[same.Ports[0]]; !ok {
		t.Error("the categorization of an unchanged port was not carried over")
	}
	if n := ChangedServices(first, same); len(n) != 0 {
		t.Errorf("changed = %v, want none", n)
	}

	sb2 := slice("demo", "b", "b-1", func(s *discovery.EndpointSlice) { s.Endpoints = s.Endpoints[:1] })
	next := build(in(testNode, []*v1.Service{a, b}, sa, sb2))
	if next.Port(first.Ports[0].Name) != first.Ports[0] {
		t.Error("demo/a was rebuilt although only demo/b's slice changed")
	}
	if next.Port(first.Ports[1].Name) == first.Ports[1] {
		t.Error("demo/b was not rebuilt after its slice changed")
	}
	if n := ChangedServices(same, next); len(n) != 1 || !n[types.NamespacedName{Namespace: "demo", Name: "b"}] {
		t.Errorf("changed = %v, want demo/b", n)
	}

	// Another node makes other endpoints local: everything is rebuilt.
	other := build(in("node-b", []*v1.Service{a, b}, sa, sb2))
	for _, sp := range other.Ports {
		if slices.Contains(next.Ports, sp) {
			t.Errorf("port %s kept across a node change", sp.Name)
		}
	}
	// A removed Service is forgotten.
	build(in("node-b", []*v1.Service{a}, sa))
	if len(builder.services) != 1 {
		t.Errorf("builder remembers %d services, want 1", len(builder.services))
	}
	// Unsorted snapshots still compare.
	shuffled := &Snapshot{Family: other.Family, NodeName: other.NodeName, Ports: []*ServicePort{other.Ports[1], other.Ports[0]}}
	if n := ChangedServices(shuffled, other); len(n) != 0 {
		t.Errorf("reordered snapshot changed %v", n)
	}
}
