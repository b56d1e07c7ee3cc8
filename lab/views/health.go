package views

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/netcheck"
	"github.com/svclab/svclab/lab/proxier/config"
	"github.com/svclab/svclab/lab/scenario"
)

// TopicHealth carries the lab's Health (retained: a new viewer sees the
// latest at once).
const TopicHealth = "health"

// States of a lab's Health.
const (
	// HealthChecking: no round has finished yet.
	HealthChecking = "checking"
	// HealthHealthy: every part that was checked works.
	HealthHealthy = "healthy"
	// HealthDegraded: the API answers but a part is broken (a node not
	// Ready, traffic between nodes, a proxier, DNS).
	HealthDegraded = "degraded"
	// HealthDown: the API or the nodes are gone; the views pause.
	HealthDown = "down"
)

// Parts of a lab's health, in the order the strip lists them.
const (
	PartAPI     = "api"
	PartNodes   = "nodes"
	PartFabric  = "fabric"
	PartProxier = scenario.HealthProxier
	PartDNS     = scenario.HealthDNS
)

// Health says, in a learner's words, whether the lab works.
type Health struct {
	State string `json:"state"`
	// Summary is one sentence for the status strip.
	Summary string `json:"summary"`
	// StartOver is set when starting the scenario over is the way back
	// to a working lab: the strip offers it, saying what it loses.
	StartOver bool         `json:"startOver,omitempty"`
	Parts     []HealthPart `json:"parts"`
	Checked   time.Time    `json:"checked"`
}

// HealthPart is one part of a Health.
type HealthPart struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	OK    bool   `json:"ok"`
	// Skipped: not checked (the scenario breaks it on purpose, or a part
	// it depends on is down).
	Skipped bool `json:"skipped,omitempty"`
	// Text says what was found, for a learner.
	Text string `json:"text"`
	// Detail is the raw error, for the "details" disclosure.
	Detail string `json:"detail,omitempty"`
}

// Health is the latest Health (State HealthChecking before the first
// round).
func (l *Feed) Health() Health {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.health.State == "" {
		return Health{State: HealthChecking, Summary: "Checking the lab …"}
	}
	return l.health
}

// healthInterval is the time between health rounds (stretched by Pace).
const healthInterval = 5 * time.Second

func (l *Feed) healthLoop(ctx context.Context) {
	for {
		h := l.checkHealth(ctx)
		if ctx.Err() != nil {
			return
		}
		l.mu.Lock()
		changed := l.health.State != h.State || l.health.Summary != h.Summary
		l.health = h
		l.mu.Unlock()
		l.bus.Publish(TopicHealth, h, false)
		if changed && h.State != HealthHealthy && h.State != HealthChecking {
			l.observed(TimelineEvent{Time: h.Checked, Kind: KindHealth, Level: "warning", Text: h.Summary})
		} else if changed && h.State == HealthHealthy {
			l.observed(TimelineEvent{Time: h.Checked, Kind: KindHealth, Text: "the lab is healthy again"})
		}
		select {
		case <-ctx.Done():
			return
		case <-l.after(healthInterval):
		}
	}
}

// KindHealth marks a change of the lab's health on the timeline.
const KindHealth = "health"

