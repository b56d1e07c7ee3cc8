package views

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/netcheck"
)

// target is one Service port to probe.
type target struct {
	service string // ns/name
	ip      string
	port    int
	label   string // "shop/web:80"
}

func (l *Feed) targets() []target {
	var out []target
	for _, s := range l.Services() {
		if s.ClusterIP == "" || s.ClusterIP == "None" {
			continue
		}
		for _, p := range s.Ports {
			if p.Protocol != "tcp" {
				continue
			}
			out = append(out, target{service: s.ID(), ip: s.ClusterIP, port: p.Port, label: fmt.Sprintf("%s:%d", s.ID(), p.Port)})
		}
	}
	return out
}

// conntrackTargets are the destinations of Service traffic: every
// ClusterIP (and external IP) port, and every NodePort on every node.
func (l *Feed) conntrackTargets() map[string]string {
	out := map[string]string{}
	for _, s := range l.Services() {
		for _, p := range s.Ports {
			for _, ip := range s.IPs {
				out[fmt.Sprintf("%s:%d", ip, p.Port)] = s.ID()
			}
			if p.NodePort != 0 {
				for _, n := range l.nodes {
					out[fmt.Sprintf("%s:%d", n.IP, p.NodePort)] = s.ID()
				}
			}
		}
	}
	return out
}

// nodeProbeScript probes each target with curl (one attempt, two seconds)
// and then lists the conntrack table, in one command per node and round.
func nodeProbeScript(ts []target) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "s=$(date +%%s%%N); body=$(curl -sS -m 2 http://%s:%d/hostname 2>&1); rc=$?; e=$(date +%%s%%N); printf '@@P %s %%s %%s %%s\\n' $rc $(( (e-s)/1000000 )) \"$(printf %%s \"$body\" | head -c 120 | tr '\\n' ' ')\"\n", t.ip, t.port, t.label)
	}
	b.WriteString("echo @@C; conntrack -L 2>/dev/null; exit 0\n")
	return b.String()
}

var probeLineRE = regexp.MustCompile(`^@@P (\S+) (\d+) (\d+) ?(.*)$`)

// parseNodeProbes reads the output of nodeProbeScript.
func parseNodeProbes(node, out string) (results []ProbeResult, conntrack string) {
	probes, ct, _ := strings.Cut(out, "@@C\n")
	for _, line := range strings.Split(probes, "\n") {
		m := probeLineRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rc, _ := strconv.Atoi(m[2])
		ms, _ := strconv.ParseInt(m[3], 10, 64)
		r := probeResult("node "+node, target{label: m[1]}, netcheck.FromShell("http", rc, m[4]))
		r.Millis = ms
		results = append(results, r)
	}
	return results, ct
}

// backendName is the answer of agnhost's /hostname (a Pod name), when the
// body looks like one.
func backendName(body string) string {
	body = strings.TrimSpace(body)
	if body == "" || len(body) > 63 || strings.ContainsAny(body, " <>{}") {
		return ""
	}
	return body
}

// nodeProbesInNetns probes each target from node with svclab's own HTTP
// client in the node's network namespace (one attempt, two seconds, as
// nodeProbeScript's curl) and lists the node's conntrack table with the
// host's conntrack there.
func (l *Feed) nodeProbesInNetns(ctx context.Context, nc cluster.NetnsCluster, node string, ts []target) ([]ProbeResult, string, error) {
	ns, err := nc.NodeNetns(node)
	if err != nil {
		return nil, "", err
	}
	results := make([]ProbeResult, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Go(func() {
			results[i] = probeResult("node "+node, t, httpProbe(t).Run(ctx, ns))
		})
	}
	ct, err := cluster.DataplaneOutput(ctx, l.cfg.Cluster, node, "conntrack", "-L")
	wg.Wait()
	return results, ct, err
}

// podProbeInNetns probes t from a client Pod with svclab's own HTTP client
// in the Pod's network namespace.
func (l *Feed) podProbeInNetns(ctx context.Context, nc cluster.NetnsCluster, pod string, t target) ProbeResult {
	ns, name := splitID(pod)
	src := "pod " + pod
	p, err := l.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ProbeResult{Source: src, Target: t.label, Outcome: "error", Detail: "cannot probe from Pod " + pod + ": " + err.Error()}
	}
	netns, err := nc.PodNetns(p)
	if err != nil {
		return ProbeResult{Source: src, Target: t.label, Outcome: "error", Detail: "cannot probe from Pod " + pod + ": " + err.Error()}
	}
	return probeResult(src, t, httpProbe(t).Run(ctx, netns))
}

// httpProbe is one HTTP attempt at t's /hostname (agnhost answers with its
// Pod's name).
func httpProbe(t target) netcheck.Probe {
	return netcheck.Probe{Protocol: "http", Host: t.ip, Port: t.port, Path: "/hostname", Timeout: 2 * time.Second}
}

