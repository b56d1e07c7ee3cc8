//go:build linux

package flowtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded"
	"github.com/svclab/svclab/lab/kubebin"
	"github.com/svclab/svclab/lab/proxier/iptables"
	"github.com/svclab/svclab/lab/proxier/manifest"
	"github.com/svclab/svclab/lab/proxier/model"
	"github.com/svclab/svclab/lab/proxier/nfacct"
	"github.com/svclab/svclab/lab/proxier/render"
)

// The differential test's nodes are Node objects only; kube-proxy runs for
// one of them in a namespace of its own that has its IPs.
const (
	diffNode   = "diff-node"
	diffNodeIP = "192.168.77.1"
	otherNode  = "other-node"
	diffNS     = "diff"
)

type fakeNode struct {
	name, zone string
	// ips are the node's InternalIPs, primary first; diff-node has two so
	// that nodePortAddresses CIDRs select more than one.
	ips []string
}

var (
	diffNodeSpec  = fakeNode{name: diffNode, zone: "zone-a", ips: []string{diffNodeIP, "192.168.78.1"}}
	otherNodeSpec = fakeNode{name: otherNode, zone: "zone-b", ips: []string{"192.168.79.1"}}
)

// diffShape is one Service and its EndpointSlices.
type diffShape struct {
	name   string
	spec   v1.ServiceSpec
	lb     []v1.LoadBalancerIngress
	slices []slice
}

type slice struct {
	endpoints []discovery.Endpoint
	ports     []discovery.EndpointPort
}

func tcp(name string, port int32, target intstr.IntOrString) v1.ServicePort {
	return v1.ServicePort{Name: name, Protocol: v1.ProtocolTCP, Port: port, TargetPort: target}
}

func proto(p v1.ServicePort, protocol v1.Protocol) v1.ServicePort {
	p.Protocol = protocol
	return p
}

func num(n int) intstr.IntOrString      { return intstr.FromInt(n) }
func named(s string) intstr.IntOrString { return intstr.FromString(s) }

func epPort(name string, protocol v1.Protocol, port int32) discovery.EndpointPort {
	return discovery.EndpointPort{Name: ptr.To(name), Protocol: ptr.To(protocol), Port: ptr.To(port)}
}

// ep is a ready endpoint on node; opts change it.
func ep(ip, node string, opts ...func(*discovery.Endpoint)) discovery.Endpoint {
	e := discovery.Endpoint{Addresses: []string{ip}, NodeName: ptr.To(node),
		Conditions: discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}}
	for _, o := range opts {
		o(&e)
	}
	return e
}

func terminating(serving bool) func(*discovery.Endpoint) {
	return func(e *discovery.Endpoint) {
		e.Conditions = discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(serving), Terminating: ptr.To(true)}
	}
}

func hints(zone string, forZones []string, forNodes []string) func(*discovery.Endpoint) {
	return func(e *discovery.Endpoint) {
		e.Zone = ptr.To(zone)
		e.Hints = &discovery.EndpointHints{}
		for _, z := range forZones {
			e.Hints.ForZones = append(e.Hints.ForZones, discovery.ForZone{Name: z})
		}
		for _, n := range forNodes {
			e.Hints.ForNodes = append(e.Hints.ForNodes, discovery.ForNode{Name: n})
		}
	}
}

var (
	httpPort = []discovery.EndpointPort{epPort("http", v1.ProtocolTCP, 8080)}
	// twoEndpoints: one on this node, one elsewhere.
	twoEndpoints = []slice{{endpoints: []discovery.Endpoint{ep("10.244.0.11", diffNode), ep("10.244.1.21", otherNode)}, ports: httpPort}}
)

