package grade

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/faults"
	"github.com/svclab/svclab/lab/proxierctl"
	"github.com/svclab/svclab/lab/scenario"
)

func (g *Grader) dataplane(ctx context.Context, d *scenario.DataplaneCheck, base *Baseline) (string, error) {
	nodes, err := g.Cluster.Nodes(ctx)
	if err != nil {
		return "", fmt.Errorf("listing the nodes: %w", err)
	}
	var names []string
	if len(d.Nodes) == 0 {
		for _, n := range nodes {
			names = append(names, n.Name)
		}
	} else {
		for _, short := range d.Nodes {
			names = append(names, scenario.NodeName(g.Cluster.Name(), short))
		}
	}
	if d.Follows != nil {
		return g.follows(ctx, names, d.Follows)
	}
	// The nodes are asked at once (nodeExec bounds the commands); the
	// report keeps the nodes' order.
	type answer struct {
		line string
		pass bool
		err  error
	}
	answers := make([]answer, len(names))
	var wg sync.WaitGroup
	for i, node := range names {
		wg.Go(func() {
			a := &answers[i]
			switch {
			case d.Rules != nil:
				a.line, a.pass, a.err = g.rules(ctx, node, d.Rules)
			case d.Conntrack != nil:
				a.line, a.pass, a.err = g.conntrack(ctx, node, d.Conntrack, base)
			case d.ConntrackMax != nil:
				a.line, a.pass, a.err = g.conntrackMax(ctx, node, d.ConntrackMax)
			case d.LoadBalancer != nil:
				a.line, a.pass, a.err = g.loadBalancer(ctx, node, nodes, d.LoadBalancer)
			default:
				a.line, a.pass = g.proxyMode(ctx, node, d.ProxyMode)
			}
		})
	}
	wg.Wait()
	var ok, bad []string
	for i, a := range answers {
		if a.err != nil {
			return "", a.err
		}
		if a.pass {
			ok = append(ok, names[i]+": "+a.line)
		} else {
			bad = append(bad, names[i]+": "+a.line)
		}
	}
	if len(bad) > 0 {
		return "", failf("%s", strings.Join(append(bad, ok...), "; "))
	}
	return strings.Join(ok, "; "), nil
}

// nodeOutput reads node's dataplane with cmd (see cluster.DataplaneOutput:
// the host's tools in the node's network namespace on clusters that allow
// it, never the lab's), within the MaxExecs bound.
func (g *Grader) nodeOutput(ctx context.Context, node string, cmd ...string) (string, error) {
	release, err := g.acquire(ctx)
	if err != nil {
		return "", err
	}
	defer release()
	out, err := cluster.DataplaneOutput(ctx, g.Cluster, node, cmd...)
	if err != nil {
		return "", fmt.Errorf("%s on node %s: %w", strings.Join(cmd, " "), node, err)
	}
	return out, nil
}

func (g *Grader) service(ctx context.Context, ns, name string) (*corev1.Service, error) {
	if ns == "" {
		ns = "default"
	}
	cs, err := g.client()
	if err != nil {
		return nil, err
	}
	svc, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, failf("there is no Service %s/%s", ns, name)
	}
	if err != nil {
		return nil, fmt.Errorf("reading Service %s/%s: %w", ns, name, err)
	}
	return svc, nil
}

// servicePorts are the ports of svc that port selects (0: all).
func servicePorts(svc *corev1.Service, port int) ([]corev1.ServicePort, error) {
	if port == 0 {
		return svc.Spec.Ports, nil
	}
	for _, sp := range svc.Spec.Ports {
		if int(sp.Port) == port {
			return []corev1.ServicePort{sp}, nil
		}
	}
	return nil, failf("Service %s/%s has no port %d", svc.Namespace, svc.Name, port)
}

