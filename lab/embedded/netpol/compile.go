package netpol

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Input is what the compiler needs for one node: every Pod, Namespace and
// NetworkPolicy of the cluster.
type Input struct {
	Node       string
	Pods       []*corev1.Pod
	Namespaces []*corev1.Namespace
	Policies   []*networkingv1.NetworkPolicy
}

// Problem is a policy the compiler left out, and why (for learners).
type Problem struct {
	Policy *networkingv1.NetworkPolicy
	Reason string
}

// direction is ingress or egress.
type direction struct {
	name     string // "ingress" or "egress"
	peer     string // the peer's side of the packet: "saddr" or "daddr"
	peerWord string // "from" or "to"
}

var (
	ingress = direction{"ingress", "saddr", "from"}
	egress  = direction{"egress", "daddr", "to"}
)

// peerSet is a named set of pod IPs that a peer selects.
type peerSet struct {
	name    string
	comment string
	ns      string // the policy's namespace
	pods    labels.Selector
	// nss selects namespaces; nil means the policy's namespace only.
	nss labels.Selector
}

// compiled is one policy turned into chain rules.
type compiled struct {
	np       *networkingv1.NetworkPolicy
	key      string // namespace/name
	selector labels.Selector
	types    map[string]bool // "ingress", "egress"
	rules    map[string][]string
	sets     []peerSet
	ports    []namedPort
}

// namedPort is a set of address . port of the pods with a container port of
// that name and protocol.
type namedPort struct{ proto, name string }

func (n namedPort) setName() string { return "named-port-" + n.proto + "-" + n.name }

// Compile turns the cluster's objects into the ruleset of in.Node. Policies
// that cannot be enforced are left out whole and returned as problems.
func Compile(in Input) (*Ruleset, []Problem) {
	nsLabels := map[string]labels.Set{}
	for _, ns := range in.Namespaces {
		nsLabels[ns.Name] = labels.Set(ns.Labels)
	}
	var pods []podInfo
	for _, p := range in.Pods {
		if pi, ok := usable(p); ok {
			pods = append(pods, pi)
		}
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].key < pods[j].key })

	policies := slices.Clone(in.Policies)
	sort.Slice(policies, func(i, j int) bool {
		return policies[i].Namespace+"/"+policies[i].Name < policies[j].Namespace+"/"+policies[j].Name
	})
	var problems []Problem
	var comps []*compiled
	for _, np := range policies {
		c, err := compilePolicy(np)
		if err != nil {
			problems = append(problems, Problem{Policy: np, Reason: err.Error()})
			continue
		}
		comps = append(comps, c)
	}

	r := &Ruleset{Node: in.Node}
	usedPolicy := map[string]bool{} // "ingress:ns/name"
	var podChains []Chain
	maps := map[string]*Set{
		"ingress": {Name: "ingress-pods", Type: "ipv4_addr : verdict", Comment: "this node's Pods isolated for ingress, to their chains"},
		"egress":  {Name: "egress-pods", Type: "ipv4_addr : verdict", Comment: "this node's Pods isolated for egress, to their chains"},
	}
	for _, p := range pods {
		if p.pod.Spec.NodeName != in.Node {
			continue
		}
		for _, d := range []direction{egress, ingress} {
			var by []*compiled
			for _, c := range comps {
				if c.types[d.name] && c.np.Namespace == p.pod.Namespace && c.selector.Matches(labels.Set(p.pod.Labels)) {
					by = append(by, c)
				}
			}
			if len(by) == 0 {
				continue
			}
			ch := Chain{Name: chainName(d.name+"-pod-", p.key)}
			for _, c := range by {
				usedPolicy[d.name+":"+c.key] = true
				ch.Rules = append(ch.Rules, "jump "+chainName(d.name+"-policy-", c.key))
			}
			// A chain's comment cannot change in place: it names only
			// what the chain is for; its rules say which policies apply.
			ch.Comment = fmt.Sprintf("Pod %s (%s), %s: the NetworkPolicies that select it", p.key, p.ips[0], d.name)
			ch.Rules = append(ch.Rules, fmt.Sprintf("counter drop comment %s", quote("no NetworkPolicy allows this "+d.name+" of "+p.key)))
			podChains = append(podChains, ch)
			for _, ip := range p.ips {
				maps[d.name].Elements = append(maps[d.name].Elements, ip+" : goto "+ch.Name)
			}
		}
	}

	// Policy chains and the sets they use, for the policies that select a
	// Pod of this node.
	wantSets := map[string]peerSet{}
	wantPorts := map[namedPort]bool{}
	for _, c := range comps {
		for _, d := range []direction{egress, ingress} {
			if !usedPolicy[d.name+":"+c.key] {
				continue
			}
			ch := Chain{Name: chainName(d.name+"-policy-", c.key), Rules: c.rules[d.name]}
			ch.Comment = fmt.Sprintf("NetworkPolicy %s: what its %s rules allow (no rule: nothing)", c.key, d.name)
			r.Chains = append(r.Chains, ch)
			prefix := d.name + "-" + d.peerWord + "-"
			for _, s := range c.sets {
				if strings.HasPrefix(s.name, prefix) {
					wantSets[s.name] = s
				}
			}
			for _, np := range c.ports {
				wantPorts[np] = true
			}
		}
	}
	r.Chains = append(r.Chains, podChains...)

	for _, s := range wantSets {
		set := Set{Name: s.name, Type: "ipv4_addr", Comment: s.comment}
		for _, p := range pods {
			if s.matches(p, nsLabels) {
				set.Elements = append(set.Elements, p.ips...)
			}
		}
		r.Sets = append(r.Sets, set)
	}
	for np := range wantPorts {
		set := Set{Name: np.setName(), Type: "ipv4_addr . inet_service", Comment: fmt.Sprintf("Pods' container ports named %s (%s)", np.name, strings.ToUpper(np.proto))}
		for _, p := range pods {
			for _, port := range p.ports[np] {
				for _, ip := range p.ips {
					set.Elements = append(set.Elements, ip+" . "+strconv.Itoa(int(port)))
				}
			}
		}
		r.Sets = append(r.Sets, set)
	}
	for _, m := range maps {
		r.Sets = append(r.Sets, *m)
	}
	for i := range r.Sets {
		r.Sets[i].Elements = sortedUnique(r.Sets[i].Elements)
	}
	sort.Slice(r.Sets, func(i, j int) bool { return r.Sets[i].Name < r.Sets[j].Name })

	r.Base = []Chain{
		{Name: "egress", Comment: "NetworkPolicy egress of this node's Pods, after kube-proxy's DNAT",
			Hook: "type filter hook forward priority filter; policy accept;",
			Rules: []string{
				"ct state established,related accept comment \"replies of allowed connections\"",
				"ip saddr vmap @egress-pods",
			}},
		{Name: "ingress", Comment: "NetworkPolicy ingress of this node's Pods, after kube-proxy's DNAT",
			Hook: "type filter hook forward priority filter + 1; policy accept;",
			Rules: []string{
				"ct state established,related accept comment \"replies of allowed connections\"",
				"ip daddr vmap @ingress-pods",
			}},
	}
	return r, problems
}