// diffShapes are the Services of the differential test. NodePorts,
// ClusterIPs and health-check ports are allocated by the API server.
var diffShapes = []diffShape{
	{name: "clusterip-multi", spec: v1.ServiceSpec{Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{{endpoints: []discovery.Endpoint{ep("10.244.0.11", diffNode), ep("10.244.0.12", diffNode), ep("10.244.1.21", otherNode)}, ports: httpPort}}},
	{name: "clusterip-two-slices", spec: v1.ServiceSpec{Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{
			{endpoints: []discovery.Endpoint{ep("10.244.0.13", diffNode)}, ports: httpPort},
			{endpoints: []discovery.Endpoint{ep("10.244.1.23", otherNode), ep("10.244.1.24", otherNode)}, ports: httpPort},
		}},
	{name: "nodeport-etp-cluster", spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: twoEndpoints},
	{name: "nodeport-etp-local", spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
		Ports: []v1.ServicePort{tcp("http", 80, num(8080))}}, slices: twoEndpoints},
	{name: "nodeport-etp-local-remote-only", spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
		Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{{endpoints: []discovery.Endpoint{ep("10.244.1.21", otherNode)}, ports: httpPort}}},
	{name: "nodeport-no-endpoints", spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, Ports: []v1.ServicePort{tcp("http", 80, num(8080))}}},
	{name: "loadbalancer-etp-local-ranges", spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
		LoadBalancerSourceRanges: []string{"203.0.113.0/24", "192.168.77.0/24"}, Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		lb:     []v1.LoadBalancerIngress{{IP: "192.168.99.10"}, {IP: "192.168.99.11", IPMode: ptr.To(v1.LoadBalancerIPModeProxy)}},
		slices: twoEndpoints},
	{name: "loadbalancer-ranges-without-node", spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer,
		LoadBalancerSourceRanges: []string{"203.0.113.0/24"}, Ports: []v1.ServicePort{tcp("http", 80, num(8080)), proto(tcp("dns", 53, num(8053)), v1.ProtocolUDP)}},
		lb: []v1.LoadBalancerIngress{{IP: "192.168.99.12"}},
		slices: []slice{{endpoints: []discovery.Endpoint{ep("10.244.0.14", diffNode)},
			ports: []discovery.EndpointPort{epPort("http", v1.ProtocolTCP, 8080), epPort("dns", v1.ProtocolUDP, 8053)}}}},
	{name: "loadbalancer-open-range", spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer,
		LoadBalancerSourceRanges: []string{"0.0.0.0/0", "203.0.113.0/24"}, Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		lb: []v1.LoadBalancerIngress{{IP: "192.168.99.13"}, {Hostname: "lb.example"}}, slices: twoEndpoints},
	{name: "loadbalancer-no-endpoints", spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
		Ports: []v1.ServicePort{tcp("http", 80, num(8080))}}, lb: []v1.LoadBalancerIngress{{IP: "192.168.99.14"}}},
	{name: "external-ips", spec: v1.ServiceSpec{ExternalIPs: []string{"192.168.99.20", "192.168.99.21"}, Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: twoEndpoints},
	{name: "external-ips-etp-local", spec: v1.ServiceSpec{ExternalIPs: []string{"192.168.99.22"}, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
		Ports: []v1.ServicePort{tcp("http", 80, num(8080))}}, slices: twoEndpoints},
	{name: "affinity", spec: v1.ServiceSpec{SessionAffinity: v1.ServiceAffinityClientIP,
		SessionAffinityConfig: &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](600)}},
		Ports:                 []v1.ServicePort{tcp("http", 80, num(8080))}}, slices: twoEndpoints},
	{name: "affinity-nodeport-default-timeout", spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, SessionAffinity: v1.ServiceAffinityClientIP,
		Ports: []v1.ServicePort{tcp("http", 80, num(8080))}}, slices: twoEndpoints},
	{name: "itp-local", spec: v1.ServiceSpec{InternalTrafficPolicy: ptr.To(v1.ServiceInternalTrafficPolicyLocal), Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: twoEndpoints},
	{name: "itp-local-remote-only", spec: v1.ServiceSpec{InternalTrafficPolicy: ptr.To(v1.ServiceInternalTrafficPolicyLocal), Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{{endpoints: []discovery.Endpoint{ep("10.244.1.21", otherNode)}, ports: httpPort}}},
	{name: "itp-local-nodeport-etp-local", spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, InternalTrafficPolicy: ptr.To(v1.ServiceInternalTrafficPolicyLocal),
		ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal, Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{{endpoints: []discovery.Endpoint{ep("10.244.1.21", otherNode)}, ports: httpPort}}},
	{name: "no-endpoints", spec: v1.ServiceSpec{Ports: []v1.ServicePort{tcp("http", 80, num(8080))}}},
	{name: "terminating-only", spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
		Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{{endpoints: []discovery.Endpoint{ep("10.244.0.15", diffNode, terminating(true)), ep("10.244.1.25", otherNode, terminating(true)),
			ep("10.244.1.26", otherNode, terminating(false))}, ports: httpPort}}},
	{name: "ready-and-terminating", spec: v1.ServiceSpec{Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{{endpoints: []discovery.Endpoint{ep("10.244.0.16", diffNode), ep("10.244.0.17", diffNode, terminating(true))}, ports: httpPort}}},
	{name: "not-serving", spec: v1.ServiceSpec{Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{{endpoints: []discovery.Endpoint{ep("10.244.0.18", diffNode, terminating(false))}, ports: httpPort}}},
	{name: "topology-zones", spec: v1.ServiceSpec{Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{{endpoints: []discovery.Endpoint{
			ep("10.244.0.19", diffNode, hints("zone-a", []string{"zone-a"}, nil)),
			ep("10.244.1.27", otherNode, hints("zone-b", []string{"zone-b"}, nil)),
			ep("10.244.2.27", "third-node", hints("zone-a", []string{"zone-a"}, nil)),
		}, ports: httpPort}}},
	{name: "topology-other-zone-only", spec: v1.ServiceSpec{Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{{endpoints: []discovery.Endpoint{
			ep("10.244.1.28", otherNode, hints("zone-b", []string{"zone-b"}, nil)),
			ep("10.244.1.29", otherNode, hints("zone-b", []string{"zone-b"}, nil)),
		}, ports: httpPort}}},
	{name: "topology-nodes", spec: v1.ServiceSpec{Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{{endpoints: []discovery.Endpoint{
			ep("10.244.0.20", diffNode, hints("zone-a", []string{"zone-a"}, []string{diffNode})),
			ep("10.244.2.20", "third-node", hints("zone-a", []string{"zone-a"}, []string{"third-node"})),
		}, ports: httpPort}}},
	{name: "udp", spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, Ports: []v1.ServicePort{proto(tcp("dns", 53, num(5353)), v1.ProtocolUDP)}},
		slices: []slice{{endpoints: []discovery.Endpoint{ep("10.244.0.21", diffNode), ep("10.244.1.30", otherNode)},
			ports: []discovery.EndpointPort{epPort("dns", v1.ProtocolUDP, 5353)}}}},
	{name: "sctp", spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, Ports: []v1.ServicePort{proto(tcp("assoc", 7777, num(7777)), v1.ProtocolSCTP)}},
		slices: []slice{{endpoints: []discovery.Endpoint{ep("10.244.0.22", diffNode)},
			ports: []discovery.EndpointPort{epPort("assoc", v1.ProtocolSCTP, 7777)}}}},
	{name: "multi-port-named", spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, Ports: []v1.ServicePort{
		tcp("http", 80, named("web")), tcp("https", 443, named("websecure")), proto(tcp("dns", 53, named("dns")), v1.ProtocolUDP), tcp("dns-tcp", 53, named("dns-tcp")),
	}}, slices: []slice{{endpoints: []discovery.Endpoint{ep("10.244.0.23", diffNode), ep("10.244.1.31", otherNode)},
		ports: []discovery.EndpointPort{epPort("http", v1.ProtocolTCP, 8080), epPort("https", v1.ProtocolTCP, 8443),
			epPort("dns", v1.ProtocolUDP, 1053), epPort("dns-tcp", v1.ProtocolTCP, 1053)}}}},
	{name: "duplicate-endpoint-across-slices", spec: v1.ServiceSpec{Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{
			{endpoints: []discovery.Endpoint{ep("10.244.0.30", diffNode), ep("10.244.1.30", otherNode)}, ports: httpPort},
			{endpoints: []discovery.Endpoint{ep("10.244.0.30", diffNode), ep("10.244.1.31", otherNode, terminating(true))}, ports: httpPort},
		}},
	{name: "unset-conditions-no-node", spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
		Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{{endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.244.0.31"}, NodeName: ptr.To(diffNode)},
			{Addresses: []string{"10.244.1.32"}},
		}, ports: httpPort}}},
	{name: "unnamed-port", spec: v1.ServiceSpec{Ports: []v1.ServicePort{tcp("", 80, num(8080))}},
		slices: []slice{{endpoints: []discovery.Endpoint{ep("10.244.0.32", diffNode)},
			ports: []discovery.EndpointPort{{Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}}}}},
	{name: "port-name-mismatch", spec: v1.ServiceSpec{Ports: []v1.ServicePort{tcp("http", 80, num(8080)), proto(tcp("http-udp", 80, num(8080)), v1.ProtocolUDP)}},
		slices: []slice{{endpoints: []discovery.Endpoint{ep("10.244.0.33", diffNode)},
			ports: []discovery.EndpointPort{epPort("web", v1.ProtocolTCP, 8080), epPort("http-udp", v1.ProtocolTCP, 8080)}}}},
	{name: "lb-everything", spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
		SessionAffinity: v1.ServiceAffinityClientIP, ExternalIPs: []string{"192.168.99.30", diffNodeIP},
		LoadBalancerSourceRanges: []string{"198.51.100.0/24", "2001:db8::/32"}, Ports: []v1.ServicePort{tcp("http", 80, num(8080)), proto(tcp("dns", 53, num(8053)), v1.ProtocolUDP)}},
		lb: []v1.LoadBalancerIngress{{IP: "192.168.99.31"}, {IP: "192.168.99.30"}},
		slices: []slice{{endpoints: []discovery.Endpoint{ep("10.244.0.34", diffNode), ep("10.244.0.35", diffNode, terminating(true)), ep("10.244.1.34", otherNode)},
			ports: []discovery.EndpointPort{epPort("http", v1.ProtocolTCP, 8080), epPort("dns", v1.ProtocolUDP, 8053)}}}},
	{name: "lb-without-nodeports", spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, AllocateLoadBalancerNodePorts: ptr.To(false),
		ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal, Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		lb: []v1.LoadBalancerIngress{{IP: "192.168.99.32"}}, slices: twoEndpoints},
	{name: "lb-proxy-mode-only", spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		lb: []v1.LoadBalancerIngress{{IP: "192.168.99.33", IPMode: ptr.To(v1.LoadBalancerIPModeProxy)}}, slices: twoEndpoints},
	{name: "topology-partial-node-hints", spec: v1.ServiceSpec{Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{{endpoints: []discovery.Endpoint{
			ep("10.244.0.36", diffNode, hints("zone-a", []string{"zone-a"}, []string{diffNode})),
			ep("10.244.2.36", "third-node", hints("zone-a", []string{"zone-a"}, nil)),
			ep("10.244.1.36", otherNode, hints("zone-b", []string{"zone-b"}, nil)),
		}, ports: httpPort}}},
	{name: "topology-missing-hints", spec: v1.ServiceSpec{Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{{endpoints: []discovery.Endpoint{
			ep("10.244.0.37", diffNode, hints("zone-a", []string{"zone-a"}, nil)),
			ep("10.244.1.37", otherNode),
		}, ports: httpPort}}},
	{name: "many-endpoints", spec: v1.ServiceSpec{Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{{endpoints: func() []discovery.Endpoint {
			var eps []discovery.Endpoint
			for i := range 12 {
				eps = append(eps, ep(fmt.Sprintf("10.244.3.%d", 100-i*7), otherNode))
			}
			return eps
		}(), ports: httpPort}}},
	{name: "loadbalancer-plain", spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		lb: []v1.LoadBalancerIngress{{IP: "192.168.99.40"}}, slices: []slice{{endpoints: []discovery.Endpoint{ep("10.244.0.40", diffNode), ep("10.244.1.40", otherNode)}, ports: httpPort}}},
	{name: "affinity-itp-local", spec: v1.ServiceSpec{SessionAffinity: v1.ServiceAffinityClientIP, InternalTrafficPolicy: ptr.To(v1.ServiceInternalTrafficPolicyLocal),
		Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{{endpoints: []discovery.Endpoint{ep("10.244.0.41", diffNode), ep("10.244.0.42", diffNode), ep("10.244.1.41", otherNode)}, ports: httpPort}}},
	{name: "itp-local-terminating", spec: v1.ServiceSpec{InternalTrafficPolicy: ptr.To(v1.ServiceInternalTrafficPolicyLocal), Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{{endpoints: []discovery.Endpoint{ep("10.244.0.43", diffNode, terminating(true)), ep("10.244.1.43", otherNode)}, ports: httpPort}}},
	{name: "external-ips-itp-local", spec: v1.ServiceSpec{ExternalIPs: []string{"192.168.99.41"}, InternalTrafficPolicy: ptr.To(v1.ServiceInternalTrafficPolicyLocal),
		Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{{endpoints: []discovery.Endpoint{ep("10.244.1.44", otherNode)}, ports: httpPort}}},
	{name: "named-port-different-numbers", spec: v1.ServiceSpec{Type: v1.ServiceTypeNodePort, Ports: []v1.ServicePort{tcp("http", 80, named("web"))}},
		slices: []slice{
			{endpoints: []discovery.Endpoint{ep("10.244.0.45", diffNode)}, ports: httpPort},
			{endpoints: []discovery.Endpoint{ep("10.244.1.45", otherNode), ep("10.244.0.45", diffNode)}, ports: []discovery.EndpointPort{epPort("http", v1.ProtocolTCP, 9090)}},
		}},
	{name: "slice-without-ports", spec: v1.ServiceSpec{Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{{endpoints: []discovery.Endpoint{ep("10.244.0.46", diffNode)}}}},
	{name: "endpoint-two-addresses", spec: v1.ServiceSpec{Ports: []v1.ServicePort{tcp("http", 80, num(8080))}},
		slices: []slice{{endpoints: []discovery.Endpoint{ep("10.244.0.47", diffNode, func(e *discovery.Endpoint) { e.Addresses = append(e.Addresses, "10.244.0.48") })}, ports: httpPort}}},
	{name: "headless", spec: v1.ServiceSpec{ClusterIP: v1.ClusterIPNone, Ports: []v1.ServicePort{tcp("http", 80, num(8080))}}, slices: twoEndpoints},
	{name: "externalname", spec: v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "db.example"}},
}

// createShapes creates the namespace, the Node and every shape.
func createShapes(ctx context.Context, client kubernetes.Interface) error {
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: diffNS}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	for _, n := range []fakeNode{diffNodeSpec, otherNodeSpec} {
		if _, err := client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name,
			Labels: map[string]string{v1.LabelTopologyZone: n.zone, v1.LabelHostname: n.name}}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node: %w", err)
		}
		// The controller manager updates new Nodes too (taints, pod CIDR).
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			node, err := client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			node.Status.Addresses = nil
			for _, ip := range n.ips {
				node.Status.Addresses = append(node.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
			}
			node.Status.Addresses = append(node.Status.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: n.name})
			_, err = client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("set addresses of node %s: %w", n.name, err)
		}
	}
	for _, s := range diffShapes {
		spec := *s.spec.DeepCopy()
		if spec.Type == v1.ServiceTypeLoadBalancer && spec.LoadBalancerClass == nil {
			// The shapes carry their own load balancer status: a class
			// keeps the lab's load balancer from assigning its own
			// (kube-proxy ignores the class).
			spec.LoadBalancerClass = ptr.To("flowtest.svclab.dev/differential")
		}
		svc, err := client.CoreV1().Services(diffNS).Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.name}, Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create Service %s: %w", s.name, err)
		}
		if len(s.lb) > 0 {
			svc.Status.LoadBalancer.Ingress = s.lb
			if _, err := client.CoreV1().Services(diffNS).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("set load balancer status of %s: %w", s.name, err)
			}
		}
		for i, sl := range s.slices {
			es := &discovery.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", s.name, i), Labels: map[string]string{
					discovery.LabelServiceName: s.name, discovery.LabelManagedBy: "flowtest.svclab.dev"}},
				AddressType: discovery.AddressTypeIPv4, Endpoints: sl.endpoints, Ports: sl.ports,
			}
			if _, err := client.DiscoveryV1().EndpointSlices(diffNS).Create(ctx, es, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create EndpointSlice %s: %w", es.Name, err)
			}
		}
	}
	return nil
}

