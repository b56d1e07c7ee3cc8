// Package viewstest is the fake lab cluster of the unit tests and
// benchmarks of the live views and the server: clustertest's fake cluster
// with a Service and its EndpointSlice, and answers for the node commands
// the views run (nft list table, the proxier's event stream, the probe and
// conntrack round, a terminal and its kubectl, the health watch).
package viewstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/clustertest"
	"github.com/svclab/svclab/lab/images"
	"github.com/svclab/svclab/lab/proxier/events"
)

// Cluster is the fake: a clustertest.Cluster whose node commands are
// answered as the views expect. Rules and events are per cluster (every
// node lists the same ruleset).
type Cluster struct {
	*clustertest.Cluster

	mu      sync.Mutex
	rules   string
	version int
	subs    map[chan events.Event]struct{}
	broken  map[string]bool
	// mode is what the proxiers answer on /proxyMode ("" nftables);
	// patches the fault switch patches posted to /faults, by node.
	mode    string
	patches []string
	// lastSync is what the proxiers' metrics give as their last sync.
	lastSync time.Time
	// programmed is what the proxiers answer on /programmed ("": no
	// such path, as a proxier other than svclab's); faultState what they
	// answer on GET /faults ("": no fault on).
	programmed, faultState string
}

// SetMode makes every node's proxier say it runs in mode.
func (c *Cluster) SetMode(mode string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mode = mode
}

// SetLastSync makes every node's proxier report t as its last sync (the
// zero time: none yet).
func (c *Cluster) SetLastSync(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastSync = t
}

// SetProgrammed makes every node's proxier answer body on /programmed
// ("": it has no such path).
func (c *Cluster) SetProgrammed(body string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.programmed = body
}

// SetFaultState makes every node's proxier answer body on GET /faults.
func (c *Cluster) SetFaultState(body string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faultState = body
}

// Patches are the fault switch patches posted to the proxiers, as
// "NODE BODY".
func (c *Cluster) Patches() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.patches...)
}

// Break breaks a part of the fake's health, as the health watch sees it:
// "fabric/NODE" (the control plane cannot reach NODE), "proxier/NODE"
// (its proxier has not synced for a minute), "proxier-dead/NODE" (no
// proxier answers), "dns" (CoreDNS does not answer). Mend undoes it.
func (c *Cluster) Break(part string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken == nil {
		c.broken = map[string]bool{}
	}
	c.broken[part] = true
}

// Mend undoes Break.
func (c *Cluster) Mend(part string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.broken, part)
}

func (c *Cluster) isBroken(part string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken[part]
}

// nodeOfIP is the name of the node with address ip.
func (c *Cluster) nodeOfIP(ctx context.Context, ip string) string {
	nodes, _ := c.Nodes(ctx)
	for _, n := range nodes {
		if n.IP == ip {
			return n.Name
		}
	}
	return ""
}

// Resizes are the terminal sizes set, as "rows R cols C".
func (c *Cluster) Resizes() []string {
	var out []string
	for _, sz := range c.TerminalSizes() {
		out = append(out, fmt.Sprintf("rows %d cols %d", sz.Rows, sz.Cols))
	}
	return out
}

// New returns a fake cluster named name with two nodes (a control plane
// and a worker), Service shop/web (ClusterIP 10.96.38.171, port 80) and its
// EndpointSlice with ready endpoints at the given addresses, and rules as
// every node's ruleset.
func New(name, rules string, endpoints ...string) *Cluster {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "svc-uid"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.38.171", ClusterIPs: []string{"10.96.38.171"}, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
	c := &Cluster{rules: rules, subs: map[chan events.Event]struct{}{}}
	c.Cluster = clustertest.NewCluster(name, clustertest.WithWorkers(1),
		clustertest.WithObjects(svc, Slice(endpoints...), readyNode(name+"-control-plane"), readyNode(name+"-worker")),
		clustertest.WithExec(c.exec))
	return c
}

// NewProvider returns a clustertest.Provider whose clusters are fakes of
// this package (New, with no endpoints) listing rules, so that the labs
// it creates have panels to show.
func NewProvider(rules string) *clustertest.Provider {
	p := clustertest.NewProvider()
	p.MakeWith(func(o cluster.CreateOptions) *clustertest.Cluster { return New(o.Name, rules).Cluster })
	return p
}

func readyNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}}}
}