// podInfo is a pod with an address on the pod network.
type podInfo struct {
	pod   *corev1.Pod
	key   string
	ips   []string
	ports map[namedPort][]int32
}

// usable says whether p takes part in NetworkPolicy: it has IPv4
// addresses on the pod network and is not finished. hostNetwork pods have
// the node's address and are never selected.
func usable(p *corev1.Pod) (podInfo, bool) {
	if p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return podInfo{}, false
	}
	pi := podInfo{pod: p, key: p.Namespace + "/" + p.Name, ports: map[namedPort][]int32{}}
	ips := p.Status.PodIPs
	if len(ips) == 0 && p.Status.PodIP != "" {
		ips = []corev1.PodIP{{IP: p.Status.PodIP}}
	}
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip.IP); err == nil && a.Is4() {
			pi.ips = append(pi.ips, a.String())
		}
	}
	if len(pi.ips) == 0 {
		return podInfo{}, false
	}
	for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
		for _, port := range c.Ports {
			if port.Name == "" {
				continue
			}
			proto := strings.ToLower(string(port.Protocol))
			if proto == "" {
				proto = "tcp"
			}
			k := namedPort{proto, port.Name}
			pi.ports[k] = append(pi.ports[k], port.ContainerPort)
		}
	}
	return pi, true
}

func (s peerSet) matches(p podInfo, nsLabels map[string]labels.Set) bool {
	if s.nss == nil {
		if p.pod.Namespace != s.ns {
			return false
		}
	} else {
		l, ok := nsLabels[p.pod.Namespace]
		if !ok || !s.nss.Matches(l) {
			return false
		}
	}
	return s.pods.Matches(labels.Set(p.pod.Labels))
}