// checkHealth runs one round: the API first; the nodes, the traffic
// between them, every proxier and DNS only when the API answers.
func (l *Feed) checkHealth(ctx context.Context) Health {
	h := Health{Checked: time.Now()}
	api := HealthPart{ID: PartAPI, Title: "API server"}
	if err := l.apiReady(ctx); err != nil {
		api.Text, api.Detail = "The lab's Kubernetes API does not answer.", err.Error()
	} else {
		api.OK, api.Text = true, "answers"
	}
	h.Parts = append(h.Parts, api)

	nodes := HealthPart{ID: PartNodes, Title: "Nodes"}
	fabric := HealthPart{ID: PartFabric, Title: "Traffic between nodes"}
	proxier := HealthPart{ID: PartProxier, Title: "kube-proxy"}
	dns := HealthPart{ID: PartDNS, Title: "DNS"}
	reach, reachErr := l.healthReach()
	switch {
	case !api.OK:
		for _, p := range []*HealthPart{&nodes, &fabric, &proxier, &dns} {
			p.Skipped, p.Text = true, "not checked while the API is down"
		}
	case reachErr != nil:
		nodes.Text, nodes.Detail = "The lab's nodes are not running.", reachErr.Error()
		for _, p := range []*HealthPart{&fabric, &proxier, &dns} {
			p.Skipped, p.Text = true, "not checked while the nodes are down"
		}
	default:
		l.checkNodes(ctx, &nodes)
		l.checkFabric(ctx, reach, &fabric)
		if l.cfg.Disturbed[PartProxier] {
			proxier.Skipped, proxier.Text = true, "not watched here: this scenario is about the dataplane"
		} else {
			l.checkProxiers(ctx, reach, &proxier)
		}
		if l.cfg.Disturbed[PartDNS] {
			dns.Skipped, dns.Text = true, "not watched here: this scenario is about the dataplane"
		} else {
			l.checkDNS(ctx, reach, &dns)
		}
	}
	h.Parts = append(h.Parts, nodes, fabric, proxier, dns)
	h.State, h.Summary, h.StartOver = summarize(h.Parts)
	return h
}

// summarize turns the parts into the strip's state and sentence.
func summarize(parts []HealthPart) (state, summary string, startOver bool) {
	var broken []HealthPart
	var ok []string
	for _, p := range parts {
		switch {
		case p.Skipped:
		case p.OK:
			ok = append(ok, p.Title)
		default:
			broken = append(broken, p)
		}
	}
	if len(broken) == 0 {
		return HealthHealthy, "The lab is healthy (" + strings.Join(lowerFirst(ok), ", ") + ").", false
	}
	first := broken[0]
	if first.ID == PartAPI || (first.ID == PartNodes && strings.Contains(first.Text, "not running")) {
		return HealthDown, "The lab is down: " + lowerFirstOne(first.Text), true
	}
	msg := first.Text
	if len(broken) > 1 {
		msg += fmt.Sprintf(" (and %d more problem%s)", len(broken)-1, map[bool]string{true: "s", false: ""}[len(broken) > 2])
	}
	return HealthDegraded, msg, true
}

func lowerFirst(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = lowerFirstOne(x)
	}
	return out
}

// lowerFirstOne lowers a sentence's first letter, unless it starts a
// name (API, DNS, kube-proxy).
func lowerFirstOne(s string) string {
	if len(s) < 2 || s[1] < 'a' || s[1] > 'z' {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// apiReady asks the API server whether it is ready (/readyz), within 3 s.
func (l *Feed) apiReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return cluster.APIReady(ctx, l.cs)
}

// healthReach is how health rounds reach the nodes: from their network
// namespaces where the cluster has them, else by commands on the nodes.
type healthReach struct {
	nodes []cluster.Node
	cp    cluster.Node
	// dialer dials from the control plane's network namespace (nil: use
	// commands on the nodes).
	dialer netcheck.Dialer
}

func (l *Feed) healthReach() (healthReach, error) {
	r := healthReach{nodes: l.nodes}
	for _, n := range l.nodes {
		if n.Role == cluster.RoleControlPlane {
			r.cp = n
		}
	}
	if r.cp.Name == "" && len(l.nodes) > 0 {
		r.cp = l.nodes[0]
	}
	nc, ok := l.cfg.Cluster.(cluster.NetnsCluster)
	if !ok {
		return r, nil
	}
	for _, n := range l.nodes {
		ns, err := nc.NodeNetns(n.Name)
		if err != nil {
			return r, fmt.Errorf("node %s: %w", n.Name, err)
		}
		if n.Name == r.cp.Name {
			r.dialer = ns
		}
	}
	return r, nil
}

func (l *Feed) checkNodes(ctx context.Context, p *HealthPart) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	list, err := l.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		p.Text, p.Detail = "The nodes could not be listed.", err.Error()
		return
	}
	var notReady []string
	var detail []string
	for _, n := range list.Items {
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = c.Status == corev1.ConditionTrue
				if !ready {
					detail = append(detail, fmt.Sprintf("%s: %s %s", n.Name, c.Reason, c.Message))
				}
			}
		}
		if !ready {
			notReady = append(notReady, n.Name)
		}
	}
	switch {
	case len(list.Items) < len(l.nodes):
		p.Text = fmt.Sprintf("Only %d of the lab's %d nodes are registered.", len(list.Items), len(l.nodes))
	case len(notReady) == 1:
		p.Text, p.Detail = fmt.Sprintf("Node %s is not Ready.", notReady[0]), strings.Join(detail, "; ")
	case len(notReady) > 1:
		p.Text, p.Detail = fmt.Sprintf("Nodes %s are not Ready.", strings.Join(notReady, ", ")), strings.Join(detail, "; ")
	default:
		p.OK, p.Text = true, fmt.Sprintf("%d Ready", len(list.Items))
	}
}

