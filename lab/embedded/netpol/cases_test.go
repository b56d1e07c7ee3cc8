//go:build linux

package netpol_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The cases of upstream's test/e2e/network/netpol (network_policy.go) and
// of the network-policy-api project's v1 truth tables that apply to v1
// NetworkPolicy on a single-stack IPv4 cluster without SCTP sockets.

type step struct {
	name string
	do   func(ctx context.Context, e *env)
}

type conformanceCase struct {
	name  string
	steps []step
}

func np(ns, name string, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

func lbl(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func expr(key string, op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func all() *metav1.LabelSelector { return &metav1.LabelSelector{} }

func protoP(p corev1.Protocol) *corev1.Protocol { return &p }
func num(n int) *intstr.IntOrString             { v := intstr.FromInt32(int32(n)); return &v }
func name(n string) *intstr.IntOrString         { v := intstr.FromString(n); return &v }
func i32p(n int32) *int32                       { return &n }

var (
	ingressOnly = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	egressOnly  = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	bothTypes   = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
)

// from is an ingress rule; to an egress rule.
func from(ports []networkingv1.NetworkPolicyPort, peers ...networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyIngressRule {
	return []networkingv1.NetworkPolicyIngressRule{{From: peers, Ports: ports}}
}

func to(ports []networkingv1.NetworkPolicyPort, peers ...networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyEgressRule {
	return []networkingv1.NetworkPolicyEgressRule{{To: peers, Ports: ports}}
}

func ports(ps ...networkingv1.NetworkPolicyPort) []networkingv1.NetworkPolicyPort { return ps }

func tcp(p *intstr.IntOrString) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: protoP(corev1.ProtocolTCP), Port: p}
}

func udp(p *intstr.IntOrString) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: protoP(corev1.ProtocolUDP), Port: p}
}

// dnsEgress lets egress-isolated pods reach CoreDNS, as upstream's cases
// add to egress policies.
var dnsEgress = networkingv1.NetworkPolicyEgressRule{
	Ports: ports(udp(num(53)), tcp(num(53))),
	To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: lbl("kubernetes.io/metadata.name", "kube-system")}},
}

func create(nps ...func(e *env) *networkingv1.NetworkPolicy) func(context.Context, *env) {
	return func(ctx context.Context, e *env) {
		for _, f := range nps {
			e.apply(ctx, f(e))
		}
	}
}

func fixed(p *networkingv1.NetworkPolicy) func(*env) *networkingv1.NetworkPolicy {
	return func(*env) *networkingv1.NetworkPolicy { return p.DeepCopy() }
}

func one(s string, f func(context.Context, *env)) []step { return []step{{s, f}} }

func ipOf(e *env, key string) string { return e.pods[key].Status.PodIP }