// apiObjects reads back every Service and EndpointSlice and the Node, as
// a manifest for the renderer, and the ServiceCIDRs. Without withZone the
// Nodes lose their zone label.
func apiObjects(ctx context.Context, client kubernetes.Interface, withZone bool) (manifest []byte, serviceCIDRs []string, err error) {
	var docs []runtime.Object
	svcs, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("list Services: %w", err)
	}
	for i := range svcs.Items {
		o := &svcs.Items[i]
		o.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
		o.ManagedFields = nil
		docs = append(docs, o)
	}
	slices, err := client.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("list EndpointSlices: %w", err)
	}
	for i := range slices.Items {
		o := &slices.Items[i]
		o.TypeMeta = metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"}
		o.ManagedFields = nil
		docs = append(docs, o)
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("list Nodes: %w", err)
	}
	for i := range nodes.Items {
		o := &nodes.Items[i]
		o.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
		o.ManagedFields = nil
		if !withZone {
			delete(o.Labels, v1.LabelTopologyZone)
		}
		docs = append(docs, o)
	}
	var b bytes.Buffer
	for _, d := range docs {
		y, err := yaml.Marshal(d)
		if err != nil {
			return nil, nil, fmt.Errorf("marshal: %w", err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	cidrs, err := client.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("list ServiceCIDRs: %w", err)
	}
	for _, c := range cidrs.Items {
		serviceCIDRs = append(serviceCIDRs, c.Spec.CIDRs...)
	}
	return b.Bytes(), serviceCIDRs, nil
}

// kubeProxy is upstream kube-proxy running in a namespace of its own.
type kubeProxy struct {
	ns      Netns
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	err     error
}

// startKubeProxy runs "svclab-kube kube-proxy" for m's node in a new
// namespace of lab that has the node's IPs and reaches the API server over
// a veth on the cluster's bridge. It is killed when t ends.
func startKubeProxy(t *testing.T, lab *Sandbox, c *embedded.Cluster, bin string, index int, m diffMode) *kubeProxy {
	t.Helper()
	ctx := t.Context()
	st := c.State()
	ns, err := lab.Netns(ctx, fmt.Sprintf("kp%d", index))
	if err != nil {
		t.Fatal(err)
	}
	prefix, err := netip.ParsePrefix(st.Subnet)
	if err != nil {
		t.Fatalf("cluster subnet: %v", err)
	}
	// An address high in the cluster's /24, away from its nodes.
	addr := prefix.Addr().As4()
	addr[3] = byte(250 - index)
	port := fmt.Sprintf("%sb%d", lab.ID, index)
	if err := lab.BridgePort(ctx, st.FabricNetns(), st.Bridge, port, ns, "eth0", fmt.Sprintf("%s/%d", netip.AddrFrom4(addr), prefix.Bits())); err != nil {
		t.Fatal(err)
	}
	for _, a := range m.node.ips {
		if err := ns.IP(ctx, "addr", "add", a+"/32", "dev", "lo"); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	kubeconfig, err := c.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	kcPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kcPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	var npa string
	if len(m.nodePortAddresses) > 0 {
		npa = fmt.Sprintf("nodePortAddresses: [%s]\n", strings.Join(m.nodePortAddresses, ", "))
	}
	// conntrack: leave every sysctl alone (nf_conntrack_max is not per
	// namespace). A short syncPeriod makes the nftables proxier delete
	// chains left over by changes (of the cluster's own objects) soon.
	config := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
mode: %s
clusterCIDR: %s
detectLocalMode: ClusterCIDR
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
iptables: {masqueradeAll: %[6]t, syncPeriod: 5s}
nftables: {masqueradeAll: %[6]t, syncPeriod: 5s}
%[5]sconntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kcPath, m.node.name, m.mode, clusterCIDR, npa, m.masqueradeAll)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	kp := &kubeProxy{ns: ns, logPath: filepath.Join(dir, "kube-proxy.log"), exited: make(chan struct{})}
	logf, err := os.Create(kp.logPath)
	if err != nil {
		t.Fatal(err)
	}
	// "ip netns exec" execs kube-proxy, so the process is kube-proxy itself.
	// proxier.go's V(4) lines tell when kube-proxy learns its zone.
	kp.cmd = exec.Command("ip", "netns", "exec", ns.Name, bin, "kube-proxy", "--config", cfgPath, "--vmodule=proxier=4")
	kp.cmd.Stdout, kp.cmd.Stderr = logf, logf
	// No Pdeathsig: it fires when the thread that forked exits, and
	// Netns.Do throws threads away.
	kp.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := kp.cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start kube-proxy: %v", err)
	}
	go func() {
		kp.err = kp.cmd.Wait()
		logf.Close()
		close(kp.exited)
	}()
	t.Cleanup(func() {
		kp.cmd.Process.Kill()
		select {
		case <-kp.exited:
		case <-time.After(10 * time.Second):
			t.Errorf("kube-proxy (pid %d) did not exit after SIGKILL", kp.cmd.Process.Pid)
		}
		if t.Failed() {
			t.Logf("kube-proxy log (%s):\n%s", kp.logPath, kp.logTail(40))
		}
	})
	return kp
}