// Slice is shop/web's EndpointSlice with ready endpoints at addrs.
func Slice(addrs ...string) *discoveryv1.EndpointSlice {
	port, name, proto := int32(8080), "http", corev1.ProtocolTCP
	ready := true
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "shop", Name: "web-abcde", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}
	for i, a := range addrs {
		node := "lab-worker"
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &ready},
			NodeName: &node, TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: fmt.Sprintf("web-%d", i)}})
	}
	return s
}

// SetRules replaces the ruleset, as nft would: nft monitor reports a new
// generation, and the proxier publishes a sync event.
func (c *Cluster) SetRules(rules string) {
	c.mu.Lock()
	c.rules = rules
	c.version++
	ev := events.Event{Seq: uint64(c.version), Time: time.Now(), Kind: events.KindSync, Mode: "nftables", RulesAdded: []string{fmt.Sprintf("change %d", c.version)}}
	for ch := range c.subs {
		select {
		case ch <- ev:
		default:
		}
	}
	c.mu.Unlock()
}

// Execs is how many times NodeExec ran a command starting with word.
func (c *Cluster) Execs(word string) int {
	n := 0
	for _, call := range c.Calls() {
		_, line, _ := strings.Cut(call, ": ")
		if first, _, _ := strings.Cut(line, " "); first == word {
			n++
		}
	}
	return n
}