// healthzURL is a node's proxier health endpoint.
func healthzURL(ip string) string {
	return "http://" + net.JoinHostPort(ip, strconv.Itoa(config.ProxyHealthzPort)) + "/healthz"
}

// checkFabric connects from the control plane to every other node's
// proxier health port: an answer or a refusal both mean packets flow.
func (l *Feed) checkFabric(ctx context.Context, r healthReach, p *HealthPart) {
	var cut, detail []string
	for _, n := range r.nodes {
		if n.Name == r.cp.Name {
			continue
		}
		if r.dialer != nil {
			res := netcheck.Probe{Protocol: "tcp", Host: n.IP, Port: config.ProxyHealthzPort, Timeout: 2 * time.Second}.Run(ctx, r.dialer)
			if res.Outcome != netcheck.Success && res.Outcome != netcheck.Refused {
				cut, detail = append(cut, n.Name), append(detail, fmt.Sprintf("%s → %s (%s): %s %s", r.cp.Name, n.Name, n.IP, res.Outcome, res.Detail))
			}
			continue
		}
		out, err := l.nodeCommand(ctx, r.cp.Name, "sh", "-c", fmt.Sprintf("curl -s -o /dev/null -m 2 %s; echo $?", healthzURL(n.IP)))
		rc := strings.TrimSpace(out)
		if err != nil || (rc != "0" && rc != "7" && rc != "22") {
			cut, detail = append(cut, n.Name), append(detail, fmt.Sprintf("%s → %s (%s): curl exit %s %v", r.cp.Name, n.Name, n.IP, rc, err))
		}
	}
	if len(cut) > 0 {
		p.Text, p.Detail = fmt.Sprintf("Traffic between the nodes does not flow: %s cannot reach %s.", r.cp.Name, strings.Join(cut, ", ")), strings.Join(detail, "; ")
		return
	}
	p.OK, p.Text = true, "flows"
}

// proxierHealth is what a proxier's /healthz answers.
type proxierHealth struct {
	LastUpdated time.Time `json:"lastUpdated"`
	CurrentTime time.Time `json:"currentTime"`
}