// logged reports whether kube-proxy's log holds s.
func (kp *kubeProxy) logged(s string) bool {
	b, _ := os.ReadFile(kp.logPath)
	return bytes.Contains(b, []byte(s))
}

func (kp *kubeProxy) logTail(n int) string {
	b, _ := os.ReadFile(kp.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitSynced waits until kube-proxy reports a successful IPv4 sync on its
// metrics server (inside its namespace).
func (kp *kubeProxy) waitSynced(ctx context.Context, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := kp.ns.Do(func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
		DisableKeepAlives: true,
	}}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-kp.exited:
			return fmt.Errorf("kube-proxy exited: %v", kp.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		ok, err := syncedIPv4(client)
		if ok {
			return nil
		}
		last = err
	}
	return fmt.Errorf("kube-proxy did not sync within %s (last: %v)", timeout, last)
}

func syncedIPv4(client *http.Client) (bool, error) {
	resp, err := client.Get("http://127.0.0.1:10249/metrics")
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 8<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, `kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} `) {
			return !strings.HasSuffix(line, " 0"), nil
		}
	}
	return false, errors.New("no IPv4 sync timestamp yet")
}

// stableListing reads list until two reads a second apart agree (kube-proxy
// may sync again right after its first sync, when late informers catch
// up), and returns it normalised.
func stableListing(ctx context.Context, list func() (string, error), normalize func(string) (string, error), timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	prev := ""
	for {
		raw, err := list()
		if err != nil {
			return "", err
		}
		cur, err := normalize(raw)
		if err != nil {
			return "", err
		}
		if cur == prev {
			return cur, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("ruleset still changing after %s", timeout)
		}
		prev = cur
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// diffMode is one kube-proxy configuration compared with ours.
type diffMode struct {
	name              string
	node              fakeNode
	mode              string
	nodePortAddresses []string
	masqueradeAll     bool
}

var diffModes = []diffMode{
	{name: "nftables", node: diffNodeSpec, mode: render.ModeNFTables},
	{name: "iptables", node: diffNodeSpec, mode: render.ModeIPTables},
	{name: "nftables nodePortAddresses CIDR masqueradeAll", node: diffNodeSpec, mode: render.ModeNFTables,
		nodePortAddresses: []string{"192.168.0.0/16"}, masqueradeAll: true},
	{name: "iptables nodePortAddresses CIDR masqueradeAll", node: diffNodeSpec, mode: render.ModeIPTables,
		nodePortAddresses: []string{"192.168.0.0/16"}, masqueradeAll: true},
	// The other perspective: the "remote" endpoints are local, zone-b.
	{name: "nftables on other-node", node: otherNodeSpec, mode: render.ModeNFTables},
	{name: "iptables on other-node", node: otherNodeSpec, mode: render.ModeIPTables},
}

func TestDifferentialUpstreamKubeProxy(t *testing.T) {
	requireRoot(t, "nft", "iptables", "iptables-restore", "iptables-save")
	if err := embedded.Preflight(); err != nil {
		t.Skipf("differential test: %v", err)
	}
	ctx := t.Context()
	bin, err := kubebin.Locate(ctx, nil)
	if err != nil {
		t.Skipf("differential test: svclab-kube not available: %v", err)
	}
	lab := newSandbox(t, "d")

	logger := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p := embedded.New(t.TempDir(), logger)
	b := make([]byte, 2)
	rand.Read(b)
	name := "flowdiff-" + hex.EncodeToString(b)
	cc, err := p.Create(ctx, cluster.CreateOptions{Name: name, Workers: 0})
	if err != nil {
		t.Fatalf("create cluster: %v", err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.Delete(dctx, name); err != nil {
			t.Errorf("delete cluster: %v", err)
		}
	})
	c := cc.(*embedded.Cluster)
	client, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	if err := createShapes(ctx, client); err != nil {
		t.Fatal(err)
	}
	for i, m := range diffModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			kp := startKubeProxy(t, lab, c, bin, i, m)
			list, normalize := ListNFTables, NormalizeNFTables
			if m.mode == render.ModeIPTables {
				list, normalize = IPTablesSave, NormalizeIPTablesSave
			}
			if err := kp.waitSynced(ctx, 60*time.Second); err != nil {
				t.Fatal(err)
			}
			// Objects outside our namespace (the cluster's own add-ons)
			// may change while we compare: compare kube-proxy's settled
			// rules with a fresh render of the objects read right after,
			// a few times, and keep the last difference.
			var got, want, objsPath, d string
			deadline := time.Now().Add(20 * time.Second)
			for attempt := 0; ; attempt++ {
				var err error
				got, err = stableListing(ctx, func() (string, error) { return list(ctx, kp.ns) }, normalize, 20*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				// kube-proxy writes the ServiceCIDR drop rule only in a
				// full sync, and its first full sync may run before its
				// ServiceCIDR informer has delivered (the next full sync
				// is an hour away): compare like with like.
				withCIDRs := m.mode != render.ModeNFTables || strings.Contains(got, "Drop traffic to unallocated ClusterIPs")
				if !withCIDRs && attempt == 0 {
					t.Log("kube-proxy's first full sync ran before it knew the ServiceCIDRs; rendering ours without them")
				}
				// kube-proxy registers its topology handler on a Node
				// informer that is already running, so the first Node
				// event can come before the handler is there; then it
				// never learns its zone (another upstream race). Its
				// V(4) log says when it did.
				withZone := kp.logged("Updated proxier node topology labels")
				if !withZone && attempt == 0 {
					t.Log("kube-proxy never learnt its node's zone; rendering ours without it")
				}
				want, objsPath, err = ourRules(ctx, t, lab, client, m, fmt.Sprintf("o%d-%d", i, attempt), withCIDRs, withZone)
				if err != nil {
					t.Fatal(err)
				}
				if d = Diff("kube-proxy v1.37.2", got, "svclab render", want); d == "" || time.Now().After(deadline) {
					break
				}
				t.Logf("attempt %d: rules differ, retrying in case objects changed", attempt+1)
				time.Sleep(2 * time.Second)
			}
			// Guard against comparing two empty or partial rulesets.
			for _, s := range diffShapes {
				skipped := s.spec.ClusterIP == v1.ClusterIPNone || s.spec.Type == v1.ServiceTypeExternalName
				mention := regexp.MustCompile(regexp.QuoteMeta(diffNS+"/"+s.name) + `[/: "]`)
				if has := mention.MatchString(got); has == skipped {
					t.Errorf("kube-proxy's rules mention Service %s: %v, want %v", s.name, has, !skipped)
				}
			}
			if d != "" {
				t.Errorf("rules differ (objects in %s):\n%s", objsPath, d)
			} else {
				t.Logf("identical after normalisation: %d lines", strings.Count(got, "\n"))
			}
			if dir := os.Getenv("FLOWTEST_DUMP_DIR"); dir != "" {
				base := filepath.Join(dir, strings.ReplaceAll(m.name, " ", "-"))
				os.WriteFile(base+".upstream", []byte(got), 0o644)
				os.WriteFile(base+".ours", []byte(want), 0o644)
			}
		})
	}
}