// rules tells what node's proxy rules do with the Service's traffic.
func (g *Grader) rules(ctx context.Context, node string, r *scenario.RulesAssertion) (string, bool, error) {
	svc, err := g.service(ctx, r.Namespace, r.Service)
	if err != nil {
		return "", false, err
	}
	ports, err := servicePorts(svc, r.Port)
	if err != nil {
		return "", false, err
	}
	external := r.Traffic == "external"
	if !external && (svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone) {
		if r.Expect == scenario.RulesAbsent {
			return "no ClusterIP, no rules", true, nil
		}
		return "", false, failf("Service %s/%s has no ClusterIP (headless or ExternalName), so no proxy rules", svc.Namespace, svc.Name)
	}
	mode, dump, err := g.proxyRules(ctx, node)
	if err != nil {
		return "", false, err
	}
	var parts []string
	pass := true
	for _, sp := range ports {
		var v verdict
		if external {
			if sp.NodePort == 0 {
				return "", false, failf("Service %s/%s port %d has no NodePort (type %s), so no external traffic rules", svc.Namespace, svc.Name, sp.Port, svcType(svc))
			}
		}
		v = verdictIn(mode, dump, svc, sp, external)
		if v.kind != r.Expect {
			pass = false
		}
		parts = append(parts, fmt.Sprintf("port %d %s (%s)", sp.Port, v.kind, v.why))
	}
	return mode + " " + strings.Join(parts, ", "), pass, nil
}

// proxyRules returns the proxy mode of node and its rules: the nftables
// table, or iptables-save's output. It asks the proxier for its mode; when
// no proxier answers (it is dead, which is what a scenario may be about),
// the rules it left behind tell.
func (g *Grader) proxyRules(ctx context.Context, node string) (mode, dump string, err error) {
	mode, err = g.askProxyMode(ctx, node)
	if err != nil {
		if dump, nftErr := g.nodeOutput(ctx, node, "nft", "list", "table", "ip", "kube-proxy"); nftErr == nil {
			return scenario.ProxyModeNFTables, dump, nil
		}
		if dump, iptErr := g.nodeOutput(ctx, node, "iptables-save"); iptErr == nil && strings.Contains(dump, "KUBE-SERVICES") {
			return scenario.ProxyModeIPTables, dump, nil
		}
		return "", "", fmt.Errorf("%w; and node %s has neither kube-proxy's nftables table nor its iptables chains", err, node)
	}
	if mode == scenario.ProxyModeNFTables {
		dump, err = g.nodeOutput(ctx, node, "nft", "list", "table", "ip", "kube-proxy")
	} else {
		dump, err = g.nodeOutput(ctx, node, "iptables-save")
	}
	return mode, dump, err
}

// verdict is what a node's rules do with new connections to a Service port.
type verdict struct {
	kind string // endpoints, reject, drop or absent
	why  string
}

var (
	nftMapRE     = regexp.MustCompile(`(?s)map ([\w-]+) \{(.*?)\n\t\}`)
	nftElemsRE   = regexp.MustCompile(`(?s)elements = \{(.*?)\}`)
	nftCommentRE = regexp.MustCompile(`\s*comment "[^"]*"`)
	spaceRE      = regexp.MustCompile(`\s+`)
)

// parseNFTMaps reads the verdict maps of `nft list table`: map name →
// element key ("10.96.0.10 . tcp . 53") → verdict ("goto service-…",
// "drop").
func parseNFTMaps(dump string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, m := range nftMapRE.FindAllStringSubmatch(dump, -1) {
		elems := map[string]string{}
		if e := nftElemsRE.FindStringSubmatch(m[2]); e != nil {
			for _, el := range strings.Split(e[1], ",") {
				el = nftCommentRE.ReplaceAllString(el, "")
				key, val, ok := strings.Cut(el, " : ")
				if !ok {
					continue
				}
				elems[spaceRE.ReplaceAllString(strings.TrimSpace(key), " ")] = strings.TrimSpace(val)
			}
		}
		out[m[1]] = elems
	}
	return out
}

func nftVerdict(maps map[string]map[string]string, svc *corev1.Service, sp corev1.ServicePort, external bool) verdict {
	proto := strings.ToLower(string(sp.Protocol))
	if proto == "" {
		proto = "tcp"
	}
	key := fmt.Sprintf("%s . %s . %d", svc.Spec.ClusterIP, proto, sp.Port)
	noEP, lb := "no-endpoint-services", "service-ips"
	if external {
		key = fmt.Sprintf("%s . %d", proto, sp.NodePort)
		noEP, lb = "no-endpoint-nodeports", "service-nodeports"
	}
	if v, ok := maps[noEP][key]; ok {
		kind := scenario.RulesDrop
		if strings.Contains(v, "reject") {
			kind = scenario.RulesReject
		}
		return verdict{kind, fmt.Sprintf("%s is in %s: %s", key, noEP, v)}
	}
	if v, ok := maps[lb][key]; ok {
		return verdict{scenario.RulesEndpoints, fmt.Sprintf("%s is in %s: %s", key, lb, v)}
	}
	return verdict{scenario.RulesAbsent, fmt.Sprintf("%s is in neither %s nor %s", key, lb, noEP)}
}

