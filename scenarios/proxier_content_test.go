//go:build linux

package scenarios_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svclab/svclab/lab/proxier/iptables"
	"github.com/svclab/svclab/lab/proxier/model"
	"github.com/svclab/svclab/lab/proxier/nftables"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/scenarios"
)

// Every kube-proxy object a scenario's texts name (task, hints, checks'
// words, explanation, solutions and wrong fixes) is one the bundled
// proxier (kube-proxy v1.37's rules) writes for that scenario's objects:
// its tables' chains, maps and sets in nftables mode, its chains in
// iptables mode. The objects are rendered for every node of the
// scenario's cluster, with the scenario's workloads behind its Services
// and with no endpoints at all (the broken side of most scenarios). A
// sentence that says which older release it speaks of is not held to
// v1.37.
func TestTextsNameWhatTheProxierWrites(t *testing.T) {
	cat, problems := scenarios.Load(scenario.Options{})
	if err := problems.Err(); err != nil {
		t.Fatal(err)
	}
	for _, s := range cat.Scenarios {
		t.Run(s.ID, func(t *testing.T) {
			nft, ipt := renderedNames(t, s)
			for _, st := range statements(s) {
				for _, name := range namedObjects(st.text) {
					if !name.rendered(nft, ipt) {
						t.Errorf("%s names %s %q, which kube-proxy v1.37 does not write for this scenario's objects (it writes %s):\n  %s",
							st.where, name.mode, name.text, name.alternatives(nft, ipt), strings.TrimSpace(st.sentence(name.text)))
					}
				}
			}
		})
	}
}

// statement is one text of a scenario and where it is.
type statement struct{ where, text string }

// sentence is the sentence of st that holds s.
func (st statement) sentence(s string) string {
	i := strings.Index(st.text, s)
	if i < 0 {
		return ""
	}
	start := max(strings.LastIndexAny(st.text[:i], ".\n")+1, 0)
	end := strings.IndexAny(st.text[i:], ".\n")
	if end < 0 {
		end = len(st.text) - i
	}
	return st.text[start : i+end]
}

func statements(s *scenario.Scenario) []statement {
	out := []statement{{"the task", s.Task}, {"the explanation", s.Explanation}}
	for i, h := range s.Hints {
		out = append(out, statement{fmt.Sprintf("hint %d", i+1), h})
	}
	for _, c := range s.Checks {
		out = append(out, statement{"check " + c.ID, c.Description + "\n" + c.FailMessage})
		if c.Answer != nil {
			out = append(out, statement{"check " + c.ID + "'s question", c.Answer.Question + "\n" + c.Answer.Reference})
		}
	}
	for _, o := range s.OtherSolutions {
		out = append(out, statement{"solution " + o.ID, o.Description})
	}
	for _, w := range s.WrongFixes {
		out = append(out, statement{"wrong fix " + w.ID, w.Description})
	}
	return out
}

// objectName is a kube-proxy object a text names: a whole name, or the
// prefix of per-Service objects (endpoint-, KUBE-SEP-).
type objectName struct {
	mode, text string
	prefix     string // for per-Service objects
	whole      string // for the others
}

func (n objectName) rendered(nft, ipt map[string]bool) bool {
	names := nft
	if n.mode == "iptables" {
		names = ipt
	}
	if n.whole != "" {
		return names[n.whole]
	}
	for name := range names {
		if strings.HasPrefix(name, n.prefix) {
			return true
		}
	}
	return false
}