func probeResult(source string, t target, r netcheck.Result) ProbeResult {
	out := ProbeResult{Source: source, Target: t.label, Millis: r.Duration.Milliseconds(), Outcome: r.Outcome}
	switch r.Outcome {
	case netcheck.Success:
		out.Backend = backendName(r.Body)
	case netcheck.Timeout:
		out.Detail = "no answer within 2s"
	default:
		out.Detail = r.Detail
	}
	return out
}

// podProbe probes t from a client Pod with wget (curl where there is no
// wget).
func (l *Feed) podProbe(ctx context.Context, pod string, t target) ProbeResult {
	ns, name := splitID(pod)
	url := fmt.Sprintf("http://%s:%d/hostname", t.ip, t.port)
	script := fmt.Sprintf(`if command -v wget >/dev/null; then wget -qO- -T 2 %s 2>&1; else curl -sS -m 2 %s 2>&1; fi; echo "@@rc=$?"`, url, url)
	out := cluster.NewCappedBuffer(64 << 10)
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := l.cfg.Pods.Exec(ctx, ns, name, "", []string{"sh", "-c", script}, out, out)
	millis := time.Since(start).Milliseconds()
	text, rcs, _ := strings.Cut(out.String(), "@@rc=")
	text = strings.TrimSpace(text)
	rc, convErr := strconv.Atoi(strings.TrimSpace(rcs))
	if convErr != nil {
		why := text
		if err != nil {
			why = err.Error()
		} else if why == "" {
			why = "the exec into the Pod ended without the probe's output"
		}
		return ProbeResult{Source: "pod " + pod, Target: t.label, Millis: millis, Outcome: netcheck.Error, Detail: "cannot run a probe in Pod " + pod + ": " + why}
	}
	r := probeResult("pod "+pod, t, netcheck.FromShell("http", rc, strings.ReplaceAll(text, "\n", " ")))
	r.Millis = millis
	return r
}

func (l *Feed) probeLoop(ctx context.Context) {
	prevCT := map[string]map[string]bool{}
	for {
		l.probeRound(ctx, prevCT)
		select {
		case <-ctx.Done():
			return
		case <-l.after(l.cfg.ProbeInterval):
		}
	}
}

func (l *Feed) probeRound(ctx context.Context, prevCT map[string]map[string]bool) {
	ts := l.targets()
	ctTargets := l.conntrackTargets()
	var mu sync.Mutex
	var results []ProbeResult
	var wg sync.WaitGroup
	script := nodeProbeScript(ts)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nc, inNetns := l.cfg.Cluster.(cluster.NetnsCluster)
	for _, n := range l.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rs []ProbeResult
			var ct string
			var err error
			if inNetns {
				// svclab's own probes and the host's conntrack, from the
				// node's network namespace.
				rs, ct, err = l.nodeProbesInNetns(rctx, nc, n.Name, ts)
			} else {
				out, errb := cluster.NewCappedBuffer(cluster.MaxDataplaneOutput), cluster.NewCappedBuffer(64<<10)
				err = l.cfg.Cluster.NodeExec(rctx, n.Name, []string{"bash", "-c", script}, cluster.Stdio{Stdout: out, Stderr: errb})
				rs, ct = parseNodeProbes(n.Name, out.String())
				if msg := strings.TrimSpace(errb.String()); err != nil && msg != "" {
					err = fmt.Errorf("%w %s", err, msg)
				}
			}
			if ctx.Err() != nil {
				return
			}
			v := ConntrackView{Node: n.Name}
			if err != nil {
				v.Error = fmt.Sprintf("reading the conntrack table of %s: %v", n.Name, err)
			} else {
				v.Entries = parseConntrack(ct, ctTargets)
				seen := map[string]bool{}
				mu.Lock()
				prev := prevCT[n.Name]
				for i := range v.Entries {
					k := v.Entries[i].key()
					seen[k] = true
					v.Entries[i].New = prev != nil && !prev[k]
				}
				prevCT[n.Name] = seen
				mu.Unlock()
				sort.SliceStable(v.Entries, func(i, j int) bool { return v.Entries[i].TTL > v.Entries[j].TTL })
			}
			l.bus.Publish(TopicConntrack(n.Name), v, false)
			mu.Lock()
			results = append(results, rs...)
			mu.Unlock()
		}()
	}
	if l.cfg.Pods != nil {
		for _, p := range l.cfg.Clients {
			for _, t := range ts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var r ProbeResult
					if inNetns {
						r = l.podProbeInNetns(rctx, nc, p, t)
					} else {
						r = l.podProbe(rctx, p, t)
					}
					mu.Lock()
					results = append(results, r)
					mu.Unlock()
				}()
			}
		}
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	sort.Slice(results, func(i, j int) bool {
		if results[i].Target != results[j].Target {
			return results[i].Target < results[j].Target
		}
		return results[i].Source < results[j].Source
	})
	l.mu.Lock()
	l.round++
	round := l.round
	l.mu.Unlock()
	l.bus.Publish(TopicProbes, ProbeView{Round: round, Results: results}, false)
}