// iptablesVerdict reads iptables-save output as kube-proxy's iptables mode
// writes it: filter rules that REJECT ("has no endpoints") or DROP ("has no
// local endpoints"), nat rules that jump to the Service's chains.
func iptablesVerdict(save string, svc *corev1.Service, sp corev1.ServicePort, external bool) verdict {
	id := svc.Namespace + "/" + svc.Name
	if sp.Name != "" {
		id += ":" + sp.Name
	}
	proto := strings.ToLower(string(sp.Protocol))
	if proto == "" {
		proto = "tcp"
	}
	table := ""
	var filterRules, natRules []string
	for _, line := range strings.Split(save, "\n") {
		if strings.HasPrefix(line, "*") {
			table = line[1:]
			continue
		}
		if !strings.Contains(line, `"`+id+" ") && !strings.Contains(line, `"`+id+`"`) && !strings.Contains(line, " "+id+" ") {
			continue
		}
		if !strings.Contains(line, "-p "+proto+" ") {
			continue
		}
		switch table {
		case "filter":
			filterRules = append(filterRules, line)
		case "nat":
			natRules = append(natRules, line)
		}
	}
	port := fmt.Sprintf("--dport %d ", sp.Port)
	dst := "-d " + svc.Spec.ClusterIP + " "
	filterChain, natChain := "-A KUBE-SERVICES ", "-A KUBE-SERVICES "
	if external {
		port = fmt.Sprintf("--dport %d ", sp.NodePort)
		dst = ""
		filterChain, natChain = "-A KUBE-EXTERNAL-SERVICES ", "-A KUBE-NODEPORTS "
	}
	match := func(r, chain string) bool {
		// iptables-save writes -d IP/32, upstream's tests -d IP.
		r = strings.ReplaceAll(r, "/32 ", " ")
		return strings.HasPrefix(r, chain) && strings.Contains(r+" ", port) && strings.Contains(r, dst)
	}
	for _, r := range filterRules {
		if !match(r, filterChain) {
			continue
		}
		switch {
		case strings.HasSuffix(r, "-j REJECT") || strings.Contains(r, "-j REJECT "):
			return verdict{scenario.RulesReject, "filter: " + r}
		case strings.HasSuffix(r, "-j DROP") || strings.Contains(r, "-j DROP "):
			return verdict{scenario.RulesDrop, "filter: " + r}
		}
	}
	for _, r := range natRules {
		if match(r, natChain) {
			return verdict{scenario.RulesEndpoints, "nat: " + r}
		}
	}
	return verdict{scenario.RulesAbsent, fmt.Sprintf("no rule for %s in %s", id, strings.TrimSpace(strings.TrimPrefix(natChain, "-A ")))}
}

var conntrackEntryRE = regexp.MustCompile(`src=(\S+) dst=(\S+) sport=(\d+) dport=(\d+) .*?src=(\S+) dst=\S+ sport=(\d+)`)

