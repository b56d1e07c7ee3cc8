package grade

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/netcheck"
	"github.com/svclab/svclab/lab/scenario"
)

// Defaults of a probe.
const (
	DefaultAttempts = 10
	// DefaultTimeout bounds each attempt of a probe that expects success.
	DefaultTimeout = 2 * time.Second
	// DefaultFailureTimeout bounds each attempt of a probe that expects
	// its attempts to be refused or to time out: a refusal comes at once,
	// and an answer within the machine comes in milliseconds, so waiting
	// longer only slows grading down.
	DefaultFailureTimeout = time.Second
	// ConnectTimeout bounds the TCP handshake of http and tcp attempts
	// (when the attempt's timeout is longer). The handshake is the
	// kernel's work on both ends, over veths on one machine: it completes
	// in milliseconds even on a loaded machine, and a SYN unanswered for a
	// second was dropped (the kernel would only resend it now).
	ConnectTimeout = time.Second
)

// probeTimeouts returns the timeout of each attempt of p and the timeout of
// its TCP handshake.
func probeTimeouts(p *scenario.ProbeCheck) (timeout, connect time.Duration, err error) {
	timeout = DefaultTimeout
	if p.Expect.Outcome != scenario.OutcomeSuccess {
		timeout = DefaultFailureTimeout
	}
	if p.Timeout != "" {
		if timeout, err = time.ParseDuration(p.Timeout); err != nil {
			return 0, 0, fmt.Errorf("timeout %q: %w", p.Timeout, err)
		}
	}
	return timeout, min(timeout, ConnectTimeout), nil
}

// DropWait is how long an attempt of p waits for an answer that never
// comes (a dropped packet): the handshake's timeout for http and tcp, the
// attempt's timeout for udp and dns. A probe that meets a DROP takes that
// long on top of the cost of running it.
func DropWait(p *scenario.ProbeCheck) time.Duration {
	timeout, connect, err := probeTimeouts(p)
	if err != nil {
		return DefaultTimeout
	}
	if p.Protocol == "http" || p.Protocol == "tcp" {
		return connect
	}
	return timeout
}

// probeSource is where a probe runs.
type probeSource struct {
	node           string // a node's name, or
	namespace, pod string // a Pod's
	container      string
	podObj         *corev1.Pod
	ip             string // the source address backends see when not masqueraded
	nodeName       string // the node the probe starts on
	// outside, for a client outside the cluster, is its network namespace.
	outside cluster.Netns
	desc    string
	// remove deletes the grader's witness Pod (nil: none).
	remove func()
}

// probeTarget is where a probe goes.
type probeTarget struct {
	host string
	port int
	// resolve is a DNS name a node must resolve through cluster DNS first
	// (nodes do not use cluster DNS); host is then "$H".
	resolve string
	desc    string
}

// attempt is the outcome of one probe.
type attempt struct {
	outcome string // success, refused, timeout, or dns-failure
	body    string
	raw     string
}

func (g *Grader) probe(ctx context.Context, p *scenario.ProbeCheck) (string, error) {
	cs, err := g.client()
	if err != nil {
		return "", err
	}
	src, err := g.probeSource(ctx, cs, p.From)
	if src.remove != nil {
		defer src.remove()
	}
	if err != nil {
		return "", err
	}
	tgt, err := g.probeTarget(ctx, cs, p, src.node != "")
	if err != nil {
		return "", err
	}
	n := p.Attempts
	if n == 0 {
		n = DefaultAttempts
	}
	timeout, connect, err := probeTimeouts(p)
	if err != nil {
		return "", err
	}
	g.clearHalfOpen(ctx, p.Protocol, src, tgt)
	if p.During != nil {
		return g.probeDuring(ctx, cs, p, func(ctx context.Context) ([]attempt, error) {
			return g.attempts(ctx, p, src, tgt, n, timeout, connect)
		}, func(as []attempt) (string, error) {
			return g.judgeProbe(ctx, cs, p, src, tgt, as)
		})
	}
	attempts, err := g.attempts(ctx, p, src, tgt, n, timeout, connect)
	if err != nil {
		return "", err
	}
	return g.judgeProbe(ctx, cs, p, src, tgt, attempts)
}