func conformanceCases() []conformanceCase {
	x := "x"
	return []conformanceCase{
		{"default-deny-ingress", one("deny all ingress in x", create(fixed(np(x, "deny-ingress", networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly}))))},
		{"default-deny-all", one("deny all ingress and egress in x", create(fixed(np(x, "deny-all", networkingv1.NetworkPolicySpec{PolicyTypes: bothTypes}))))},
		{"allow-all", one("allow all ingress to x", create(fixed(np(x, "allow-all", networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly, Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}))))},
		{"allow-from-same-namespace-podselector", one("x/a from pods b in x", create(fixed(np(x, "allow-b", networkingv1.NetworkPolicySpec{
			PodSelector: *lbl("pod", "a"), Ingress: from(nil, networkingv1.NetworkPolicyPeer{PodSelector: lbl("pod", "b")})}))))},
		{"allow-from-all-namespaces", one("x/a from every namespace", create(fixed(np(x, "allow-all-ns", networkingv1.NetworkPolicySpec{
			PodSelector: *lbl("pod", "a"), Ingress: from(nil, networkingv1.NetworkPolicyPeer{NamespaceSelector: all()})}))))},
		{"allow-from-other-namespace", one("x from namespace y only", create(fixed(np(x, "allow-y", networkingv1.NetworkPolicySpec{
			Ingress: from(nil, networkingv1.NetworkPolicyPeer{NamespaceSelector: lbl("ns", "y")})}))))},
		{"podselector-matchexpressions", one("x/a from pods b or c (In)", create(fixed(np(x, "expr", networkingv1.NetworkPolicySpec{
			PodSelector: *lbl("pod", "a"), Ingress: from(nil, networkingv1.NetworkPolicyPeer{PodSelector: expr("pod", metav1.LabelSelectorOpIn, "b", "c")})}))))},
		{"namespaceselector-matchexpressions", one("x/a from namespaces NotIn (x)", create(fixed(np(x, "ns-expr", networkingv1.NetworkPolicySpec{
			PodSelector: *lbl("pod", "a"), Ingress: from(nil, networkingv1.NetworkPolicyPeer{NamespaceSelector: expr("ns", metav1.LabelSelectorOpNotIn, "x")})}))))},
		{"namespaceselector-default-label", one("x/a from kubernetes.io/metadata.name=y", create(fixed(np(x, "ns-default-label", networkingv1.NetworkPolicySpec{
			PodSelector: *lbl("pod", "a"), Ingress: from(nil, networkingv1.NetworkPolicyPeer{NamespaceSelector: lbl("kubernetes.io/metadata.name", "y")})}))))},
		{"podselector-or-namespaceselector", one("x/a from (pods b in x) OR (namespace y)", create(fixed(np(x, "or", networkingv1.NetworkPolicySpec{
			PodSelector: *lbl("pod", "a"), Ingress: from(nil,
				networkingv1.NetworkPolicyPeer{PodSelector: lbl("pod", "b")},
				networkingv1.NetworkPolicyPeer{NamespaceSelector: lbl("ns", "y")})}))))},
		{"podselector-and-namespaceselector", one("x/a from pods b in namespace y (AND)", create(fixed(np(x, "and", networkingv1.NetworkPolicySpec{
			PodSelector: *lbl("pod", "a"), Ingress: from(nil,
				networkingv1.NetworkPolicyPeer{PodSelector: lbl("pod", "b"), NamespaceSelector: lbl("ns", "y")})}))))},
		{"multiple-podselectors-and-namespaceselectors", one("x/a from pods b or c in namespaces other than x", create(fixed(np(x, "multi", networkingv1.NetworkPolicySpec{
			PodSelector: *lbl("pod", "a"), Ingress: from(nil,
				networkingv1.NetworkPolicyPeer{PodSelector: expr("pod", metav1.LabelSelectorOpIn, "b", "c"), NamespaceSelector: expr("ns", metav1.LabelSelectorOpNotIn, "x")})}))))},
		{"any-podselector-in-namespaces", one("x/a from all pods of y and z", create(fixed(np(x, "any-pods", networkingv1.NetworkPolicySpec{
			PodSelector: *lbl("pod", "a"), Ingress: from(nil,
				networkingv1.NetworkPolicyPeer{PodSelector: all(), NamespaceSelector: expr("ns", metav1.LabelSelectorOpIn, "y", "z")})}))))},
		{"ports-81-only", one("x/a from namespace y on TCP 81", create(fixed(np(x, "port-81", networkingv1.NetworkPolicySpec{
			PodSelector: *lbl("pod", "a"), Ingress: from(ports(tcp(num(81))), networkingv1.NetworkPolicyPeer{NamespaceSelector: lbl("ns", "y")})}))))},
		{"stacked-policies-80-and-81", []step{
			{"x/a from y on TCP 80", create(fixed(np(x, "port-80", networkingv1.NetworkPolicySpec{
				PodSelector: *lbl("pod", "a"), Ingress: from(ports(tcp(num(80))), networkingv1.NetworkPolicyPeer{NamespaceSelector: lbl("ns", "y")})})))},
			{"and a second policy for TCP 81", create(fixed(np(x, "port-81", networkingv1.NetworkPolicySpec{
				PodSelector: *lbl("pod", "a"), Ingress: from(ports(tcp(num(81))), networkingv1.NetworkPolicyPeer{NamespaceSelector: lbl("ns", "y")})})))},
		}},
		{"named-port-ingress", one("x on named port serve-80-tcp", create(fixed(np(x, "named", networkingv1.NetworkPolicySpec{
			Ingress: from(ports(tcp(name("serve-80-tcp"))))}))))},
		{"named-port-from-namespace", one("x from namespace y on named port serve-80-udp", create(fixed(np(x, "named-ns", networkingv1.NetworkPolicySpec{
			Ingress: from(ports(udp(name("serve-80-udp"))), networkingv1.NetworkPolicyPeer{NamespaceSelector: lbl("ns", "y")})}))))},
		{"named-port-egress", one("x egress only to named port serve-80-tcp", create(fixed(np(x, "named-egress", networkingv1.NetworkPolicySpec{
			PolicyTypes: egressOnly, Egress: append(to(ports(tcp(name("serve-80-tcp")))), dnsEgress)}))))},
		{"named-port-wrong-protocol", one("x on serve-80-tcp declared as UDP matches nothing", create(fixed(np(x, "named-proto", networkingv1.NetworkPolicySpec{
			Ingress: from(ports(udp(name("serve-80-tcp"))))}))))},
		{"endport-range", one("x/a from y on TCP 80-81 and UDP 81-81", create(fixed(np(x, "range", networkingv1.NetworkPolicySpec{
			PodSelector: *lbl("pod", "a"), Ingress: from(ports(
				networkingv1.NetworkPolicyPort{Port: num(80), EndPort: i32p(81)},
				networkingv1.NetworkPolicyPort{Protocol: protoP(corev1.ProtocolUDP), Port: num(81), EndPort: i32p(81)}),
				networkingv1.NetworkPolicyPeer{NamespaceSelector: lbl("ns", "y")})}))))},
		{"protocol-without-port", one("x on any UDP port", create(fixed(np(x, "any-udp", networkingv1.NetworkPolicySpec{
			Ingress: from(ports(networkingv1.NetworkPolicyPort{Protocol: protoP(corev1.ProtocolUDP)}))}))))},
		{"sctp-is-not-tcp", one("x allows SCTP 80 and 81 only", create(fixed(np(x, "sctp", networkingv1.NetworkPolicySpec{
			Ingress: from(ports(
				networkingv1.NetworkPolicyPort{Protocol: protoP(corev1.ProtocolSCTP), Port: num(80)},
				networkingv1.NetworkPolicyPort{Protocol: protoP(corev1.ProtocolSCTP), Port: num(81)}))}))))},
		{"udp-only-blocks-tcp", one("x/a allows UDP 81 only", create(fixed(np(x, "udp-81", networkingv1.NetworkPolicySpec{
			PodSelector: *lbl("pod", "a"), Ingress: from(ports(udp(num(81))))}))))},
		{"updated-policy", []step{
			{"x/a from pods b in x on 80", create(fixed(np(x, "upd", networkingv1.NetworkPolicySpec{
				PodSelector: *lbl("pod", "a"), Ingress: from(ports(tcp(num(80))), networkingv1.NetworkPolicyPeer{PodSelector: lbl("pod", "b")})})))},
			{"then from pods c on 81", create(fixed(np(x, "upd", networkingv1.NetworkPolicySpec{
				PodSelector: *lbl("pod", "a"), Ingress: from(ports(tcp(num(81))), networkingv1.NetworkPolicyPeer{PodSelector: lbl("pod", "c")})})))},
		}},
		{"updated-namespace", []step{
			{"x/a from namespaces ns2=updated", create(fixed(np(x, "from-updated-ns", networkingv1.NetworkPolicySpec{
				PodSelector: *lbl("pod", "a"), Ingress: from(nil, networkingv1.NetworkPolicyPeer{NamespaceSelector: lbl("ns2", "updated")})})))},
			{"label namespace y ns2=updated", func(ctx context.Context, e *env) {
				e.relabel(ctx, "namespaces", "", "y", map[string]string{"ns": "y", "ns2": "updated"})
			}},
		}},
		{"updated-pod", []step{
			{"x/a from pods pod2=updated", create(fixed(np(x, "from-updated-pod", networkingv1.NetworkPolicySpec{
				PodSelector: *lbl("pod", "a"), Ingress: from(nil, networkingv1.NetworkPolicyPeer{PodSelector: lbl("pod2", "updated"), NamespaceSelector: all()})})))},
			{"label z/b pod2=updated", func(ctx context.Context, e *env) {
				e.relabel(ctx, "pods", "z", "b", map[string]string{"pod": "b", "pod2": "updated"})
			}},
		}},
		{"deny-ingress-to-updated-pod", []step{
			{"deny ingress to pods target=isolated in x", create(fixed(np(x, "deny-target", networkingv1.NetworkPolicySpec{
				PodSelector: *lbl("target", "isolated"), PolicyTypes: ingressOnly})))},
			{"label x/a target=isolated", func(ctx context.Context, e *env) {
				e.relabel(ctx, "pods", "x", "a", map[string]string{"pod": "a", "target": "isolated"})
			}},
		}},
		{"deny-ingress-from-other-namespaces", one("x from its own namespace only", create(fixed(np(x, "same-ns", networkingv1.NetworkPolicySpec{
			Ingress: from(nil, networkingv1.NetworkPolicyPeer{PodSelector: all()})}))))},
		{"deny-egress-podselector", one("x/a may not send", create(fixed(np(x, "deny-egress-a", networkingv1.NetworkPolicySpec{
			PodSelector: *lbl("pod", "a"), PolicyTypes: egressOnly}))))},
		{"deny-egress-namespace", one("nothing in x may send but DNS", create(fixed(np(x, "deny-egress", networkingv1.NetworkPolicySpec{
			PolicyTypes: egressOnly, Egress: []networkingv1.NetworkPolicyEgressRule{dnsEgress}}))))},
		{"ingress-and-egress-together", one("x/a from and to pods b in x", create(fixed(np(x, "both", networkingv1.NetworkPolicySpec{
			PodSelector: *lbl("pod", "a"), PolicyTypes: bothTypes,
			Ingress: from(nil, networkingv1.NetworkPolicyPeer{PodSelector: lbl("pod", "b")}),
			Egress:  append(to(nil, networkingv1.NetworkPolicyPeer{PodSelector: lbl("pod", "b")}), dnsEgress)}))))},
		{"egress-denied-though-server-allows", []step{
			{"x/a may send only to y", create(fixed(np(x, "egress-y", networkingv1.NetworkPolicySpec{
				PodSelector: *lbl("pod", "a"), PolicyTypes: egressOnly,
				Egress: append(to(nil, networkingv1.NetworkPolicyPeer{NamespaceSelector: lbl("ns", "y")}), dnsEgress)})))},
			{"while z allows all ingress", create(fixed(np("z", "allow-all", networkingv1.NetworkPolicySpec{
				PolicyTypes: ingressOnly, Ingress: []networkingv1.NetworkPolicyIngressRule{{}}})))},
		}},
		{"egress-to-pod-in-other-namespace", one("x/a may send only to y/b", create(fixed(np(x, "egress-yb", networkingv1.NetworkPolicySpec{
			PodSelector: *lbl("pod", "a"), PolicyTypes: egressOnly,
			Egress: append(to(nil, networkingv1.NetworkPolicyPeer{PodSelector: lbl("pod", "b"), NamespaceSelector: lbl("ns", "y")}), dnsEgress)}))))},
		{"ingress-any-port-one-protocol", one("x/a from y on any TCP port", create(fixed(np(x, "any-tcp", networkingv1.NetworkPolicySpec{
			PodSelector: *lbl("pod", "a"),
			Ingress:     from(ports(networkingv1.NetworkPolicyPort{Protocol: protoP(corev1.ProtocolTCP)}), networkingv1.NetworkPolicyPeer{NamespaceSelector: lbl("ns", "y")})}))))},
		{"ingress-allow-all-takes-precedence", []step{
			{"x/a from pods b on 80", create(fixed(np(x, "narrow", networkingv1.NetworkPolicySpec{
				PodSelector: *lbl("pod", "a"), Ingress: from(ports(tcp(num(80))), networkingv1.NetworkPolicyPeer{PodSelector: lbl("pod", "b")})})))},
			{"and x/a from anywhere", create(fixed(np(x, "wide", networkingv1.NetworkPolicySpec{
				PodSelector: *lbl("pod", "a"), Ingress: []networkingv1.NetworkPolicyIngressRule{{}}})))},
		}},
		{"egress-allow-all-takes-precedence", []step{
			{"x/a to y on TCP 80 only", create(fixed(np(x, "narrow-egress", networkingv1.NetworkPolicySpec{
				PodSelector: *lbl("pod", "a"), PolicyTypes: egressOnly,
				Egress: append(to(ports(tcp(num(80))), networkingv1.NetworkPolicyPeer{NamespaceSelector: lbl("ns", "y")}), dnsEgress)})))},
			{"and x/a to anywhere", create(fixed(np(x, "wide-egress", networkingv1.NetworkPolicySpec{
				PodSelector: *lbl("pod", "a"), PolicyTypes: egressOnly, Egress: []networkingv1.NetworkPolicyEgressRule{{}}})))},
		}},
		{"stop-enforcing-after-delete", []step{
			{"deny all ingress in x", create(fixed(np(x, "deny-then-delete", networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly})))},
			{"delete it", func(ctx context.Context, e *env) {
				if err := e.client.NetworkingV1().NetworkPolicies(x).Delete(ctx, "deny-then-delete", metav1.DeleteOptions{}); err != nil {
					e.t.Fatal(err)
				}
			}},
		}},
		{"egress-to-cidr", one("x/a may send only to y/b's /32 and to a CIDR around z/c", create(func(e *env) *networkingv1.NetworkPolicy {
			return np(x, "egress-cidr", networkingv1.NetworkPolicySpec{PodSelector: *lbl("pod", "a"), PolicyTypes: egressOnly,
				Egress: append(to(nil,
					networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: ipOf(e, "y/b") + "/32"}},
					networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: netip.PrefixFrom(netip.MustParseAddr(ipOf(e, "z/c")), 31).Masked().String()}}), dnsEgress)})
		}))},
		{"egress-cidr-except", one("x/a may send to the pod network except x/b", create(func(e *env) *networkingv1.NetworkPolicy {
			return np(x, "egress-except", networkingv1.NetworkPolicySpec{PodSelector: *lbl("pod", "a"), PolicyTypes: egressOnly,
				Egress: append(to(nil, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{ipOf(e, "x/b") + "/32"}}}), dnsEgress)})
		}))},
		{"cidr-except-then-not-except", []step{
			{"x/a to the pod network except y/c", create(func(e *env) *networkingv1.NetworkPolicy {
				return np(x, "except-update", networkingv1.NetworkPolicySpec{PodSelector: *lbl("pod", "a"), PolicyTypes: egressOnly,
					Egress: append(to(nil, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{ipOf(e, "y/c") + "/32"}}}), dnsEgress)})
			})},
			{"and a second policy allowing y/c itself", create(func(e *env) *networkingv1.NetworkPolicy {
				return np(x, "except-overlap", networkingv1.NetworkPolicySpec{PodSelector: *lbl("pod", "a"), PolicyTypes: egressOnly,
					Egress: to(nil, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: ipOf(e, "y/c") + "/32"}})})
			})},
		}},
		{"ingress-from-cidr", one("x/a from x/b's and z/c's addresses", create(func(e *env) *networkingv1.NetworkPolicy {
			return np(x, "ingress-cidr", networkingv1.NetworkPolicySpec{PodSelector: *lbl("pod", "a"),
				Ingress: from(nil,
					networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: ipOf(e, "x/b") + "/32"}},
					networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: ipOf(e, "z/c") + "/32"}})})
		}))},
		{"ingress-egress-independent", []step{
			{"x/a may send to nothing but DNS", create(fixed(np(x, "a-no-egress", networkingv1.NetworkPolicySpec{
				PodSelector: *lbl("pod", "a"), PolicyTypes: egressOnly, Egress: []networkingv1.NetworkPolicyEgressRule{dnsEgress}})))},
			{"x/b may receive from nothing", create(fixed(np(x, "b-no-ingress", networkingv1.NetworkPolicySpec{
				PodSelector: *lbl("pod", "b"), PolicyTypes: ingressOnly})))},
		}},
		{"policies-in-every-namespace", one("each namespace allows only itself, z on UDP only", create(
			fixed(np("x", "self", networkingv1.NetworkPolicySpec{Ingress: from(nil, networkingv1.NetworkPolicyPeer{PodSelector: all()})})),
			fixed(np("y", "self", networkingv1.NetworkPolicySpec{Ingress: from(nil, networkingv1.NetworkPolicyPeer{PodSelector: all()})})),
			fixed(np("z", "udp", networkingv1.NetworkPolicySpec{Ingress: from(ports(networkingv1.NetworkPolicyPort{Protocol: protoP(corev1.ProtocolUDP)}))})),
		))},
	}
}