func (l *Feed) checkProxiers(ctx context.Context, r healthReach, p *HealthPart) {
	var bad, detail []string
	for _, n := range r.nodes {
		var status int
		var body string
		var err error
		if r.dialer != nil {
			status, body, err = httpGet(ctx, r.dialer, healthzURL(n.IP))
		} else {
			var out string
			out, err = l.nodeCommand(ctx, n.Name, "sh", "-c", "curl -s -m 2 -w '\\n%{http_code}' "+healthzURL("127.0.0.1"))
			if err == nil {
				i := strings.LastIndexByte(out, '\n')
				body = out[:max(i, 0)]
				status, _ = strconv.Atoi(strings.TrimSpace(out[i+1:]))
				if status == 0 {
					err = errors.New("no answer")
				}
			}
		}
		switch {
		case err != nil:
			bad, detail = append(bad, n.Name+" is not running"), append(detail, n.Name+": "+err.Error())
		case status != 200:
			var ph proxierHealth
			what := n.Name + " is not syncing its rules"
			if json.Unmarshal([]byte(body), &ph) == nil && !ph.LastUpdated.IsZero() && ph.CurrentTime.After(ph.LastUpdated) {
				what = fmt.Sprintf("%s has not synced its rules for %s", n.Name, ph.CurrentTime.Sub(ph.LastUpdated).Round(time.Second))
			}
			bad, detail = append(bad, what), append(detail, fmt.Sprintf("%s: HTTP %d %s", n.Name, status, strings.TrimSpace(body)))
		}
	}
	if len(bad) > 0 {
		p.Text, p.Detail = "kube-proxy on "+strings.Join(bad, "; on ")+".", strings.Join(detail, "; ")
		return
	}
	p.OK, p.Text = true, "syncing on every node"
}

// httpGet asks url from d's network namespace and returns the status and
// the body (at most 4 KiB).
func httpGet(ctx context.Context, d netcheck.Dialer, url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialFrom(ctx, network, "", addr)
	}}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return resp.StatusCode, string(b), nil
}

// dnsName is what the DNS check asks for.
const dnsName = "kubernetes.default.svc." + cluster.DefaultDNSDomain

func (l *Feed) checkDNS(ctx context.Context, r healthReach, p *HealthPart) {
	server := cluster.DefaultClusterDNS
	gctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	if svc, err := l.cs.CoreV1().Services("kube-system").Get(gctx, "kube-dns", metav1.GetOptions{}); err == nil && net.ParseIP(svc.Spec.ClusterIP) != nil {
		server = svc.Spec.ClusterIP
	}
	cancel()
	var err error
	if r.dialer != nil {
		var addrs []string
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		addrs, err = netcheck.Lookup(qctx, r.dialer, net.JoinHostPort(server, "53"), dnsName, 0)
		cancel()
		if err == nil && len(addrs) == 0 {
			err = errors.New("an answer without addresses")
		}
	} else {
		err = l.dnsByCommand(ctx, r.cp.Name, server)
	}
	if err != nil {
		p.Text, p.Detail = fmt.Sprintf("DNS does not answer: %s got no address for %s from %s.", r.cp.Name, dnsName, server), err.Error()
		return
	}
	p.OK, p.Text = true, "answers"
}

// dnsByCommand asks server for dnsName with bash's /dev/udp on node, for
// clusters whose nodes svclab cannot dial from (a DNS query by hand: the
// nodes of kind have no DNS client).
func (l *Feed) dnsByCommand(ctx context.Context, node, server string) error {
	var q strings.Builder
	q.WriteString(`\x53\x4c\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00`)
	for _, label := range strings.Split(dnsName, ".") {
		fmt.Fprintf(&q, `\x%02x%s`, len(label), label)
	}
	q.WriteString(`\x00\x00\x01\x00\x01`)
	script := fmt.Sprintf(`exec 3<>/dev/udp/%s/53 && printf '%s' >&3 && timeout 2 head -c 8 <&3 | od -An -tx1`, server, q.String())
	out, err := l.nodeCommand(ctx, node, "bash", "-c", script)
	if err != nil {
		return err
	}
	b := strings.Fields(out)
	if len(b) < 8 {
		return fmt.Errorf("no answer (%q)", strings.TrimSpace(out))
	}
	if rcode := b[3][1]; rcode != '0' {
		return fmt.Errorf("rcode %c", rcode)
	}
	if b[6] == "00" && b[7] == "00" {
		return errors.New("an answer without addresses")
	}
	return nil
}

// nodeCommand runs cmd on node (the backend's NodeExec) and returns its
// output.
func (l *Feed) nodeCommand(ctx context.Context, node string, cmd ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var out strings.Builder
	err := l.cfg.Cluster.NodeExec(ctx, node, cmd, cluster.Stdio{Stdout: &out})
	return out.String(), err
}