// attempts sends the probe's n attempts once: from the source's network
// namespace where the cluster has them, else by a script in the node or
// Pod.
func (g *Grader) attempts(ctx context.Context, p *scenario.ProbeCheck, src probeSource, tgt probeTarget, n int, timeout, connect time.Duration) ([]attempt, error) {
	if nc, ok := g.Cluster.(cluster.NetnsCluster); ok || src.outside != nil {
		return g.probeInNetns(ctx, nc, p, src, tgt, n, timeout, connect)
	}
	script := probeScript(p, tgt, src.node != "", n, timeout, connect)
	out, errOut := cluster.NewCappedBuffer(1<<20), cluster.NewCappedBuffer(64<<10)
	var err error
	if src.node != "" {
		err = g.nodeExec(ctx, src.node, []string{"sh", "-c", script}, cluster.Stdio{Stdout: out, Stderr: errOut})
	} else {
		err = g.podExec(ctx, src.namespace, src.pod, src.container, []string{"sh", "-c", script}, out, errOut)
	}
	attempts := parseAttempts(out.String(), p.Protocol)
	if err != nil && len(attempts) == 0 {
		return nil, fmt.Errorf("running the probe from %s: %w %s", src.desc, err, strings.TrimSpace(errOut.String()))
	}
	if len(attempts) != n {
		return nil, fmt.Errorf("the probe from %s reported %d of %d attempts: %s", src.desc, len(attempts), n, strings.TrimSpace(out.String()+" "+errOut.String()))
	}
	return attempts, nil
}

func (g *Grader) probeSource(ctx context.Context, cs kubernetes.Interface, from scenario.ProbeSource) (probeSource, error) {
	if from.Outside {
		lc, ok := g.Cluster.(cluster.LoadBalancerCluster)
		if !ok {
			return probeSource{}, fmt.Errorf("cluster %s has no client outside it (no load balancer in front of its nodes): this check needs an embedded cluster", g.Cluster.Name())
		}
		ns, ip, err := lc.OutsideNetns()
		if err != nil {
			return probeSource{}, err
		}
		return probeSource{outside: ns, ip: ip, desc: "a client outside the cluster (" + ip + ")"}, nil
	}
	if from.Node != "" {
		name := scenario.NodeName(g.Cluster.Name(), from.Node)
		nodes, err := g.Cluster.Nodes(ctx)
		if err != nil {
			return probeSource{}, fmt.Errorf("listing the nodes: %w", err)
		}
		for _, n := range nodes {
			if n.Name == name {
				return probeSource{node: name, nodeName: name, ip: n.IP, desc: "node " + name}, nil
			}
		}
		return probeSource{}, fmt.Errorf("cluster %s has no node %s", g.Cluster.Name(), name)
	}
	ns := from.Namespace
	if ns == "" {
		ns = "default"
	}
	var pod *corev1.Pod
	var remove func()
	switch {
	case from.Witness != nil:
		p, rm, err := g.witnessPod(ctx, cs, from)
		if err != nil {
			return probeSource{remove: rm}, err
		}
		pod, remove, ns = p, rm, p.Namespace
	case from.Pod != "":
		p, err := cs.CoreV1().Pods(ns).Get(ctx, from.Pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return probeSource{}, failf("the Pod %s/%s that the probe starts from does not exist", ns, from.Pod)
		}
		if err != nil {
			return probeSource{}, fmt.Errorf("reading Pod %s/%s: %w", ns, from.Pod, err)
		}
		pod = p
	default:
		opts := metav1.ListOptions{LabelSelector: from.PodSelector}
		where := ""
		if from.OnNode != "" {
			node := scenario.NodeName(g.Cluster.Name(), from.OnNode)
			opts.FieldSelector, where = "spec.nodeName="+node, " on node "+node
		}
		list, err := cs.CoreV1().Pods(ns).List(ctx, opts)
		if err != nil {
			return probeSource{}, fmt.Errorf("listing Pods %s in %s: %w", from.PodSelector, ns, err)
		}
		if pod = pickSource(ctx, cs, list.Items); pod == nil {
			return probeSource{}, failf("no running Pod in %s matches %s%s, so the probe has nowhere to start from", ns, from.PodSelector, where)
		}
	}
	if pod.Status.Phase != corev1.PodRunning || len(pod.Spec.Containers) == 0 {
		return probeSource{}, failf("the Pod %s/%s that the probe starts from is %s, not Running", ns, pod.Name, pod.Status.Phase)
	}
	desc := podDesc(ns, pod)
	if from.Witness != nil {
		desc = witnessDesc(pod)
	}
	return probeSource{namespace: ns, pod: pod.Name, container: pod.Spec.Containers[0].Name, podObj: pod, ip: pod.Status.PodIP,
		nodeName: pod.Spec.NodeName, desc: desc, remove: remove}, nil
}

