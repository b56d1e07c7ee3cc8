package netpol_test

import (
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// This file is the conformance suite's oracle: NetworkPolicy's semantics
// read straight from the API documentation, one connection at a time,
// with no nftables in sight. It shares no code with the compiler.

// world is the cluster state the oracle judges a connection in.
type world struct {
	pods     []*corev1.Pod
	nsLabels map[string]map[string]string
	policies []*networkingv1.NetworkPolicy
}

// allowed says whether a new connection from src to dst's port/proto is
// allowed: the source's egress and the destination's ingress must both
// allow it. A pod talking to its own address never leaves its network
// namespace (loopback), so no policy applies.
func (w world) allowed(src, dst *corev1.Pod, proto corev1.Protocol, port int32) bool {
	if src.Namespace == dst.Namespace && src.Name == dst.Name {
		return true
	}
	return w.side(src, dst, dst, proto, port, networkingv1.PolicyTypeEgress) &&
		w.side(dst, src, dst, proto, port, networkingv1.PolicyTypeIngress)
}

// side judges one direction for pod self talking to peer; server is the pod
// whose ports the connection targets (for named ports).
func (w world) side(self, peer, server *corev1.Pod, proto corev1.Protocol, port int32, t networkingv1.PolicyType) bool {
	isolated := false
	for _, np := range w.policies {
		if np.Namespace != self.Namespace || !affects(np, t) || !selectorMatches(&np.Spec.PodSelector, self.Labels) {
			continue
		}
		isolated = true
		if t == networkingv1.PolicyTypeIngress {
			for _, r := range np.Spec.Ingress {
				if w.ruleAllows(np.Namespace, r.From, r.Ports, peer, server, proto, port) {
					return true
				}
			}
		} else {
			for _, r := range np.Spec.Egress {
				if w.ruleAllows(np.Namespace, r.To, r.Ports, peer, server, proto, port) {
					return true
				}
			}
		}
	}
	return !isolated
}

func affects(np *networkingv1.NetworkPolicy, t networkingv1.PolicyType) bool {
	if len(np.Spec.PolicyTypes) == 0 {
		return t == networkingv1.PolicyTypeIngress || len(np.Spec.Egress) > 0
	}
	for _, pt := range np.Spec.PolicyTypes {
		if pt == t {
			return true
		}
	}
	return false
}

func (w world) ruleAllows(policyNS string, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, peer, server *corev1.Pod, proto corev1.Protocol, port int32) bool {
	peerOK := len(peers) == 0
	for _, p := range peers {
		if w.peerMatches(policyNS, p, peer) {
			peerOK = true
		}
	}
	if !peerOK {
		return false
	}
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		pp := corev1.ProtocolTCP
		if p.Protocol != nil {
			pp = *p.Protocol
		}
		if pp != proto {
			continue
		}
		switch {
		case p.Port == nil:
			return true
		case p.Port.Type == intstr.String:
			for _, c := range server.Spec.Containers {
				for _, cp := range c.Ports {
					cpProto := cp.Protocol
					if cpProto == "" {
						cpProto = corev1.ProtocolTCP
					}
					if cp.Name == p.Port.StrVal && cpProto == proto && cp.ContainerPort == port {
						return true
					}
				}
			}
		default:
			end := p.Port.IntVal
			if p.EndPort != nil {
				end = *p.EndPort
			}
			if port >= p.Port.IntVal && port <= end {
				return true
			}
		}
	}
	return false
}

func (w world) peerMatches(policyNS string, p networkingv1.NetworkPolicyPeer, peer *corev1.Pod) bool {
	if p.IPBlock != nil {
		ip := netip.MustParseAddr(peer.Status.PodIP)
		if !netip.MustParsePrefix(p.IPBlock.CIDR).Contains(ip) {
			return false
		}
		for _, e := range p.IPBlock.Except {
			if netip.MustParsePrefix(e).Contains(ip) {
				return false
			}
		}
		return true
	}
	if p.NamespaceSelector == nil {
		if peer.Namespace != policyNS {
			return false
		}
	} else if !selectorMatches(p.NamespaceSelector, w.nsLabels[peer.Namespace]) {
		return false
	}
	return p.PodSelector == nil || selectorMatches(p.PodSelector, peer.Labels)
}

func selectorMatches(s *metav1.LabelSelector, l map[string]string) bool {
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		panic(err)
	}
	return sel.Matches(labels.Set(l))
}

// matrix is a reachability matrix: allowed[from][to] for one protocol and
// port, pods named ns/name.
type matrix map[string]map[string]bool

// String prints the matrix as upstream's e2e does: X for blocked, . for
// allowed.
func (m matrix) String(names []string) string {
	var b strings.Builder
	b.WriteString("      ")
	for _, to := range names {
		b.WriteString(" " + to)
	}
	b.WriteString("\n")
	for _, from := range names {
		b.WriteString(from + "  ")
		for _, to := range names {
			c := "."
			if !m[from][to] {
				c = "X"
			}
			b.WriteString("   " + c)
		}
		b.WriteString("\n")
	}
	return b.String()
}