// alternatives lists what the proxier writes of the same kind, for the
// message.
func (n objectName) alternatives(nft, ipt map[string]bool) string {
	names := nft
	if n.mode == "iptables" {
		names = ipt
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if i := strings.IndexAny(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"); n.mode == "nftables" && i > 0 && strings.Contains(name, "/") {
			name = name[:i] + "…" // a per-Service object: its kind
		} else if n.mode == "iptables" && perServiceChain.MatchString(name) {
			name = strings.TrimSuffix(perServiceChain.FindString(name), "-") + "-…"
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return strings.Join(out, ", ")
}

var (
	// kube-proxy's nftables objects of any release, static ones by name:
	// the hyphenated ones are unmistakable in prose; "services" and
	// "masquerading" count only as code.
	nftStatic = []string{
		"filter-prerouting-pre-dnat", "filter-output-pre-dnat", "filter-output-post-dnat", "filter-prerouting",
		"filter-input", "filter-forward", "filter-output", "nat-prerouting", "nat-output", "nat-postrouting",
		"firewall-check", "nodeport-endpoints-check", "service-endpoints-check", "cluster-ips-check",
		"reject-chain", "mark-for-masquerade", "cluster-ips", "nodeport-ips", "hairpin-connections",
		"service-ips", "service-nodeports", "no-endpoint-services", "no-endpoint-nodeports", "firewall-ips",
	}
	nftStaticRE = regexp.MustCompile(`(?:^|[^\w-])(` + strings.Join(nftStatic, "|") + `)(?:$|[^\w-])`)
	nftCodeRE   = regexp.MustCompile("`(services|masquerading)`")
	// Per-Service objects: written with their hash (service-AXK6CI2C-…)
	// or a stand-in for it (endpoint-…, endpoint-HASH-…, endpoint-*).
	nftPerServiceRE = regexp.MustCompile(`(?:^|[^\w-])((?:service|local|external|firewall|endpoint|affinity)-)(?:[A-Z2-7]{8}-|…|\.\.\.|\*|HASH|<)`)
	// ... or in words.
	nftEndpointChainWords = regexp.MustCompile(`(?i)\b(?:per-)?endpoint\s+chains?\b`)
	// iptables chains: KUBE-… in capitals.
	iptRE           = regexp.MustCompile(`\bKUBE-[A-Z0-9-]*[A-Z0-9]`)
	perServiceChain = regexp.MustCompile(`^KUBE-(?:SVC|SVL|EXT|FW|SEP)(?:-|$)`)
	// A sentence about an earlier release.
	olderRelease = regexp.MustCompile(`(?i)\bv?1\.(?:[0-2]\d|3[0-5])\b|\bbefore (?:v?1\.3[0-7]|kubernetes 1\.3[0-7])|\bolder (?:releases|versions)|\bearlier releases`)
)

// namedObjects finds the kube-proxy objects text names, but in sentences
// about an earlier release.
func namedObjects(text string) []objectName {
	var out []objectName
	add := func(n objectName) {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	st := statement{text: text}
	older := func(s string) bool { return olderRelease.MatchString(st.sentence(s)) }
	for _, m := range nftStaticRE.FindAllStringSubmatch(text, -1) {
		if !older(m[1]) {
			add(objectName{mode: "nftables", text: m[1], whole: m[1]})
		}
	}
	for _, m := range nftCodeRE.FindAllStringSubmatch(text, -1) {
		if !older(m[0]) {
			add(objectName{mode: "nftables", text: m[1], whole: m[1]})
		}
	}
	for _, m := range nftPerServiceRE.FindAllStringSubmatch(text, -1) {
		if s := strings.TrimLeft(m[0], " \t\n(`'\""); !older(s) {
			add(objectName{mode: "nftables", text: m[1] + "…", prefix: m[1]})
		}
	}
	for _, m := range nftEndpointChainWords.FindAllString(text, -1) {
		if !older(m) && !strings.Contains(strings.ToLower(st.sentence(m)), "iptables") {
			add(objectName{mode: "nftables", text: "endpoint-… (" + strings.Join(strings.Fields(m), " ") + ")", prefix: "endpoint-"})
		}
	}
	for _, m := range iptRE.FindAllString(text, -1) {
		if older(m) {
			continue
		}
		if p := perServiceChain.FindString(m); p != "" {
			p = strings.TrimSuffix(p, "-") + "-"
			add(objectName{mode: "iptables", text: p + "…", prefix: p})
		} else {
			add(objectName{mode: "iptables", text: m, whole: m})
		}
	}
	return out
}

// renderedNames renders s's Services on each of its nodes, with
// endpoints from its workloads and with none, and returns the names of
// the objects written: nftables' chains, maps and sets, iptables' chains.
func renderedNames(t *testing.T, s *scenario.Scenario) (nft, ipt map[string]bool) {
	t.Helper()
	nft, ipt = map[string]bool{}, map[string]bool{}
	base, slices := clusterObjects(s)
	nodes := s.Cluster.NodeNames()
	nodeIP := func(i int) net.IP { return net.IPv4(172, 18, 0, byte(2+i)) }
	ctx := context.Background()
	for _, svcs := range variants(s, base) {
		for _, eps := range [][]*discovery.EndpointSlice{slices, nil} {
			renderInto(t, ctx, s, svcs, eps, nodes, nodeIP, nft, ipt)
		}
	}
	return nft, ipt
}

// variants are s's Services as its faults and fixes leave them: as the
// manifests write them, and with each traffic knob that a fault or a
// solution of s turns (session affinity, a traffic policy) turned.
func variants(s *scenario.Scenario, base []*corev1.Service) [][]*corev1.Service {
	var b strings.Builder
	for _, f := range s.Faults {
		fmt.Fprintf(&b, "%s %v\n", f.Name, f.Params)
	}
	cmds := append([]string(nil), s.Solution...)
	for _, o := range s.OtherSolutions {
		cmds = append(cmds, o.Commands...)
	}
	b.WriteString(strings.Join(cmds, "\n"))
	turned := strings.ToLower(b.String())
	out := [][]*corev1.Service{base}
	with := func(f func(*corev1.Service)) {
		var v []*corev1.Service
		for _, svc := range base {
			c := svc.DeepCopy()
			f(c)
			v = append(v, c)
		}
		out = append(out, v)
	}
	turns := func(words ...string) bool {
		return slices.ContainsFunc(words, func(w string) bool { return strings.Contains(turned, w) })
	}
	if turns("sessionaffinity", "clientip", "affinity ") {
		with(func(svc *corev1.Service) {
			svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			svc.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: new(int32(10800))}}
		})
	}
	if turns("internaltrafficpolicy", "internal:", "itp-") {
		with(func(svc *corev1.Service) {
			svc.Spec.InternalTrafficPolicy = new(corev1.ServiceInternalTrafficPolicyLocal)
		})
	}
	if turns("externaltrafficpolicy", "external:", "etp-") {
		with(func(svc *corev1.Service) {
			if svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
				svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.HealthCheckNodePort == 0 {
					svc.Spec.HealthCheckNodePort = 32500
				}
			}
		})
	}
	return out
}

