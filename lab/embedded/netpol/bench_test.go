package netpol

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// BenchmarkCompileAndDiff is the agent's work per change in a large lab:
// 1000 Pods in 20 namespaces on 10 nodes, 100 policies, one Pod
// relabelled.
func BenchmarkCompileAndDiff(b *testing.B) {
	var nsNames []string
	for i := range 20 {
		nsNames = append(nsNames, fmt.Sprintf("ns%d", i))
	}
	var pods []*corev1.Pod
	for i := range 1000 {
		pods = append(pods, pod(nsNames[i%20], fmt.Sprintf("p%d", i), fmt.Sprintf("n%d", i%10),
			fmt.Sprintf("10.244.%d.%d", i/250, i%250+2), map[string]string{"app": fmt.Sprintf("app%d", i%7), "tier": fmt.Sprintf("t%d", i%3)}))
	}
	var nps []*networkingv1.NetworkPolicy
	for i := range 100 {
		nps = append(nps, policy(nsNames[i%20], fmt.Sprintf("np%d", i), networkingv1.NetworkPolicySpec{
			PodSelector: *sel("app", fmt.Sprintf("app%d", i%7)), PolicyTypes: tBoth,
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: sel("tier", "t1"), NamespaceSelector: sel("ns", nsNames[(i+1)%20])}, {PodSelector: sel("app", "app3")}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: port(80)}, {Port: named("serve-80-tcp")}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("ns", nsNames[(i+2)%20])}}}},
		}))
	}
	in := Input{Node: "n0", Pods: pods, Namespaces: namespaces(nsNames...), Policies: nps}
	prev, _ := Compile(in)
	flip := false
	for b.Loop() {
		flip = !flip
		if !flip {
			pods[10].Labels = map[string]string{"app": "app3", "tier": "t1"}
		} else {
			pods[10].Labels = map[string]string{"app": "app1", "tier": "t2"}
		}
		next, _ := Compile(in)
		if Diff(prev, next) == "" {
			b.Fatal("a relabelled pod changed nothing")
		}
		prev = next
	}
}
