//go:build linux

package nftables

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"
)

func syncYAML(t *testing.T, cfg Config, manifestYAML string) *knftables.Fake {
	t.Helper()
	nft, s := newFakeSyncer(t, cfg)
	if _, err := s.Sync(context.Background(), decodeSnapshot(t, manifestYAML)); err != nil {
		t.Fatal(err)
	}
	return nft
}

// TestNoEndpointsReject transcribes upstream's test of the same name.
func TestNoEndpointsReject(t *testing.T) {
	nft := syncYAML(t, upstreamConfig(t), `
apiVersion: v1
kind: Service
metadata: {namespace: ns1, name: svc1}
spec:
  type: LoadBalancer
  clusterIP: 172.30.0.41
  externalIPs: [192.168.99.11]
  ports: [{name: p80, protocol: TCP, port: 80, nodePort: 3001}]
status: {loadBalancer: {ingress: [{ip: 1.2.3.4}]}}
`)
	runPacketFlows(t, nft, testNodeIPs, []packetFlow{
		{name: "pod to cluster IP with no endpoints", sourceIP: "10.0.0.2", destIP: "172.30.0.41", destPort: 80, output: "REJECT"},
		{name: "external to external IP with no endpoints", sourceIP: testExternalClient, destIP: "192.168.99.11", destPort: 80, output: "REJECT"},
		{name: "pod to NodePort with no endpoints", sourceIP: "10.0.0.2", destIP: testNodeIP, destPort: 3001, output: "REJECT"},
		{name: "external to NodePort with no endpoints", sourceIP: testExternalClient, destIP: testNodeIP, destPort: 3001, output: "REJECT"},
		{name: "pod to LoadBalancer IP with no endpoints", sourceIP: "10.0.0.2", destIP: "1.2.3.4", destPort: 80, output: "REJECT"},
		{name: "external to LoadBalancer IP with no endpoints", sourceIP: testExternalClient, destIP: "1.2.3.4", destPort: 80, output: "REJECT"},
	})
}

// TestClusterIPGeneral transcribes upstream's test of the same name.
func TestClusterIPGeneral(t *testing.T) {
	nft := syncYAML(t, upstreamConfig(t), `
apiVersion: v1
kind: Service
metadata: {namespace: ns1, name: svc1}
spec:
  clusterIP: 172.30.0.41
  ports: [{name: http, port: 80, protocol: TCP}]
---
apiVersion: v1
kind: Service
metadata: {namespace: ns2, name: svc2}
spec:
  clusterIP: 172.30.0.42
  ports:
  - {name: http, port: 80, protocol: TCP}
  - {name: https, port: 443, protocol: TCP, targetPort: 8443}
  - {name: dns-udp, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 5353}
  - {name: dns-sctp, port: 53, protocol: SCTP}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: ns1, name: svc1-1, labels: {kubernetes.io/service-name: svc1}}
addressType: IPv4
endpoints: [{addresses: [10.180.0.1], nodeName: test-node}]
ports: [{name: http, port: 80, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: ns2, name: svc2-1, labels: {kubernetes.io/service-name: svc2}}
addressType: IPv4
endpoints:
- {addresses: [10.180.0.1], nodeName: test-node}
- {addresses: [10.180.2.1], nodeName: node2}
ports:
- {name: http, port: 80, protocol: TCP}
- {name: https, port: 8443, protocol: TCP}
- {name: dns-udp, port: 53, protocol: UDP}
- {name: dns-tcp, port: 5353, protocol: TCP}
- {name: dns-sctp, port: 53, protocol: SCTP}
`)
	runPacketFlows(t, nft, testNodeIPs, []packetFlow{
		{name: "simple clusterIP", sourceIP: "10.180.0.2", destIP: "172.30.0.41", destPort: 80, output: "10.180.0.1:80"},
		{name: "hairpin to cluster IP", sourceIP: "10.180.0.1", destIP: "172.30.0.41", destPort: 80, output: "10.180.0.1:80", masq: true},
		{name: "clusterIP with multiple endpoints", sourceIP: "10.180.0.2", destIP: "172.30.0.42", destPort: 80, output: "10.180.0.1:80, 10.180.2.1:80"},
		{name: "clusterIP with TargetPort", sourceIP: "10.180.0.2", destIP: "172.30.0.42", destPort: 443, output: "10.180.0.1:8443, 10.180.2.1:8443"},
		{name: "same port TCP", sourceIP: "10.180.0.2", protocol: v1.ProtocolTCP, destIP: "172.30.0.42", destPort: 53, output: "10.180.0.1:5353, 10.180.2.1:5353"},
		{name: "same port UDP", sourceIP: "10.180.0.2", protocol: v1.ProtocolUDP, destIP: "172.30.0.42", destPort: 53, output: "10.180.0.1:53, 10.180.2.1:53"},
		{name: "same port SCTP", sourceIP: "10.180.0.2", protocol: v1.ProtocolSCTP, destIP: "172.30.0.42", destPort: 53, output: "10.180.0.1:53, 10.180.2.1:53"},
		{name: "TCP-only port does not match UDP traffic", sourceIP: "10.180.0.2", protocol: v1.ProtocolUDP, destIP: "172.30.0.42", destPort: 80, output: "REJECT"},
		{name: "svc1 does not accept svc2's ports", sourceIP: "10.180.0.2", destIP: "172.30.0.41", destPort: 443, output: "REJECT"},
		{name: "packet to unallocated cluster ip", sourceIP: "10.180.0.2", destIP: "172.30.0.50", destPort: 80, output: "DROP"},
	})
}