// renderInto renders svcs with eps on each node, in both modes, and adds
// the names of what is written to nft and ipt.
func renderInto(t *testing.T, ctx context.Context, s *scenario.Scenario, svcs []*corev1.Service, eps []*discovery.EndpointSlice, nodes []string, nodeIP func(int) net.IP, nft, ipt map[string]bool) {
	t.Helper()
	{
		for i, node := range nodes {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: s.Cluster.NodeLabels[node]}}
			snap, err := model.Build(ctx, nil, model.Input{Family: corev1.IPv4Protocol, Node: n, NodeName: node, Services: svcs, EndpointSlices: eps})
			if err != nil {
				t.Fatal(err)
			}
			for _, npaSpec := range []string{model.NodePortAddressesPrimary, ""} {
				var spec []string
				if npaSpec != "" {
					spec = []string{npaSpec}
				}
				npa, err := model.NewNodePortAddresses(corev1.IPv4Protocol, spec, nodeIP(i))
				if err != nil {
					t.Fatal(err)
				}
				r, err := nftables.Render(ctx, nil, nftables.Config{Family: corev1.IPv4Protocol, NodeIP: nodeIP(i), ClusterCIDR: "10.244.0.0/16",
					ServiceCIDRs: []string{"10.96.0.0/16"}, NodePortAddresses: npa, LocalAddresses: []net.IP{nodeIP(i)}}, snap)
				if err != nil {
					t.Fatal(err)
				}
				for _, line := range strings.Split(r.Ruleset, "\n") {
					f := strings.Fields(line)
					if len(f) >= 5 && f[0] == "add" && (f[1] == "chain" || f[1] == "map" || f[1] == "set") {
						nft[f[4]] = true
					}
				}
				res, err := iptables.Render(ctx, nil, iptables.Config{Family: corev1.IPv4Protocol, NodeIP: nodeIP(i), ClusterCIDR: "10.244.0.0/16",
					NodePortAddresses: npa, LocalAddresses: []net.IP{nodeIP(i)}, LocalhostNodePorts: true}, snap, iptables.Options{})
				if err != nil {
					t.Fatal(err)
				}
				for _, line := range strings.Split(res.Restore, "\n") {
					if name, ok := strings.CutPrefix(line, ":"); ok {
						ipt[strings.Fields(name)[0]] = true
					}
					for _, m := range iptRE.FindAllString(line, -1) {
						ipt[m] = true
					}
				}
				for _, j := range iptables.JumpRules() {
					for _, m := range iptRE.FindAllString(j.String(), -1) {
						ipt[m] = true
					}
				}
				for _, c := range iptables.CanaryChains() {
					for _, m := range iptRE.FindAllString(c, -1) {
						ipt[m] = true
					}
				}
			}
		}
	}
}