// ourRules reads the objects from the API server (and, withServiceCIDRs,
// the ServiceCIDRs), renders them for mode m, loads the result into a new namespace of lab with the real nft or
// iptables-restore, and returns its listing, normalised, and the path of
// the objects.
func ourRules(ctx context.Context, t *testing.T, lab *Sandbox, client kubernetes.Interface, m diffMode, nsName string, withServiceCIDRs, withZone bool) (listing, objsPath string, err error) {
	objs, serviceCIDRs, err := apiObjects(ctx, client, withZone)
	if err != nil {
		return "", "", err
	}
	if !withServiceCIDRs {
		serviceCIDRs = nil
	}
	objsPath = filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(objsPath, objs, 0o644); err != nil {
		return "", "", err
	}
	ns, err := lab.Netns(ctx, nsName)
	if err != nil {
		return "", "", err
	}
	var ours bytes.Buffer
	switch m.mode {
	case render.ModeNFTables:
		err = render.Render(ctx, testLogger(t), render.Options{
			Mode: m.mode, NodeName: m.node.name, ClusterCIDR: clusterCIDR,
			ServiceCIDRs: serviceCIDRs, NodePortAddresses: m.nodePortAddresses, MasqueradeAll: m.masqueradeAll,
		}, bytes.NewReader(objs), objsPath, &ours)
		if err != nil {
			return "", "", fmt.Errorf("render: %w", err)
		}
		if err := ApplyNFTables(ctx, ns, ours.String()); err != nil {
			return "", "", err
		}
		listing, _, err = settled(ctx, func() (string, error) { return ListNFTables(ctx, ns) }, NormalizeNFTables, objsPath)
		if err != nil {
			return "", "", err
		}
		// The other output form, the transaction kube-proxy's first sync
		// pipes into nft, must give the same table.
		var tx bytes.Buffer
		err = render.Render(ctx, testLogger(t), render.Options{
			Mode: m.mode, NodeName: m.node.name, ClusterCIDR: clusterCIDR, Output: render.OutputTransaction,
			ServiceCIDRs: serviceCIDRs, NodePortAddresses: m.nodePortAddresses, MasqueradeAll: m.masqueradeAll,
		}, bytes.NewReader(objs), objsPath, &tx)
		if err != nil {
			return "", "", fmt.Errorf("render transaction: %w", err)
		}
		txNS, err := lab.Netns(ctx, nsName+"t")
		if err != nil {
			return "", "", err
		}
		if err := ApplyNFTables(ctx, txNS, tx.String()); err != nil {
			return "", "", fmt.Errorf("transaction: %w", err)
		}
		txListing, _, err := settled(ctx, func() (string, error) { return ListNFTables(ctx, txNS) }, NormalizeNFTables, objsPath)
		if err != nil {
			return "", "", err
		}
		if d := Diff("ruleset", listing, "transaction", txListing); d != "" {
			return "", "", fmt.Errorf("render --output transaction and --output ruleset give different tables:\n%s", d)
		}
		return listing, objsPath, nil
	default:
		// Like kube-proxy: use nfacct if the counters can be made.
		nfacct := EnsureNFAcct(ns, nfacct.Counters...) == nil
		if err := renderIPTables(ctx, testLogger(t), objs, objsPath, m, nfacct, &ours); err != nil {
			return "", "", fmt.Errorf("render: %w", err)
		}
		if err := ApplyIPTables(ctx, ns, ours.String()); err != nil {
			return "", "", err
		}
		return settled(ctx, func() (string, error) { return IPTablesSave(ctx, ns) }, NormalizeIPTablesSave, objsPath)
	}
}