func (g *Grader) probeTarget(ctx context.Context, cs kubernetes.Interface, p *scenario.ProbeCheck, fromNode bool) (probeTarget, error) {
	t := p.Target
	nodeIP := func(short string) (string, error) {
		name := scenario.NodeName(g.Cluster.Name(), short)
		nodes, err := g.Cluster.Nodes(ctx)
		if err != nil {
			return "", fmt.Errorf("listing the nodes: %w", err)
		}
		for _, n := range nodes {
			if n.Name == name {
				return n.IP, nil
			}
		}
		return "", fmt.Errorf("cluster %s has no node %s", g.Cluster.Name(), name)
	}
	if t.Address == "secondary" {
		nodeIP = func(short string) (string, error) {
			return g.secondaryAddress(ctx, scenario.NodeName(g.Cluster.Name(), short))
		}
	}
	if t.Service == "" {
		host := t.Host
		if t.Node != "" {
			ip, err := nodeIP(t.Node)
			if err != nil {
				return probeTarget{}, err
			}
			host = ip
		}
		tgt := probeTarget{host: host, port: t.Port, desc: net.JoinHostPort(host, strconv.Itoa(t.Port))}
		if fromNode && net.ParseIP(host) == nil {
			tgt.resolve, tgt.host = host, "$H"
		}
		return tgt, nil
	}
	ns := t.Namespace
	if ns == "" {
		ns = "default"
	}
	svc, err := cs.CoreV1().Services(ns).Get(ctx, t.Service, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return probeTarget{}, failf("there is no Service %s/%s to send traffic to", ns, t.Service)
	}
	if err != nil {
		return probeTarget{}, fmt.Errorf("reading Service %s/%s: %w", ns, t.Service, err)
	}
	var sp *corev1.ServicePort
	var ports []string
	for i := range svc.Spec.Ports {
		if int(svc.Spec.Ports[i].Port) == t.Port {
			sp = &svc.Spec.Ports[i]
		}
		ports = append(ports, strconv.Itoa(int(svc.Spec.Ports[i].Port)))
	}
	if sp == nil {
		return probeTarget{}, failf("Service %s/%s has no port %d (its ports: %s)", ns, t.Service, t.Port, strings.Join(ports, ", "))
	}
	switch t.Via {
	case scenario.ViaNodePort:
		if sp.NodePort == 0 {
			return probeTarget{}, failf("Service %s/%s has no NodePort for port %d (it is of type %s)", ns, t.Service, t.Port, svcType(svc))
		}
		ip, err := nodeIP(t.Node)
		if err != nil {
			return probeTarget{}, err
		}
		return probeTarget{host: ip, port: int(sp.NodePort),
			desc: fmt.Sprintf("NodePort %d of Service %s/%s on node %s (%s)", sp.NodePort, ns, t.Service, scenario.NodeName(g.Cluster.Name(), t.Node), ip)}, nil
	case scenario.ViaLoadBalancer:
		var ip string
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				ip = in.IP
				break
			}
		}
		if ip == "" {
			return probeTarget{}, failf("Service %s/%s has no load-balancer address (it is of type %s; kubectl get service shows EXTERNAL-IP <pending> while a LoadBalancer Service waits for one)", ns, t.Service, svcType(svc))
		}
		return probeTarget{host: ip, port: t.Port,
			desc: fmt.Sprintf("Service %s/%s on its load-balancer address %s:%d", ns, t.Service, ip, t.Port)}, nil
	case scenario.ViaDNSName:
		name := fmt.Sprintf("%s.%s.svc.%s", t.Service, ns, cluster.DefaultDNSDomain)
		tgt := probeTarget{host: name, port: t.Port, desc: fmt.Sprintf("%s:%d", name, t.Port)}
		if fromNode {
			tgt.resolve, tgt.host = name, "$H"
		}
		return tgt, nil
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return probeTarget{}, failf("Service %s/%s has no ClusterIP (it is headless or of type %s)", ns, t.Service, svcType(svc))
	}
	return probeTarget{host: svc.Spec.ClusterIP, port: t.Port,
		desc: fmt.Sprintf("Service %s/%s on its ClusterIP %s:%d", ns, t.Service, svc.Spec.ClusterIP, t.Port)}, nil
}