// TestLoadBalancer transcribes upstream's test of the same name
// (loadBalancerSourceRanges, including the node-IP allowance).
func TestLoadBalancer(t *testing.T) {
	nft := syncYAML(t, upstreamConfig(t), `
apiVersion: v1
kind: Service
metadata: {namespace: ns1, name: svc1}
spec:
  type: LoadBalancer
  clusterIP: 172.30.0.41
  ports: [{name: p80, port: 80, protocol: TCP, nodePort: 3001}]
  loadBalancerSourceRanges: [192.168.0.0/24, " 203.0.113.0/25"]
status: {loadBalancer: {ingress: [{ip: 1.2.3.4}, {ip: 5.6.7.8}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: ns1, name: svc1-1, labels: {kubernetes.io/service-name: svc1}}
addressType: IPv4
endpoints: [{addresses: [10.180.0.1], nodeName: test-node}]
ports: [{name: p80, port: 80, protocol: TCP}]
`)
	ep := "10.180.0.1:80"
	runPacketFlows(t, nft, testNodeIPs, []packetFlow{
		{name: "pod to cluster IP", sourceIP: "10.0.0.2", destIP: "172.30.0.41", destPort: 80, output: ep},
		{name: "external to nodePort", sourceIP: testExternalClient, destIP: testNodeIP, destPort: 3001, output: ep, masq: true},
		{name: "nodePort bypasses LoadBalancerSourceRanges", sourceIP: testExternalClientBlocked, destIP: testNodeIP, destPort: 3001, output: ep, masq: true},
		{name: "accepted external to LB1", sourceIP: testExternalClient, destIP: "1.2.3.4", destPort: 80, output: ep, masq: true},
		{name: "accepted external to LB2", sourceIP: testExternalClient, destIP: "5.6.7.8", destPort: 80, output: ep, masq: true},
		{name: "blocked external to LB1", sourceIP: testExternalClientBlocked, destIP: "1.2.3.4", destPort: 80, output: "DROP"},
		{name: "blocked external to LB2", sourceIP: testExternalClientBlocked, destIP: "5.6.7.8", destPort: 80, output: "DROP"},
		{name: "pod to LB1 (blocked by LoadBalancerSourceRanges)", sourceIP: "10.0.0.2", destIP: "1.2.3.4", destPort: 80, output: "DROP"},
		{name: "pod to LB2 (blocked by LoadBalancerSourceRanges)", sourceIP: "10.0.0.2", destIP: "5.6.7.8", destPort: 80, output: "DROP"},
		{name: "node to LB1 (allowed by LoadBalancerSourceRanges)", sourceIP: testNodeIP, destIP: "1.2.3.4", destPort: 80, output: ep, masq: true},
		{name: "node to LB2 (allowed by LoadBalancerSourceRanges)", sourceIP: testNodeIP, destIP: "5.6.7.8", destPort: 80, output: ep, masq: true},
		{name: "same node to LB1, SNATted to LB1", sourceIP: "1.2.3.4", destIP: "1.2.3.4", destPort: 80, output: ep, masq: true},
		{name: "same node to LB2, SNATted to LB2", sourceIP: "5.6.7.8", destIP: "5.6.7.8", destPort: 80, output: ep, masq: true},
	})
}

// TestFactSheetTraces checks the traces of the three demo Services of the
// kube-proxy v1.37 fact sheet (eTP Local NodePort, hairpin, no endpoints,
// invalid port).
func TestFactSheetTraces(t *testing.T) {
	nft := syncYAML(t, upstreamConfig(t), demoManifest)
	runPacketFlows(t, nft, testNodeIPs, []packetFlow{
		{name: "external client to eTP Local NodePort: local endpoint only, source kept", sourceIP: testExternalClient, destIP: testNodeIP, destPort: 30080, output: "10.180.0.2:8080"},
		{name: "node to its own eTP Local NodePort: all endpoints, masqueraded", sourceIP: testNodeIP, destIP: testNodeIP, destPort: 30080, output: "10.180.0.2:8080, 10.180.2.2:8080", masq: true},
		{name: "pod to eTP Local NodePort: short-circuited to all endpoints", sourceIP: "10.0.0.9", destIP: testNodeIP, destPort: 30080, output: "10.180.0.2:8080, 10.180.2.2:8080"},
		{name: "pod to web", sourceIP: "10.0.0.9", destIP: "172.30.0.10", destPort: 80, output: "10.180.0.1:8080, 10.180.2.1:8080"},
		{name: "off-cluster client to a ClusterIP is masqueraded", sourceIP: testExternalClient, destIP: "172.30.0.10", destPort: 80, output: "10.180.0.1:8080, 10.180.2.1:8080", masq: true},
		// The tracer follows both numgen branches; the first (10.180.0.1) hairpins.
		{name: "hairpin via ClusterIP", sourceIP: "10.180.0.1", destIP: "172.30.0.10", destPort: 80, output: "10.180.0.1:8080, 10.180.2.1:8080", masq: true},
		{name: "no endpoints", sourceIP: "10.0.0.9", destIP: "172.30.0.30", destPort: 80, output: "REJECT"},
		{name: "invalid port of a ClusterIP", sourceIP: "10.0.0.9", destIP: "172.30.0.10", destPort: 81, output: "REJECT"},
		{name: "NodePort on a non-nodeport address is not served", sourceIP: testExternalClient, destIP: testNodeIPAlt, destPort: 30080, output: ""},
	})
}