// conntrack checks node's conntrack entries toward the Service's ClusterIP.
func (g *Grader) conntrack(ctx context.Context, node string, a *scenario.ConntrackAssertion, base *Baseline) (string, bool, error) {
	svc, err := g.service(ctx, a.Namespace, a.Service)
	if err != nil {
		return "", false, err
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return "", false, failf("Service %s/%s has no ClusterIP", svc.Namespace, svc.Name)
	}
	cmd := []string{"conntrack", "-L", "-p", a.Protocol, "--orig-dst", svc.Spec.ClusterIP}
	if a.Port != 0 {
		cmd = append(cmd, "--orig-port-dst", strconv.Itoa(a.Port))
	}
	if a.Expect == scenario.ConntrackKeptFromStart {
		cmd = append(cmd, "-o", "xml,ktimestamp")
	}
	out, err := g.nodeOutput(ctx, node, cmd...)
	if err != nil {
		return "", false, err
	}
	if a.Expect == scenario.ConntrackKeptFromStart {
		return keptFromStart(out, svc.Spec.ClusterIP, a.Protocol, base)
	}
	var entries [][]string
	for _, line := range strings.Split(out, "\n") {
		if m := conntrackEntryRE.FindStringSubmatch(line); m != nil {
			entries = append(entries, m)
		}
	}
	if a.Expect == scenario.ConntrackNoEntries {
		if len(entries) == 0 {
			return "no " + a.Protocol + " entries for " + svc.Spec.ClusterIP, true, nil
		}
		return fmt.Sprintf("%d %s entries for %s (first: %s:%s → %s)", len(entries), a.Protocol, svc.Spec.ClusterIP, entries[0][1], entries[0][3], entries[0][5]), false, nil
	}
	ready, err := g.readyAddresses(ctx, svc)
	if err != nil {
		return "", false, err
	}
	var stale []string
	for _, e := range entries {
		if !ready[e[5]] {
			stale = append(stale, fmt.Sprintf("%s:%s → %s (%s:%s is answered by %s, which is not a ready endpoint)", e[1], e[3], e[5], e[2], e[4], e[5]))
		}
	}
	if len(stale) > 0 {
		return fmt.Sprintf("%d stale %s entries: %s", len(stale), a.Protocol, strings.Join(stale, "; ")), false, nil
	}
	return fmt.Sprintf("%d %s entries, all toward ready endpoints", len(entries), a.Protocol), true, nil
}

// readyAddresses are the addresses of svc's ready endpoints.
func (g *Grader) readyAddresses(ctx context.Context, svc *corev1.Service) (map[string]bool, error) {
	cs, err := g.client()
	if err != nil {
		return nil, err
	}
	slices_, err := cs.DiscoveryV1().EndpointSlices(svc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
	if err != nil {
		return nil, fmt.Errorf("listing the EndpointSlices of Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	out := map[string]bool{}
	for _, s := range slices_.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				out[a] = true
			}
		}
	}
	return out, nil
}

// proxyMode tells whether node's kube-proxy runs in mode; a proxier that
// does not answer fails the check (it is not running, or crash-looping on
// its configuration).
func (g *Grader) proxyMode(ctx context.Context, node, mode string) (string, bool) {
	got, err := g.askProxyMode(ctx, node)
	if err != nil {
		return "kube-proxy does not answer: " + err.Error(), false
	}
	return "kube-proxy runs in " + got + " mode", got == mode
}

// askProxyMode asks node's proxier for its mode, within the MaxExecs bound.
func (g *Grader) askProxyMode(ctx context.Context, node string) (string, error) {
	release, err := g.acquire(ctx)
	if err != nil {
		return "", err
	}
	defer release()
	return proxierctl.Mode(ctx, g.Cluster, node)
}

// conntrackMax tells whether node may track at least a.AtLeast connections.
func (g *Grader) conntrackMax(ctx context.Context, node string, a *scenario.ConntrackMaxAssertion) (string, bool, error) {
	release, err := g.acquire(ctx)
	if err != nil {
		return "", false, err
	}
	defer release()
	l, err := faults.ConntrackMax(ctx, g.Cluster, node)
	if err != nil {
		return "", false, err
	}
	line := fmt.Sprintf("nf_conntrack_max %d, %d entries tracked", l.Max, l.Count)
	if l.Capped {
		line = fmt.Sprintf("conntrack table capped at %d connections (the lab's stand-in for nf_conntrack_max: nft table inet %s), %d entries tracked", l.Max, faults.ConntrackTable, l.Count)
	}
	if l.Max < a.AtLeast {
		line += fmt.Sprintf("; it must hold at least %d", a.AtLeast)
	}
	return line, l.Max >= a.AtLeast, nil
}