func svcType(svc *corev1.Service) corev1.ServiceType {
	if svc.Spec.Type == "" {
		return corev1.ServiceTypeClusterIP
	}
	return svc.Spec.Type
}

// shq quotes s for sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// probeInNetns makes the probe's n attempts with svclab's own code from
// the source's network namespace (see package netcheck): nothing in the
// node or the Pod takes part, whatever the learner put there.
func (g *Grader) probeInNetns(ctx context.Context, nc cluster.NetnsCluster, p *scenario.ProbeCheck, src probeSource, tgt probeTarget,
	n int, timeout, connect time.Duration) ([]attempt, error) {
	release, err := g.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	var ns cluster.Netns
	switch {
	case src.outside != nil:
		ns = src.outside
	case src.node != "":
		ns, err = nc.NodeNetns(src.node)
	default:
		ns, err = nc.PodNetns(src.podObj)
	}
	if err != nil {
		return nil, fmt.Errorf("entering the network of %s: %w", src.desc, err)
	}
	host := tgt.host
	if tgt.resolve != "" || (net.ParseIP(host) == nil && p.Protocol != "dns") {
		name := tgt.resolve
		if name == "" {
			name = host
		}
		ip, rerr := resolveFrom(ctx, ns, src, name, timeout)
		if rerr != nil {
			// Every attempt fails to resolve, as each would have.
			as := make([]attempt, n)
			for i := range as {
				as[i] = attempt{outcome: netcheck.DNSFailure, raw: rerr.Error()}
			}
			return as, nil
		}
		host = ip
	}
	probe := netcheck.Probe{Protocol: p.Protocol, Host: host, Port: tgt.port, Path: p.Path, Query: p.Query,
		SourcePort: p.SourcePort, Timeout: timeout, Connect: connect}
	as := make([]attempt, n)
	one := func(i int) {
		as[i] = attemptOf(probe.Run(ctx, ns))
	}
	// Attempts run in parallel, unless they share a source port; a
	// probe that judges who answered sends its first attempt alone.
	if p.SourcePort != 0 {
		for i := range as {
			one(i)
		}
		return as, nil
	}
	first := 0
	if firstAlone(p) {
		one(0)
		first = 1
	}
	var wg sync.WaitGroup
	for i := first; i < len(as); i++ {
		wg.Go(func() { one(i) })
	}
	wg.Wait()
	return as, nil
}

// firstAlone tells whether a probe's first attempt goes before the others
// rather than with them: when the probe judges which Pods answered, the
// first connection stands for a client that has talked before, so that
// the state it leaves in the dataplane (a ClientIP affinity entry above
// all) is there for the rest. Thirty connections racing from nowhere would
// each pick an endpoint before any of them recorded its choice, and a
// Service that pins its clients would look as if it spread them.
func firstAlone(p *scenario.ProbeCheck) bool {
	return p.Expect.Responders != nil
}