// compilePolicy turns np into rules, or says why it cannot be enforced.
func compilePolicy(np *networkingv1.NetworkPolicy) (*compiled, error) {
	c := &compiled{np: np, key: np.Namespace + "/" + np.Name, types: map[string]bool{}, rules: map[string][]string{}}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		return nil, fmt.Errorf("spec.podSelector: %w", err)
	}
	c.selector = sel
	if len(np.Spec.PolicyTypes) == 0 {
		c.types["ingress"] = true
		if len(np.Spec.Egress) > 0 {
			c.types["egress"] = true
		}
	}
	for i, t := range np.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			c.types["ingress"] = true
		case networkingv1.PolicyTypeEgress:
			c.types["egress"] = true
		default:
			return nil, fmt.Errorf("spec.policyTypes[%d]: %q is neither Ingress nor Egress", i, t)
		}
	}
	var errs []error
	for i, rule := range np.Spec.Ingress {
		rs, err := c.compileRule(ingress, i, rule.From, rule.Ports)
		errs = append(errs, err)
		c.rules["ingress"] = append(c.rules["ingress"], rs...)
	}
	for i, rule := range np.Spec.Egress {
		rs, err := c.compileRule(egress, i, rule.To, rule.Ports)
		errs = append(errs, err)
		c.rules["egress"] = append(c.rules["egress"], rs...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// peerMatch is one peer as nft expressions; v6 peers match IPv6 only.
type peerMatch struct {
	expr string
	v6   bool
	desc string
}

// compileRule compiles rule i of direction d: one nft rule per peer and
// port (a missing list matches everything).
func (c *compiled) compileRule(d direction, i int, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) ([]string, error) {
	field := fmt.Sprintf("spec.%s[%d]", d.name, i)
	var matches []peerMatch
	for j, peer := range peers {
		pf := fmt.Sprintf("%s.%s[%d]", field, d.peerWord, j)
		m, err := c.compilePeer(d, i, j, pf, peer)
		if err != nil {
			return nil, err
		}
		matches = append(matches, m)
	}
	if len(peers) == 0 {
		matches = []peerMatch{{desc: "any " + map[string]string{"ingress": "source", "egress": "destination"}[d.name]}}
	}
	type portMatch struct{ expr, desc string }
	var pms []portMatch
	for j, p := range ports {
		pf := fmt.Sprintf("%s.ports[%d]", field, j)
		proto := "tcp"
		if p.Protocol != nil {
			switch *p.Protocol {
			case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
				proto = strings.ToLower(string(*p.Protocol))
			default:
				return nil, fmt.Errorf("%s.protocol: %q is not TCP, UDP or SCTP", pf, *p.Protocol)
			}
		}
		switch {
		case p.Port == nil:
			if p.EndPort != nil {
				return nil, fmt.Errorf("%s: endPort needs a port", pf)
			}
			pms = append(pms, portMatch{"meta l4proto " + proto, "any " + strings.ToUpper(proto) + " port"})
		case p.Port.Type == intstr.String:
			name := p.Port.StrVal
			if p.EndPort != nil {
				return nil, fmt.Errorf("%s: endPort cannot go with the named port %q", pf, name)
			}
			if !validPortName(name) {
				return nil, fmt.Errorf("%s.port: %q is not a port number nor a valid port name", pf, name)
			}
			np := namedPort{proto, name}
			if !slices.Contains(c.ports, np) {
				c.ports = append(c.ports, np)
			}
			// The named port is the destination Pod's: the selected Pod
			// for ingress, the peer for egress.
			pms = append(pms, portMatch{fmt.Sprintf("ip daddr . %s dport @%s", proto, np.setName()), strings.ToUpper(proto) + " port " + name})
		default:
			port := p.Port.IntVal
			if port < 1 || port > 65535 {
				return nil, fmt.Errorf("%s.port: %d is not between 1 and 65535", pf, port)
			}
			if p.EndPort != nil {
				if *p.EndPort < port || *p.EndPort > 65535 {
					return nil, fmt.Errorf("%s.endPort: %d must be between port (%d) and 65535", pf, *p.EndPort, port)
				}
				if *p.EndPort > port {
					pms = append(pms, portMatch{fmt.Sprintf("%s dport %d-%d", proto, port, *p.EndPort), fmt.Sprintf("%s %d-%d", strings.ToUpper(proto), port, *p.EndPort)})
					continue
				}
			}
			pms = append(pms, portMatch{fmt.Sprintf("%s dport %d", proto, port), fmt.Sprintf("%s %d", strings.ToUpper(proto), port)})
		}
	}
	if len(ports) == 0 {
		pms = []portMatch{{"", "any port"}}
	}
	var out []string
	for _, m := range matches {
		for _, pm := range pms {
			if m.v6 && strings.Contains(pm.expr, "ip daddr") {
				continue // named ports are resolved for IPv4 Pods only
			}
			parts := []string{}
			if m.expr != "" {
				parts = append(parts, m.expr)
			}
			if pm.expr != "" {
				parts = append(parts, pm.expr)
			}
			parts = append(parts, "accept", "comment", quote(fmt.Sprintf("%s[%d] %s %s, %s", d.name, i, d.peerWord, m.desc, pm.desc)))
			out = append(out, strings.Join(parts, " "))
		}
	}
	return out, nil
}

func (c *compiled) compilePeer(d direction, i, j int, field string, peer networkingv1.NetworkPolicyPeer) (peerMatch, error) {
	if peer.IPBlock != nil {
		if peer.PodSelector != nil || peer.NamespaceSelector != nil {
			return peerMatch{}, fmt.Errorf("%s: ipBlock cannot go with podSelector or namespaceSelector in one peer", field)
		}
		cidr, err := netip.ParsePrefix(peer.IPBlock.CIDR)
		if err != nil {
			return peerMatch{}, fmt.Errorf("%s.ipBlock.cidr: %q is not a CIDR such as 10.0.0.0/16", field, peer.IPBlock.CIDR)
		}
		cidr = cidr.Masked()
		fam := "ip"
		if cidr.Addr().Is6() {
			fam = "ip6"
		}
		expr := fmt.Sprintf("%s %s %s", fam, d.peer, cidr)
		desc := cidr.String()
		var except []string
		for k, e := range peer.IPBlock.Except {
			ep, err := netip.ParsePrefix(e)
			if err != nil {
				return peerMatch{}, fmt.Errorf("%s.ipBlock.except[%d]: %q is not a CIDR", field, k, e)
			}
			ep = ep.Masked()
			if ep.Addr().Is6() != cidr.Addr().Is6() || !cidr.Contains(ep.Addr()) || ep.Bits() < cidr.Bits() {
				return peerMatch{}, fmt.Errorf("%s.ipBlock.except[%d]: %s is not inside the cidr %s", field, k, ep, cidr)
			}
			except = append(except, ep.String())
		}
		if len(except) > 0 {
			expr += fmt.Sprintf(" %s %s != { %s }", fam, d.peer, strings.Join(except, ", "))
			desc += " except " + strings.Join(except, ", ")
		}
		return peerMatch{expr: expr, v6: fam == "ip6", desc: desc}, nil
	}
	if peer.PodSelector == nil && peer.NamespaceSelector == nil {
		return peerMatch{}, fmt.Errorf("%s: a peer needs a podSelector, a namespaceSelector or an ipBlock", field)
	}
	s := peerSet{ns: c.np.Namespace, pods: labels.Everything()}
	var desc []string
	if peer.PodSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
		if err != nil {
			return peerMatch{}, fmt.Errorf("%s.podSelector: %w", field, err)
		}
		s.pods = sel
		desc = append(desc, "pods "+selectorText(sel))
	} else {
		desc = append(desc, "all pods")
	}
	if peer.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
		if err != nil {
			return peerMatch{}, fmt.Errorf("%s.namespaceSelector: %w", field, err)
		}
		s.nss = sel
		desc = append(desc, "in namespaces "+selectorText(sel))
	} else {
		desc = append(desc, "in "+c.np.Namespace)
	}
	s.name = setName(fmt.Sprintf("%s-%s-%s/%d/%d", d.name, d.peerWord, c.key, i, j))
	s.comment = fmt.Sprintf("%s %s[%d].%s[%d]: %s", c.key, d.name, i, d.peerWord, j, strings.Join(desc, " "))
	c.sets = append(c.sets, s)
	return peerMatch{expr: fmt.Sprintf("ip %s @%s", d.peer, s.name), desc: strings.Join(desc, " ")}, nil
}

func selectorText(s labels.Selector) string {
	if s.Empty() {
		return "(all)"
	}
	return s.String()
}

func validPortName(n string) bool {
	if n == "" || len(n) > 15 {
		return false
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// maxName keeps chain and set names well within nft's limit (255).
const maxName = 200

// chainName is prefix + key, shortened with a hash when too long.
func chainName(prefix, key string) string { return setName(prefix + key) }

func setName(n string) string {
	if len(n) <= maxName {
		return n
	}
	sum := sha256.Sum256([]byte(n))
	return n[:maxName-10] + "-h" + hex.EncodeToString(sum[:4])
}

func sortedUnique(s []string) []string {
	sort.Strings(s)
	return slices.Compact(s)
}