// clusterObjects turns s's manifests into what kube-proxy reads: its
// Services with addresses allocated (ClusterIPs, NodePorts, load-balancer
// addresses) and EndpointSlices as the EndpointSlice controller would
// write them for its workloads (one Pod per replica, spread over the
// nodes), next to the EndpointSlices the manifests hold.
func clusterObjects(s *scenario.Scenario) ([]*corev1.Service, []*discovery.EndpointSlice) {
	type podSet struct {
		namespace string
		labels    map[string]string
		spec      corev1.PodSpec
		replicas  int
	}
	var svcs []*corev1.Service
	var slices []*discovery.EndpointSlice
	var pods []podSet
	nodes := s.Cluster.NodeNames()
	for _, m := range s.Manifests {
		for _, o := range m.Objects {
			switch v := o.Typed.(type) {
			case *corev1.Service:
				svc := v.DeepCopy()
				svc.Namespace = o.Namespace
				svcs = append(svcs, svc)
			case *discovery.EndpointSlice:
				es := v.DeepCopy()
				es.Namespace = o.Namespace
				slices = append(slices, es)
			case *corev1.Pod:
				pods = append(pods, podSet{o.Namespace, v.Labels, v.Spec, 1})
			case *appsv1.Deployment:
				pods = append(pods, podSet{o.Namespace, v.Spec.Template.Labels, v.Spec.Template.Spec, int(ptrOr(v.Spec.Replicas, 1))})
			case *appsv1.StatefulSet:
				pods = append(pods, podSet{o.Namespace, v.Spec.Template.Labels, v.Spec.Template.Spec, int(ptrOr(v.Spec.Replicas, 1))})
			case *appsv1.ReplicaSet:
				pods = append(pods, podSet{o.Namespace, v.Spec.Template.Labels, v.Spec.Template.Spec, int(ptrOr(v.Spec.Replicas, 1))})
			case *appsv1.DaemonSet:
				pods = append(pods, podSet{o.Namespace, v.Spec.Template.Labels, v.Spec.Template.Spec, len(nodes)})
			}
		}
	}
	podIP := 0
	for i, svc := range svcs {
		if svc.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		if svc.Spec.ClusterIP != corev1.ClusterIPNone {
			svc.Spec.ClusterIP = fmt.Sprintf("10.96.%d.%d", i/200, 10+i%200)
			svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
		}
		if svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
			for j := range svc.Spec.Ports {
				if svc.Spec.Ports[j].NodePort == 0 {
					svc.Spec.Ports[j].NodePort = int32(30000 + 10*i + j)
				}
			}
		}
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: fmt.Sprintf("172.18.255.%d", 200+i)}}
			if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal && svc.Spec.HealthCheckNodePort == 0 {
				svc.Spec.HealthCheckNodePort = int32(32000 + i)
			}
		}
		if svc.Spec.Selector == nil {
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		es := &discovery.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: svc.Name + "-x", Namespace: svc.Namespace, Labels: map[string]string{discovery.LabelServiceName: svc.Name}},
			AddressType: discovery.AddressTypeIPv4,
		}
		var spec *corev1.PodSpec
		for _, p := range pods {
			if p.namespace != svc.Namespace || !sel.Matches(labels.Set(p.labels)) {
				continue
			}
			spec = &p.spec
			for range min(p.replicas, 4) {
				node := nodes[podIP%len(nodes)]
				podIP++
				es.Endpoints = append(es.Endpoints, discovery.Endpoint{
					Addresses:  []string{fmt.Sprintf("10.244.%d.%d", podIP/200, 10+podIP%200)},
					Conditions: discovery.EndpointConditions{Ready: new(true), Serving: new(true), Terminating: new(false)},
					NodeName:   &node,
				})
			}
		}
		if spec == nil {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			port := targetPort(sp, spec)
			if port == 0 {
				continue
			}
			es.Ports = append(es.Ports, discovery.EndpointPort{Name: new(sp.Name), Protocol: new(cmpProto(sp.Protocol)), Port: &port})
		}
		slices = append(slices, es)
	}
	return svcs, slices
}

// targetPort resolves sp's targetPort against the Pods' containers, as
// the EndpointSlice controller does; 0 when a name matches no port.
func targetPort(sp corev1.ServicePort, spec *corev1.PodSpec) int32 {
	tp := sp.TargetPort
	switch {
	case tp.Type == intstr.Int && tp.IntVal != 0:
		return tp.IntVal
	case tp.Type == intstr.Int:
		return sp.Port
	}
	for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
		for _, p := range c.Ports {
			if p.Name == tp.StrVal && cmpProto(p.Protocol) == cmpProto(sp.Protocol) {
				return p.ContainerPort
			}
		}
	}
	return 0
}

func cmpProto(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