// resolveFrom looks name up as the source would: a node asks the cluster's
// DNS for the full name; a Pod uses its DNS policy's server and search
// path (ClusterFirst: the cluster DNS, <namespace>.svc, svc, the domain).
func resolveFrom(ctx context.Context, ns cluster.Netns, src probeSource, name string, timeout time.Duration) (string, error) {
	server := cluster.DefaultClusterDNS
	var search []string
	ndots := 1
	if pod := src.podObj; pod != nil {
		policy := pod.Spec.DNSPolicy
		if policy == "" {
			policy = corev1.DNSClusterFirst
		}
		clusterFirst := policy == corev1.DNSClusterFirstWithHostNet || policy == corev1.DNSClusterFirst && !pod.Spec.HostNetwork
		if clusterFirst {
			d := cluster.DefaultDNSDomain
			search = []string{pod.Namespace + ".svc." + d, "svc." + d, d}
			ndots = 5
		}
		if c := pod.Spec.DNSConfig; c != nil {
			if len(c.Nameservers) > 0 {
				server = c.Nameservers[0]
			}
			search = append(search, c.Searches...)
		}
	}
	candidates := []string{name}
	if strings.Count(name, ".") < ndots && !strings.HasSuffix(name, ".") {
		candidates = nil
		for _, s := range search {
			candidates = append(candidates, name+"."+s)
		}
		candidates = append(candidates, name)
	}
	var last error
	for _, c := range candidates {
		lctx, cancel := context.WithTimeout(ctx, timeout)
		ips, err := netcheck.Lookup(lctx, ns, net.JoinHostPort(server, "53"), c, 0)
		cancel()
		if err == nil && len(ips) > 0 {
			return ips[0], nil
		}
		if err == nil {
			err = fmt.Errorf("no address for %s", c)
		}
		last = err
		if !errors.Is(err, netcheck.ErrNXDomain) {
			break // the server did not answer: the next name would not fare better
		}
	}
	return "", fmt.Errorf("could not resolve %s: %w", name, last)
}

