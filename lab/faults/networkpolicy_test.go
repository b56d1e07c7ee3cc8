package faults

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/lab/scenario"
)

func TestNetworkPolicyAndOr(t *testing.T) {
	sel := func(k, v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
	and := networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("team", "frontend"), PodSelector: sel("app", "api")}
	nsOnly := networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("team", "frontend")}
	podOnly := networkingv1.NetworkPolicyPeer{PodSelector: sel("app", "api")}
	block := networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}}
	for _, tc := range []struct {
		name           string
		ingress        []networkingv1.NetworkPolicyPeer
		egress         []networkingv1.NetworkPolicyPeer
		wantIn, wantEg []networkingv1.NetworkPolicyPeer
		wantErr        string
	}{
		{name: "AND becomes OR", ingress: []networkingv1.NetworkPolicyPeer{block, and}, wantIn: []networkingv1.NetworkPolicyPeer{block, nsOnly, podOnly}},
		{name: "OR becomes AND", ingress: []networkingv1.NetworkPolicyPeer{nsOnly, podOnly}, wantIn: []networkingv1.NetworkPolicyPeer{and}},
		{name: "OR in the other order becomes AND", ingress: []networkingv1.NetworkPolicyPeer{podOnly, nsOnly, block}, wantIn: []networkingv1.NetworkPolicyPeer{and, block}},
		{name: "egress when ingress has nothing to turn", ingress: []networkingv1.NetworkPolicyPeer{podOnly}, egress: []networkingv1.NetworkPolicyPeer{and},
			wantIn: []networkingv1.NetworkPolicyPeer{podOnly}, wantEg: []networkingv1.NetworkPolicyPeer{nsOnly, podOnly}},
		{name: "nothing to turn", ingress: []networkingv1.NetworkPolicyPeer{podOnly, block}, wantErr: "nothing to turn around"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "db-access", Namespace: "data"},
				Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: tc.ingress}}}}
			if tc.egress != nil {
				np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: tc.egress}}
			}
			f := newFake(nil, np)
			fault, err := Lookup(Registry(), "networkpolicy-and-or")
			if err != nil {
				t.Fatal(err)
			}
			p := scenario.Params{"policy": "db-access", "namespace": "data"}
			if err := fault.Validate(p); err != nil {
				t.Fatal(err)
			}
			err = fault.Inject(context.Background(), f, p)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.Clientset().NetworkingV1().NetworkPolicies("data").Get(context.Background(), "db-access", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if js(got.Spec.Ingress[0].From) != js(tc.wantIn) {
				t.Errorf("ingress from = %s, want %s", js(got.Spec.Ingress[0].From), js(tc.wantIn))
			}
			if tc.wantEg != nil && js(got.Spec.Egress[0].To) != js(tc.wantEg) {
				t.Errorf("egress to = %s, want %s", js(got.Spec.Egress[0].To), js(tc.wantEg))
			}
		})
	}
	t.Run("missing policy", func(t *testing.T) {
		fault, _ := Lookup(Registry(), "networkpolicy-and-or")
		err := fault.Inject(context.Background(), newFake(nil), scenario.Params{"policy": "nope", "namespace": "data"})
		if err == nil || !strings.Contains(err.Error(), "there is no NetworkPolicy data/nope") {
			t.Fatalf("err = %v", err)
		}
	})
}

func js(v any) string { b, _ := json.Marshal(v); return string(b) }