// loadBalancer says whether the lab's load balancer sends the traffic of
// a's Service to node.
func (g *Grader) loadBalancer(ctx context.Context, node string, nodes []cluster.Node, a *scenario.LoadBalancerAssertion) (string, bool, error) {
	lc, ok := g.Cluster.(cluster.LoadBalancerCluster)
	if !ok {
		return "", false, fmt.Errorf("cluster %s has no load balancer in front of its nodes: this check needs an embedded cluster", g.Cluster.Name())
	}
	cs, err := g.client()
	if err != nil {
		return "", false, err
	}
	ns := a.Namespace
	if ns == "" {
		ns = "default"
	}
	svc, err := cs.CoreV1().Services(ns).Get(ctx, a.Service, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("there is no Service %s/%s", ns, a.Service), false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("reading Service %s/%s: %w", ns, a.Service, err)
	}
	var addr string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			addr = in.IP
			break
		}
	}
	if addr == "" {
		return fmt.Sprintf("Service %s/%s has no load-balancer address", ns, a.Service), false, nil
	}
	routes, err := lc.LoadBalancerRoutes(ctx)
	if err != nil {
		return "", false, fmt.Errorf("reading the load balancer's routes: %w", err)
	}
	names := map[string]string{}
	var ip string
	for _, n := range nodes {
		names[n.IP] = n.Name
		if n.Name == node {
			ip = n.IP
		}
	}
	to, routed := routes[addr]
	sends := slices.Contains(to, ip)
	var line string
	switch {
	case sends:
		line = fmt.Sprintf("the load balancer sends %s's traffic here", addr)
	case !routed:
		line = fmt.Sprintf("the load balancer does not handle %s yet", addr)
	case len(to) == 0:
		line = fmt.Sprintf("the load balancer drops %s's traffic: no node passes its health check", addr)
	default:
		var others []string
		for _, t := range to {
			if n := names[t]; n != "" {
				others = append(others, n)
			} else {
				others = append(others, t)
			}
		}
		line = fmt.Sprintf("the load balancer sends none of %s's traffic here (it goes to %s)", addr, strings.Join(others, ", "))
	}
	return line, sends == (a.Expect == scenario.LoadBalancerSends), nil
}

// conntrackXML is the part of conntrack -o xml,ktimestamp that
// keptFromStart reads: each flow's original destination and when the
// kernel began tracking it (nanoseconds of the wall clock, recorded with
// net.netfilter.nf_conntrack_timestamp).
type conntrackXML struct {
	Flows []struct {
		Metas []struct {
			Direction string `xml:"direction,attr"`
			Dst       string `xml:"layer3>dst"`
			Start     string `xml:"timestamp>start"`
		} `xml:"meta"`
	} `xml:"flow"`
}

// keptFromStart tells whether the conntrack listing out (-o
// xml,ktimestamp) holds an entry to addr that the kernel began tracking
// before the attempt began (its baseline): connections made before then
// are still tracked, so the table was not flushed. A flushed table picks a
// live TCP connection up again with its next packet, as a new entry that
// began after the baseline. The kernel records the start to the
// nanosecond on the same clock as the baseline's, so no rounding blurs a
// flush made right after the attempt began.
func keptFromStart(out, addr, protocol string, base *Baseline) (string, bool, error) {
	if base == nil || base.Taken.IsZero() {
		return "", false, errors.New("no record of when the attempt began, so there is nothing to compare the connections' ages with")
	}
	var doc conntrackXML
	if strings.TrimSpace(out) != "" {
		if err := xml.Unmarshal([]byte(out), &doc); err != nil {
			return "", false, fmt.Errorf("reading conntrack's XML listing: %w", err)
		}
	}
	var starts []time.Time
	untimed := 0
	for _, f := range doc.Flows {
		var dst, start string
		for _, m := range f.Metas {
			switch m.Direction {
			case "original":
				dst = m.Dst
			case "independent":
				start = m.Start
			}
		}
		if dst != addr {
			continue
		}
		ns, err := strconv.ParseInt(start, 10, 64)
		if err != nil || ns <= 0 {
			untimed++
			continue
		}
		starts = append(starts, time.Unix(0, ns))
	}
	if len(starts) == 0 && untimed > 0 {
		return "", false, errors.New("the node does not record when its connections began (net.netfilter.nf_conntrack_timestamp is off), so their ages cannot be told")
	}
	began := base.Taken.Format(time.TimeOnly)
	if len(starts) == 0 {
		return fmt.Sprintf("no %s entry for %s any more: the connections made before the attempt began (at %s) are no longer tracked", protocol, addr, began), false, nil
	}
	oldest := slices.MinFunc(starts, time.Time.Compare)
	if oldest.Before(base.Taken) {
		return fmt.Sprintf("%d %s entries for %s; the oldest has been tracked since %s, before the attempt began (at %s)", len(starts), protocol, addr, oldest.Format(time.TimeOnly), began), true, nil
	}
	return fmt.Sprintf("%d %s entries for %s, the oldest tracked since %s: every connection made before the attempt began (at %s) lost its entry, and what is tracked now was picked up since", len(starts), protocol, addr, oldest.Format(time.TimeOnly), began), false, nil
}