// probeScript is a POSIX sh script that runs n attempts in parallel and
// prints one line per attempt: "@@ N RC OUTPUT" (the output on one line).
// It runs on nodes (Debian tools: curl, bash, dig) and in Pods (curl or
// busybox wget, nc, dig or busybox nslookup). Each attempt takes at most
// timeout; its TCP handshake (curl, bash's /dev/tcp) at most connect.
func probeScript(p *scenario.ProbeCheck, t probeTarget, fromNode bool, n int, timeout, connect time.Duration) string {
	secs := int(math.Ceil(timeout.Seconds()))
	tf := strconv.FormatFloat(timeout.Seconds(), 'f', -1, 64)
	cf := strconv.FormatFloat(connect.Seconds(), 'f', -1, 64)
	var b strings.Builder
	fmt.Fprintf(&b, "T=%s; TS=%d; C=%s; P=%d; H=%s\n", tf, secs, cf, t.port, shq(t.host))
	if t.resolve != "" {
		fmt.Fprintf(&b, "H=$(dig +short +time=%d +tries=1 @%s %s | grep -v '^;' | tail -n 1); [ -n \"$H\" ] || H=%s\n",
			secs, cluster.DefaultClusterDNS, shq(t.resolve), shq("could-not-resolve-"+t.resolve))
	}
	b.WriteString("one() {\n")
	hostPort := `$H:$P`
	if strings.Contains(t.host, ":") && net.ParseIP(t.host) != nil {
		hostPort = `[$H]:$P`
	}
	switch p.Protocol {
	case "http":
		path := p.Path
		if path == "" {
			path = "/"
		}
		url := "http://" + hostPort + path
		fmt.Fprintf(&b, "  if command -v curl >/dev/null 2>&1; then curl -sS --connect-timeout \"$C\" -m \"$T\" \"%s\"; else timeout $((TS+1)) wget -qO- \"%s\"; fi\n", url, url)
	case "tcp":
		// A tcp attempt is only the handshake.
		if fromNode {
			b.WriteString("  timeout \"$C\" bash -c 'exec 3<>/dev/tcp/'\"$H/$P\"\n")
		} else {
			b.WriteString("  if command -v bash >/dev/null 2>&1; then timeout \"$C\" bash -c 'exec 3<>/dev/tcp/'\"$H/$P\"; else nc -w \"$TS\" \"$H\" \"$P\" </dev/null; fi\n")
		}
	case "udp":
		b.WriteString("  printf 'hostname\\n' | timeout $((TS+1)) nc -u -w \"$TS\" \"$H\" \"$P\"\n")
	case "dns":
		bind := ""
		if p.SourcePort != 0 {
			bind = fmt.Sprintf("-b 0.0.0.0#%d ", p.SourcePort)
		}
		fmt.Fprintf(&b, "  if command -v dig >/dev/null 2>&1; then dig %s+short +time=\"$TS\" +tries=1 -p \"$P\" @\"$H\" %s; else timeout $((TS+1)) nslookup %s \"$H\"; fi\n", bind, shq(p.Query), shq(p.Query))
	}
	b.WriteString("}\n")
	// Attempts run in parallel, unless they share a source port; a
	// probe that judges who answered sends its first attempt alone.
	bg := "&"
	if p.SourcePort != 0 {
		bg = ";"
	}
	first := `""`
	if firstAlone(p) {
		first = `"$i" -eq 1`
	}
	fmt.Fprintf(&b, `run() { out=$(one 2>&1); rc=$?; printf '@@ %%s %%s %%s\n' "$1" "$rc" "$(printf '%%s' "$out" | tr '\n' ' ')"; }
i=0
while [ "$i" -lt %d ]; do
  i=$((i+1))
  if [ %s ]; then run "$i"; else run "$i" %s fi
done
wait
`, n, first, bg)
	return b.String()
}

// parseAttempts reads the lines probeScript prints.
func parseAttempts(out, protocol string) []attempt {
	var as []attempt
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, "@@ ")
		if !ok {
			continue
		}
		f := strings.SplitN(rest, " ", 3)
		if len(f) < 2 {
			continue
		}
		rc, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		text := ""
		if len(f) == 3 {
			text = strings.TrimSpace(f[2])
		}
		as = append(as, attemptOf(netcheck.FromShell(protocol, rc, text)))
	}
	return as
}

// attemptOf is an attempt's outcome as the grader keeps it: raw is what
// the learner is shown of an unexpected outcome.
func attemptOf(r netcheck.Result) attempt {
	raw := r.Detail
	if raw == "" {
		raw = r.Body
	}
	return attempt{outcome: r.Outcome, body: r.Body, raw: raw}
}

// outcomeWords counts outcomes for a message: "12 succeeded, 8 timed out".
func outcomeWords(as []attempt) string {
	counts := map[string]int{}
	for _, a := range as {
		counts[a.outcome]++
	}
	words := map[string]string{scenario.OutcomeSuccess: "succeeded", scenario.OutcomeRefused: "were refused",
		scenario.OutcomeTimeout: "timed out", "dns-failure": "could not resolve the name", netcheck.Error: "failed with an error the grader cannot classify"}
	var parts []string
	for _, o := range []string{scenario.OutcomeSuccess, scenario.OutcomeRefused, scenario.OutcomeTimeout, "dns-failure", netcheck.Error} {
		if counts[o] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[o], words[o]))
		}
	}
	return strings.Join(parts, ", ")
}

