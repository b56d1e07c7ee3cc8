package faults

import (
	"context"
	"errors"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/scenario"
)

// networkPolicyAndOr makes the one-dash mistake of a NetworkPolicy peer
// list, in whichever direction the policy allows: a peer with both a
// namespaceSelector and a podSelector (AND: those pods in those
// namespaces) becomes two peers (OR: all pods of those namespaces, and
// those pods of the policy's own namespace); two neighbouring peers, one
// with only a namespaceSelector and one with only a podSelector, become one
// (AND). Ingress rules are looked at first, then egress rules.
type networkPolicyAndOr struct{ scenario.FaultSpec }

func (f networkPolicyAndOr) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	ns, name := namespace(p), p.String("policy", "")
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		np, err := cs.NetworkingV1().NetworkPolicies(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return getErr("NetworkPolicy", ns, name, err)
		}
		if err := toggleAndOr(np); err != nil {
			return fmt.Errorf("NetworkPolicy %s/%s: %w", ns, name, err)
		}
		if _, err := cs.NetworkingV1().NetworkPolicies(ns).Update(ctx, np, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("updating NetworkPolicy %s/%s: %w", ns, name, err)
		}
		return nil
	})
}

var errNoAndOr = errors.New("no rule has a peer with both a namespaceSelector and a podSelector (AND), nor two neighbouring peers with one each (OR), so there is nothing to turn around")

// toggleAndOr changes the first peer list of np that can be changed.
func toggleAndOr(np *networkingv1.NetworkPolicy) error {
	for i := range np.Spec.Ingress {
		if peers, ok := toggledPeers(np.Spec.Ingress[i].From); ok {
			np.Spec.Ingress[i].From = peers
			return nil
		}
	}
	for i := range np.Spec.Egress {
		if peers, ok := toggledPeers(np.Spec.Egress[i].To); ok {
			np.Spec.Egress[i].To = peers
			return nil
		}
	}
	return errNoAndOr
}

// toggledPeers splits the first AND peer in two, or else joins the first
// pair of neighbouring OR peers into one.
func toggledPeers(peers []networkingv1.NetworkPolicyPeer) ([]networkingv1.NetworkPolicyPeer, bool) {
	for j, p := range peers {
		if p.IPBlock == nil && p.NamespaceSelector != nil && p.PodSelector != nil {
			out := append([]networkingv1.NetworkPolicyPeer{}, peers[:j]...)
			out = append(out, networkingv1.NetworkPolicyPeer{NamespaceSelector: p.NamespaceSelector}, networkingv1.NetworkPolicyPeer{PodSelector: p.PodSelector})
			return append(out, peers[j+1:]...), true
		}
	}
	only := func(p networkingv1.NetworkPolicyPeer) (ns, pod bool) {
		if p.IPBlock != nil {
			return false, false
		}
		return p.NamespaceSelector != nil && p.PodSelector == nil, p.PodSelector != nil && p.NamespaceSelector == nil
	}
	for j := 0; j+1 < len(peers); j++ {
		ns1, pod1 := only(peers[j])
		ns2, pod2 := only(peers[j+1])
		if (ns1 && pod2) || (pod1 && ns2) {
			merged := networkingv1.NetworkPolicyPeer{NamespaceSelector: peers[j].NamespaceSelector, PodSelector: peers[j].PodSelector}
			if ns2 {
				merged.NamespaceSelector = peers[j+1].NamespaceSelector
			} else {
				merged.PodSelector = peers[j+1].PodSelector
			}
			out := append([]networkingv1.NetworkPolicyPeer{}, peers[:j]...)
			out = append(out, merged)
			return append(out, peers[j+2:]...), true
		}
	}
	return nil, false
}
