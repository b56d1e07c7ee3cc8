package netpol

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// The e2e matrix's objects: pods a, b, c in namespaces x, y, z; a and b of
// each namespace on node n1, c on n2.
func matrixPods() []*corev1.Pod {
	var pods []*corev1.Pod
	ip := 2
	for _, ns := range []string{"x", "y", "z"} {
		for _, name := range []string{"a", "b", "c"} {
			node := "n1"
			if name == "c" {
				node = "n2"
			}
			pods = append(pods, pod(ns, name, node, fmt.Sprintf("10.244.%d.%d", map[string]int{"n1": 1, "n2": 2}[node], ip), map[string]string{"pod": name}))
			ip++
		}
	}
	return pods
}

func pod(ns, name, node, ip string, lbl map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbl},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{
			{Name: "serve-80-tcp", ContainerPort: 80, Protocol: corev1.ProtocolTCP},
			{Name: "serve-81-udp", ContainerPort: 81, Protocol: corev1.ProtocolUDP},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
}

func namespaces(names ...string) []*corev1.Namespace {
	var out []*corev1.Namespace
	for _, n := range names {
		out = append(out, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kubernetes.io/metadata.name": n, "ns": n}}})
	}
	return out
}

func policy(ns, name string, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}, Spec: spec}
}

func sel(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func proto(p corev1.Protocol) *corev1.Protocol { return &p }
func port(n int) *intstr.IntOrString           { v := intstr.FromInt32(int32(n)); return &v }
func named(n string) *intstr.IntOrString       { v := intstr.FromString(n); return &v }
func i32(n int32) *int32                       { return &n }

var (
	tIngress = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	tEgress  = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	tBoth    = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
)

// compileCases are the golden cases; the kernel test loads each of them.
func compileCases() []struct {
	name     string
	pods     []*corev1.Pod
	policies []*networkingv1.NetworkPolicy
} {
	hostNet := pod("x", "host", "n1", "172.18.0.2", map[string]string{"pod": "a"})
	hostNet.Spec.HostNetwork = true
	pending := pod("x", "pending", "n1", "", map[string]string{"pod": "a"})
	pending.Status = corev1.PodStatus{Phase: corev1.PodPending}
	done := pod("x", "done", "n1", "10.244.1.99", map[string]string{"pod": "a"})
	done.Status.Phase = corev1.PodSucceeded
	return []struct {
		name     string
		pods     []*corev1.Pod
		policies []*networkingv1.NetworkPolicy
	}{
		{name: "no-policies", pods: matrixPods()},
		{name: "deny-all-ingress", pods: append(matrixPods(), hostNet, pending, done), policies: []*networkingv1.NetworkPolicy{
			policy("x", "deny-all", networkingv1.NetworkPolicySpec{PolicyTypes: tIngress}),
		}},
		{name: "and-vs-or", pods: matrixPods(), policies: []*networkingv1.NetworkPolicy{
			policy("x", "allow-and", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "a"), Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("ns", "y"), PodSelector: sel("pod", "b")}},
			}}}),
			policy("x", "allow-or", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "b"), Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("ns", "y")}, {PodSelector: sel("pod", "b")}},
			}}}),
		}},
		{name: "egress-ports-ipblock", pods: matrixPods(), policies: []*networkingv1.NetworkPolicy{
			policy("x", "egress", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "a"), PolicyTypes: tBoth,
				Egress: []networkingv1.NetworkPolicyEgressRule{
					{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: sel("pod", "c")}},
						Ports: []networkingv1.NetworkPolicyPort{{Port: named("serve-80-tcp")}, {Protocol: proto(corev1.ProtocolUDP), Port: named("serve-81-udp")}}},
					{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.244.0.0/16", Except: []string{"10.244.2.0/24"}}}, {IPBlock: &networkingv1.IPBlock{CIDR: "fd00::/64"}}},
						Ports: []networkingv1.NetworkPolicyPort{{Port: port(80), EndPort: i32(81)}, {Protocol: proto(corev1.ProtocolSCTP), Port: port(80)}, {Protocol: proto(corev1.ProtocolUDP)}}},
				},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: named("serve-80-tcp")}}}},
			}),
		}},
		{name: "bad-policy-left-out", pods: matrixPods(), policies: []*networkingv1.NetworkPolicy{
			policy("x", "bad-cidr", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.300/8"}}},
			}}}),
			policy("x", "bad-protocol", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: proto("ICMP")}},
			}}}),
			policy("x", "bad-except", networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{
				To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"10.1.0.0/24"}}}},
			}}}),
			policy("y", "good", networkingv1.NetworkPolicySpec{PolicyTypes: tIngress, Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pod", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "c"}}}}}},
			}}}),
		}},
	}
}

func TestCompileGolden(t *testing.T) {
	for _, tc := range compileCases() {
		t.Run(tc.name, func(t *testing.T) {
			r, problems := Compile(Input{Node: "n1", Pods: tc.pods, Namespaces: namespaces("x", "y", "z"), Policies: tc.policies})
			var b strings.Builder
			b.WriteString(RenderTable(r))
			for _, p := range problems {
				fmt.Fprintf(&b, "# not enforced: %s/%s: %s\n", p.Policy.Namespace, p.Policy.Name, p.Reason)
			}
			golden(t, filepath.Join("testdata", tc.name+".nft"), b.String())
		})
	}
}

// Label, namespace and policy changes turn into element updates and chain
// refills, not a new table.
func TestDiffGolden(t *testing.T) {
	base := func() Input {
		return Input{Node: "n1", Pods: matrixPods(), Namespaces: namespaces("x", "y", "z"), Policies: []*networkingv1.NetworkPolicy{
			policy("x", "allow-b", networkingv1.NetworkPolicySpec{PodSelector: *sel("pod", "a"), Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("ns", "y"), PodSelector: sel("pod", "b")}},
			}}}),
		}}
	}
	cases := []struct {
		name   string
		change func(*Input)
	}{
		{"unchanged", func(*Input) {}},
		{"peer-relabelled", func(in *Input) { in.Pods[5].Labels = map[string]string{"pod": "b"} }}, // y/c
		{"namespace-relabelled", func(in *Input) { in.Namespaces[2].Labels["ns"] = "y" }},
		{"target-relabelled", func(in *Input) { in.Pods[1].Labels = map[string]string{"pod": "a"} }}, // x/b
		{"policy-edited", func(in *Input) {
			in.Policies[0].Spec.Ingress[0].Ports = []networkingv1.NetworkPolicyPort{{Port: port(80)}}
		}},
		{"peer-selector-edited", func(in *Input) {
			in.Policies[0].Spec.Ingress[0].From[0].PodSelector = sel("pod", "c")
		}},
		{"policy-deleted", func(in *Input) { in.Policies = nil }},
		{"pod-deleted", func(in *Input) { in.Pods = append(in.Pods[:0:0], in.Pods[1:]...) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old, _ := Compile(base())
			in := base()
			tc.change(&in)
			new, _ := Compile(in)
			golden(t, filepath.Join("testdata", "diff-"+tc.name+".nft"), Diff(old, new))
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the output (go test -update rewrites it); got:\n%s", path, got)
	}
}