func (g *Grader) judgeProbe(ctx context.Context, cs kubernetes.Interface, p *scenario.ProbeCheck, src probeSource, tgt probeTarget, as []attempt) (string, error) {
	e := p.Expect
	ratio := e.Ratio
	if ratio == 0 {
		ratio = 1
	}
	need := int(math.Ceil(ratio*float64(len(as)) - 1e-9))
	matched := 0
	for _, a := range as {
		if a.outcome == e.Outcome {
			matched++
		}
	}
	what := fmt.Sprintf("%d %s probes from %s to %s: %s", len(as), p.Protocol, src.desc, tgt.desc, outcomeWords(as))
	if matched < need {
		want := map[string]string{scenario.OutcomeSuccess: "succeed", scenario.OutcomeRefused: "be refused", scenario.OutcomeTimeout: "time out"}[e.Outcome]
		example := ""
		for _, a := range as {
			if a.outcome != e.Outcome && a.raw != "" {
				example = " (for example: " + quote(a.raw) + ")"
				break
			}
		}
		if need == len(as) {
			return "", failf("%s; all of them should %s%s", what, want, example)
		}
		return "", failf("%s; at least %d should %s%s", what, need, want, example)
	}
	if e.Outcome != scenario.OutcomeSuccess {
		return what, nil
	}
	var bodies []string
	for _, a := range as {
		if a.outcome == scenario.OutcomeSuccess {
			bodies = append(bodies, a.body)
		}
	}
	if e.Body != "" {
		re, err := regexp.Compile(e.Body)
		if err != nil {
			return "", fmt.Errorf("the scenario's body expression: %w", err)
		}
		var seen []string
		for _, b := range bodies {
			b = strings.TrimSpace(b)
			if !re.MatchString(b) {
				return "", failf("%s; an answer said %s", what, quote(b))
			}
			if !slices.Contains(seen, b) {
				seen = append(seen, b)
			}
		}
		what += "; the answers said " + strings.Join(quoteAll(seen), ", ")
	}
	if r := e.Responders; r != nil {
		ns := r.Namespace
		if ns == "" {
			ns = "default"
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: r.PodSelector})
		if err != nil {
			return "", fmt.Errorf("listing Pods %s in %s: %w", r.PodSelector, ns, err)
		}
		allowed := map[string]bool{}
		bare := map[string]bool{}    // Pods no controller owns
		foreign := map[string]bool{} // Pods of a workload the setup did not make
		podNode := map[string]string{}
		w := workloadsOf(ctx)
		for _, pod := range pods.Items {
			// One rule for the catalog: a bare Pod the learner made is
			// no replica (nothing restarts or reschedules it); the
			// setup's own bare Pods are.
			if w != nil && metav1.GetControllerOf(&pod) == nil && !w.has("Pod", pod.Namespace, pod.Name) {
				bare[pod.Name] = true
				continue
			}
			if r.SetupOnly && w != nil && !w.owns(ctx, cs, &pod) {
				foreign[pod.Name] = true
				continue
			}
			allowed[pod.Name] = true
			podNode[pod.Name] = pod.Spec.NodeName
		}
		var zones map[string]string
		if r.SameZone {
			if zones, err = nodeZones(ctx, cs); err != nil {
				return "", err
			}
			if zones[src.nodeName] == "" {
				return "", failf("%s; the node %s that the probe starts from has no zone label (%s), so no answer can come from its zone", what, src.nodeName, zoneLabel)
			}
		}
		var seen []string
		for _, b := range bodies {
			if bare[b] {
				return "", failf("%s; an answer came from %s, a Pod no controller owns: a bare Pod is no replica (nothing restarts or reschedules it), so it does not count", what, quote(b))
			}
			if foreign[b] {
				return "", failf("%s; an answer came from %s, a Pod of a workload the scenario did not make: the task is about its own replicas, and another workload answering in their place leaves them as they were", what, quote(b))
			}
			if !allowed[b] {
				return "", failf("%s; an answer came from %s, which is not a Pod matching %s in %s", what, quote(b), r.PodSelector, ns)
			}
			if r.SameNode && podNode[b] != src.nodeName {
				return "", failf("%s; an answer came from %s on %s, not from a Pod on %s where the client runs", what, b, podNode[b], src.nodeName)
			}
			if r.SameZone && zones[podNode[b]] != zones[src.nodeName] {
				zone := zones[podNode[b]]
				if zone == "" {
					zone = "no zone"
				}
				return "", failf("%s; an answer came from %s on %s (%s), outside the client's zone %s", what, b, podNode[b], zone, zones[src.nodeName])
			}
			if !slices.Contains(seen, b) {
				seen = append(seen, b)
			}
		}
		slices.Sort(seen)
		atLeast := max(r.AtLeast, 1)
		if len(seen) < atLeast {
			return "", failf("%s; only %d Pod answered (%s), expected at least %d different Pods", what, len(seen), strings.Join(seen, ", "), atLeast)
		}
		var onNodes []string
		for _, pod := range seen {
			if n := podNode[pod]; !slices.Contains(onNodes, n) {
				onNodes = append(onNodes, n)
			}
		}
		slices.Sort(onNodes)
		if len(onNodes) < r.Nodes {
			return "", failf("%s; the answers came from Pods on %s only, expected Pods on at least %d different nodes", what, strings.Join(onNodes, ", "), r.Nodes)
		}
		what += "; answered by " + strings.Join(seen, ", ")
		if r.Nodes > 1 {
			what += " on " + strings.Join(onNodes, ", ")
		}
	}
	if e.ClientIP != "" {
		var ips []string
		for _, b := range bodies {
			host, _, err := net.SplitHostPort(strings.TrimSpace(b))
			if err != nil {
				host = strings.TrimSpace(b)
			}
			if !slices.Contains(ips, host) {
				ips = append(ips, host)
			}
			preserved := host == src.ip
			if e.ClientIP == "preserved" && !preserved {
				return "", failf("%s; the backend saw the client address %s instead of the client's own %s: the source address was masqueraded (SNAT)", what, host, src.ip)
			}
			if e.ClientIP == "masqueraded" && preserved {
				return "", failf("%s; the backend saw the client's own address %s, expected a node's address (masquerading)", what, host)
			}
		}
		what += "; the backend saw " + strings.Join(ips, ", ")
	}
	return what, nil
}