func settled(ctx context.Context, list func() (string, error), normalize func(string) (string, error), objsPath string) (string, string, error) {
	raw, err := list()
	if err != nil {
		return "", "", err
	}
	l, err := normalize(raw)
	return l, objsPath, err
}

// renderIPTables renders iptables-restore input for m's node like
// "svclab proxier render --mode iptables" does, but with the nfacct
// matches kube-proxy adds when the kernel supports nfacct (render, which
// touches nothing, cannot know and leaves them out).
func renderIPTables(ctx context.Context, logger *slog.Logger, objs []byte, source string, m diffMode, nfacct bool, w io.Writer) error {
	decoded, err := manifest.Decode(bytes.NewReader(objs), source)
	if err != nil {
		return err
	}
	node := decoded.Node(m.node.name)
	if node == nil {
		return fmt.Errorf("no Node %s in %s", m.node.name, source)
	}
	var localAddrs []net.IP
	for _, ip := range m.node.ips {
		localAddrs = append(localAddrs, net.ParseIP(ip))
	}
	nodeIP := localAddrs[0]
	npa, err := model.NewNodePortAddresses(v1.IPv4Protocol, m.nodePortAddresses, nodeIP)
	if err != nil {
		return err
	}
	snap, err := model.Build(ctx, logger, model.Input{Family: v1.IPv4Protocol, Node: node, NodeName: m.node.name,
		Services: decoded.Services, EndpointSlices: decoded.EndpointSlices})
	if err != nil {
		return err
	}
	res, err := iptables.Render(ctx, logger, iptables.Config{
		Family: v1.IPv4Protocol, NodeIP: nodeIP, ClusterCIDR: clusterCIDR, NodePortAddresses: npa,
		LocalAddresses: localAddrs, MasqueradeAll: m.masqueradeAll,
		LocalhostNodePorts: true, NFAcct: nfacct,
	}, snap, iptables.Options{})
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, res.Restore)
	return err
}