// TestConformance runs every case on one cluster and one matrix.
func TestConformance(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	start := time.Now()
	for _, tc := range conformanceCases() {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			e.reset(ctx)
			for _, s := range tc.steps {
				s.do(ctx, e)
				e.check(ctx, s.name)
			}
		})
	}
	t.Run("service-traffic-judged-after-dnat", func(t *testing.T) {
		e.t = t
		e.reset(ctx)
		svc, err := e.client.CoreV1().Services("x").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "svc-a"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"pod": "a"}, Ports: []corev1.ServicePort{
				{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 90, TargetPort: intstr.FromInt32(80)},
				{Name: "udp", Protocol: corev1.ProtocolUDP, Port: 90, TargetPort: intstr.FromInt32(81)},
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer e.client.CoreV1().Services("x").Delete(ctx, "svc-a", metav1.DeleteOptions{})
		tcp80, udp81 := probeKind{corev1.ProtocolTCP, 80}, probeKind{corev1.ProtocolUDP, 81}
		e.checkService(ctx, "no policy", svc.Spec.ClusterIP, 90, "x/a", tcp80)
		e.apply(ctx, np("x", "a-from-b-80", networkingv1.NetworkPolicySpec{PodSelector: *lbl("pod", "a"),
			Ingress: from(ports(tcp(num(80)), udp(num(81))), networkingv1.NetworkPolicyPeer{PodSelector: lbl("pod", "b"), NamespaceSelector: all()})}))
		e.checkService(ctx, "x/a from pods b on the target ports", svc.Spec.ClusterIP, 90, "x/a", tcp80)
		e.checkService(ctx, "x/a from pods b on the target ports, UDP", svc.Spec.ClusterIP, 90, "x/a", udp81)
		e.apply(ctx, np("y", "b-egress-to-a-80", networkingv1.NetworkPolicySpec{PodSelector: *lbl("pod", "b"), PolicyTypes: egressOnly,
			Egress: append(to(ports(tcp(num(80))), networkingv1.NetworkPolicyPeer{PodSelector: lbl("pod", "a"), NamespaceSelector: lbl("ns", "x")}), dnsEgress)}))
		e.checkService(ctx, "and y/b may send only to pods a on TCP 80", svc.Spec.ClusterIP, 90, "x/a", tcp80)
		e.checkService(ctx, "and y/b may send only to pods a on TCP 80, UDP", svc.Spec.ClusterIP, 90, "x/a", udp81)
		// A policy written for the Service's port does not match.
		e.reset(ctx)
		e.apply(ctx, np("x", "a-on-service-port", networkingv1.NetworkPolicySpec{PodSelector: *lbl("pod", "a"),
			Ingress: from(ports(tcp(num(90))))}))
		e.checkService(ctx, "x/a allows only TCP 90, the Service's port", svc.Spec.ClusterIP, 90, "x/a", tcp80)
	})
	t.Run("hostnetwork-pods-unaffected", func(t *testing.T) {
		e.t = t
		e.reset(ctx)
		node := e.pods["x/a"].Spec.NodeName
		host := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "host", Namespace: "x", Labels: map[string]string{"pod": "host"}},
			Spec: corev1.PodSpec{NodeName: node, HostNetwork: true, TerminationGracePeriodSeconds: new(int64), Containers: []corev1.Container{{
				Name: "serve", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
				Args: []string{"serve-hostname", "--tcp", "--http=false", "--port=8090"},
			}}},
		}
		if _, err := e.client.CoreV1().Pods("x").Create(ctx, host, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer e.client.CoreV1().Pods("x").Delete(ctx, "host", metav1.DeleteOptions{})
		// Both directions denied for every pod of x, the hostNetwork pod
		// included: it talks from and on its node's address, which
		// NetworkPolicy never isolates.
		e.apply(ctx, np("x", "deny-all", networkingv1.NetworkPolicySpec{PolicyTypes: bothTypes}))
		var nodeIP string
		for _, n := range e.nodes {
			if n.Name == node {
				nodeIP = n.IP
			}
		}
		served := probeKind{corev1.ProtocolTCP, 8090}
		deadline := time.Now().Add(time.Minute)
		for !probe(e.netns["y/b"], served, nodeIP) {
			if time.Now().After(deadline) {
				t.Fatalf("y/b cannot reach the hostNetwork pod x/host on %s:8090 under a deny-all policy", nodeIP)
			}
			time.Sleep(500 * time.Millisecond)
		}
		if !probe(e.nodeNetns[node], probes[0], ipOf(e, "y/b")) {
			t.Errorf("the hostNetwork pod x/host (in node %s's network namespace) cannot reach y/b under a deny-all policy", node)
		}
		// The same policy does isolate x/a, on the same node.
		e.check(ctx, "deny all in x, with a hostNetwork pod among them")
	})
	e.t = t
	e.reset(ctx)
	t.Logf("%d cases in %s", len(conformanceCases()), time.Since(start).Round(time.Second))
}