// quoteAll quotes each of ss for a message.
func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = quote(s)
	}
	return out
}

// zoneLabel is the well-known zone label of nodes.
const zoneLabel = "topology.kubernetes.io/zone"

// nodeZones maps node names to their zone label.
func nodeZones(ctx context.Context, cs kubernetes.Interface) (map[string]string, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the nodes: %w", err)
	}
	out := map[string]string{}
	for _, n := range nodes.Items {
		out[n.Name] = n.Labels[zoneLabel]
	}
	return out, nil
}

// secondaryAddress is an IPv4 address of node other than its InternalIP,
// on the interface that holds the InternalIP.
func (g *Grader) secondaryAddress(ctx context.Context, node string) (string, error) {
	nodes, err := g.Cluster.Nodes(ctx)
	if err != nil {
		return "", fmt.Errorf("listing the nodes: %w", err)
	}
	primary := ""
	for _, n := range nodes {
		if n.Name == node {
			primary = n.IP
		}
	}
	if primary == "" {
		return "", fmt.Errorf("cluster %s has no node %s", g.Cluster.Name(), node)
	}
	out, err := g.nodeOutput(ctx, node, "ip", "-o", "-4", "addr", "show")
	if err != nil {
		return "", err
	}
	iface := ""
	type addr struct{ iface, ip string }
	var addrs []addr
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[2] != "inet" {
			continue
		}
		ip, _, _ := strings.Cut(f[3], "/")
		addrs = append(addrs, addr{f[1], ip})
		if ip == primary {
			iface = f[1]
		}
	}
	for _, a := range addrs {
		if a.iface == iface && a.ip != primary {
			return a.ip, nil
		}
	}
	return "", failf("node %s has no address besides its InternalIP %s on %s", node, primary, iface)
}

func podDesc(ns string, pod *corev1.Pod) string {
	if pod.Spec.NodeName == "" {
		return "Pod " + ns + "/" + pod.Name
	}
	return "Pod " + ns + "/" + pod.Name + " on " + pod.Spec.NodeName
}