const demoManifest = `
apiVersion: v1
kind: Service
metadata: {namespace: demo, name: web}
spec:
  clusterIP: 172.30.0.10
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {namespace: demo, name: np-local}
spec:
  type: NodePort
  externalTrafficPolicy: Local
  clusterIP: 172.30.0.20
  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30080}]
---
apiVersion: v1
kind: Service
metadata: {namespace: demo, name: empty}
spec:
  clusterIP: 172.30.0.30
  ports: [{name: http, port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: demo, name: web-1, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints:
- {addresses: [10.180.0.1], nodeName: test-node}
- {addresses: [10.180.2.1], nodeName: node-2}
ports: [{name: http, port: 8080, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: demo, name: np-local-1, labels: {kubernetes.io/service-name: np-local}}
addressType: IPv4
endpoints:
- {addresses: [10.180.0.2], nodeName: test-node}
- {addresses: [10.180.2.2], nodeName: node-2}
ports: [{name: http, port: 8080, protocol: TCP}]
`

// TestFactSheetRuleset compares the demo Services with the v1.37.2 output
// quoted in the kube-proxy fact sheet.
func TestFactSheetRuleset(t *testing.T) {
	nft := syncYAML(t, upstreamConfig(t), demoManifest)
	want := readFile(t, "testdata/upstream/base.nft") + `
add chain ip kube-proxy service-AXK6CI2C-demo/web/tcp/http
add rule ip kube-proxy service-AXK6CI2C-demo/web/tcp/http meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.180.0.1 . 8080 , 1 : 10.180.2.1 . 8080 }
add element ip kube-proxy cluster-ips { 172.30.0.10 }
add element ip kube-proxy service-ips { 172.30.0.10 . tcp . 80 : goto service-AXK6CI2C-demo/web/tcp/http }
add element ip kube-proxy hairpin-connections { 10.180.0.1 . 10.180.0.1 . tcp . 8080 }
add chain ip kube-proxy service-DPGMTOM4-demo/np-local/tcp/http
add rule ip kube-proxy service-DPGMTOM4-demo/np-local/tcp/http meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.180.0.2 . 8080 , 1 : 10.180.2.2 . 8080 }
add chain ip kube-proxy local-DPGMTOM4-demo/np-local/tcp/http
add rule ip kube-proxy local-DPGMTOM4-demo/np-local/tcp/http meta l4proto tcp dnat to 10.180.0.2:8080
add chain ip kube-proxy external-DPGMTOM4-demo/np-local/tcp/http
add rule ip kube-proxy external-DPGMTOM4-demo/np-local/tcp/http ip saddr 10.0.0.0/8 goto service-DPGMTOM4-demo/np-local/tcp/http comment "short-circuit pod traffic"
add rule ip kube-proxy external-DPGMTOM4-demo/np-local/tcp/http fib saddr type local mark set mark or 0x4000 comment "masquerade local traffic"
add rule ip kube-proxy external-DPGMTOM4-demo/np-local/tcp/http fib saddr type local goto service-DPGMTOM4-demo/np-local/tcp/http comment "short-circuit local traffic"
add rule ip kube-proxy external-DPGMTOM4-demo/np-local/tcp/http goto local-DPGMTOM4-demo/np-local/tcp/http
add element ip kube-proxy cluster-ips { 172.30.0.20 }
add element ip kube-proxy service-ips { 172.30.0.20 . tcp . 80 : goto service-DPGMTOM4-demo/np-local/tcp/http }
add element ip kube-proxy service-nodeports { tcp . 30080 : goto external-DPGMTOM4-demo/np-local/tcp/http }
add element ip kube-proxy hairpin-connections { 10.180.0.2 . 10.180.0.2 . tcp . 8080 }
add element ip kube-proxy cluster-ips { 172.30.0.30 }
add element ip kube-proxy no-endpoint-services { 172.30.0.30 . tcp . 80 comment "demo/empty:http" : goto reject-chain }
`
	assertDumpEqual(t, want, nft.Dump())
}