// exec answers the views' node commands.
func (c *Cluster) exec(ctx context.Context, node string, cmd []string, stdio cluster.Stdio) error {
	out := stdio.Stdout
	if out == nil {
		out = io.Discard
	}
	if len(cmd) > 4 && cmd[0] == "sh" && cmd[3] == "sh" && strings.Contains(cmd[2], `"$@" &`) {
		cmd = cmd[4:] // the views' wrapper of long-running commands
	}
	line := strings.Join(cmd, " ")
	switch {
	case line == "nft list table ip kube-proxy":
		c.mu.Lock()
		r := c.rules
		c.mu.Unlock()
		_, err := io.WriteString(out, r)
		return err
	case line == "nft monitor":
		ch := make(chan events.Event, 64)
		c.mu.Lock()
		c.subs[ch] = struct{}{}
		c.mu.Unlock()
		defer func() { c.mu.Lock(); delete(c.subs, ch); c.mu.Unlock() }()
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case ev := <-ch:
				if _, err := fmt.Fprintf(out, "add rule ip kube-proxy services ...\n# new generation %d by process 1 (nft)\n", ev.Seq); err != nil {
					return err
				}
			}
		}
	case cmd[0] == "curl" && strings.HasSuffix(line, "/proxyMode"):
		c.mu.Lock()
		mode := c.mode
		c.mu.Unlock()
		if mode == "" {
			mode = "nftables"
		}
		return curlAnswer(out, http.StatusOK, mode)
	case cmd[0] == "curl" && strings.HasSuffix(line, "/metrics"):
		c.mu.Lock()
		last := c.lastSync
		c.mu.Unlock()
		v := 0.0
		if !last.IsZero() {
			v = float64(last.UnixMilli()) / 1000
		}
		return curlAnswer(out, http.StatusOK, fmt.Sprintf("# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge\nkubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv4\"} %g\n", v))
	case cmd[0] == "curl" && strings.HasSuffix(line, events.ProgrammedPath):
		c.mu.Lock()
		body := c.programmed
		c.mu.Unlock()
		if body == "" {
			return curlAnswer(out, http.StatusNotFound, "404 page not found\n")
		}
		return curlAnswer(out, http.StatusOK, body)
	case cmd[0] == "curl" && strings.HasSuffix(line, "/faults"):
		for i, a := range cmd {
			if a == "--data-raw" && i+1 < len(cmd) {
				c.mu.Lock()
				c.patches = append(c.patches, node+" "+cmd[i+1])
				c.mu.Unlock()
				return curlAnswer(out, http.StatusOK, "{}")
			}
		}
		c.mu.Lock()
		st := c.faultState
		c.mu.Unlock()
		if st == "" {
			st = "{}"
		}
		return curlAnswer(out, http.StatusOK, st)
	case cmd[0] == "curl" && strings.Contains(line, "/events"):
		ch := make(chan events.Event, 64)
		c.mu.Lock()
		c.subs[ch] = struct{}{}
		c.mu.Unlock()
		defer func() { c.mu.Lock(); delete(c.subs, ch); c.mu.Unlock() }()
		enc := json.NewEncoder(out)
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case ev := <-ch:
				if err := enc.Encode(ev); err != nil {
					return err
				}
			}
		}
	case cmd[0] == "env" && strings.HasSuffix(line, "bash -l"):
		// A terminal (NodeTerminal): the fake shell shows a prompt and
		// echoes what is typed, with a new prompt after each Enter.
		in := stdio.Stdin
		if in == nil {
			return errors.New("a terminal without input")
		}
		prompt := "root@" + node + ":~# "
		done := make(chan error, 1)
		go func() {
			if _, err := io.WriteString(out, prompt); err != nil {
				done <- err
				return
			}
			buf := make([]byte, 4<<10)
			for {
				n, err := in.Read(buf)
				if n > 0 {
					echo := strings.ReplaceAll(string(buf[:n]), "\r", "\r\n"+prompt)
					if _, werr := io.WriteString(out, echo); werr != nil {
						done <- werr
						return
					}
				}
				if err != nil {
					if err == io.EOF {
						err = nil
					}
					done <- err
					return
				}
			}
		}()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-done:
			return err
		}
	case cmd[0] == "sh" && len(cmd) == 3 && strings.HasPrefix(cmd[2], "curl -s -o /dev/null -m 2 http://"):
		// The health watch: can the control plane reach a node?
		ip := strings.Split(strings.TrimPrefix(cmd[2], "curl -s -o /dev/null -m 2 http://"), ":")[0]
		rc := "0"
		if c.isBroken("fabric/" + c.nodeOfIP(ctx, ip)) {
			rc = "28"
		}
		_, err := io.WriteString(out, rc+"\n")
		return err
	case cmd[0] == "sh" && len(cmd) == 3 && strings.HasPrefix(cmd[2], "curl -s -m 2 -w '\\n%{http_code}' http://127.0.0.1:10256/healthz"):
		// The health watch: the node's proxier.
		now := time.Now()
		switch {
		case c.isBroken("proxier-dead/" + node):
			_, err := io.WriteString(out, "\n000")
			return err
		case c.isBroken("proxier/" + node):
			_, err := fmt.Fprintf(out, `{"lastUpdated":%q,"currentTime":%q}`+"\n503", now.Add(-time.Minute).Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
			return err
		}
		_, err := fmt.Fprintf(out, `{"lastUpdated":%q,"currentTime":%q}`+"\n200", now.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
		return err
	case cmd[0] == "bash" && len(cmd) == 3 && strings.Contains(cmd[2], "/dev/udp/"):
		// The health watch: a DNS query; the answer's header.
		if c.isBroken("dns") {
			return nil
		}
		_, err := io.WriteString(out, " 53 4c 81 80 00 01 00 01\n")
		return err
	case cmd[0] == "bash" && len(cmd) == 3 && strings.Contains(cmd[2], "@@C"):
		var b strings.Builder
		for _, l := range strings.Split(cmd[2], "\n") {
			if i := strings.Index(l, "printf '@@P "); i >= 0 {
				label := strings.Fields(l[i+len("printf '@@P "):])[0]
				fmt.Fprintf(&b, "@@P %s 0 2 web-0\n", label)
			}
		}
		b.WriteString("@@C\ntcp      6 119 TIME_WAIT src=172.29.1.3 dst=10.96.38.171 sport=49108 dport=80 src=10.244.2.2 dst=172.29.1.3 sport=8080 dport=18832 [ASSURED] mark=0 use=1\n")
		_, err := io.WriteString(out, b.String())
		return err
	case len(cmd) == 3 && strings.Contains(cmd[2], path.Dir(images.KubePath)):
		// The control-plane terminal installs kubectl: the copy of
		// svclab-kube and its configuration are read and kept nowhere.
		if stdio.Stdin != nil {
			_, err := io.Copy(io.Discard, stdio.Stdin)
			return err
		}
		return nil
	}
	return fmt.Errorf("the fake cluster does not run %q", line)
}

// curlAnswer writes what curl prints for a request of cluster.NodeHTTP:
// the body, then the status.
func curlAnswer(out io.Writer, status int, body string) error {
	_, err := fmt.Fprintf(out, "%s%s%d", body, cluster.CurlStatusMark, status)
	return err
}
