package views

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/proxier/events"
	"github.com/svclab/svclab/lab/proxierctl"
)

// Topics of the bus.
const (
	TopicSlices   = "slices"
	TopicProbes   = "probes"
	TopicTimeline = "timeline"
	TopicNodes    = "nodes"
)

// TopicRules and TopicConntrack are the per-node topics.
func TopicRules(node string) string     { return "rules/" + node }
func TopicConntrack(node string) string { return "conntrack/" + node }

// PodExecutor runs a command in a Pod's container (grade.RESTPodExecutor
// is one).
type PodExecutor interface {
	Exec(ctx context.Context, namespace, pod, container string, cmd []string, stdout, stderr io.Writer) error
}

// Config says what a Feed watches.
type Config struct {
	Cluster cluster.Cluster
	// Client is the cluster's clientset (default: Cluster.Client()).
	Client kubernetes.Interface
	// Services are the scenario's Services, "namespace/name".
	Services []string
	// Clients are Pods ("namespace/name") that probe the Services too.
	Clients []string
	// Pods runs the client probes (nil: no probes from Pods).
	Pods PodExecutor
	// ProbeInterval is the time between probe rounds (default 1s);
	// RulesInterval the time between reads of the rules when no proxier
	// event asks for one (default 3s).
	ProbeInterval, RulesInterval time.Duration
	// Pace, when set, stretches both intervals by the factor it returns
	// (read before every wait; below 1 counts as 1): a server running
	// many labs on few CPUs slows them all down together rather than
	// starving each.
	Pace func() int
	// Observe, when set, sees every event the Feed itself adds to the
	// timeline (Kubernetes events, proxier syncs) — not those given to
	// Record — so that they can be kept for replay. It must not block.
	Observe func(TimelineEvent)
	// Since, when set, is when the attempt the Feed watches began:
	// Kubernetes events from before it (an earlier attempt's, in the same
	// namespaces) stay off the timeline.
	Since time.Time
	// Disturbed are the parts of the lab's health the scenario breaks on
	// purpose (scenario.Disturbed): the health watch leaves them alone.
	Disturbed map[string]bool
	Log       *slog.Logger
}

// Feed runs the collectors of one cluster's views.
type Feed struct {
	cfg    Config
	bus    *Bus
	cancel context.CancelFunc
	wg     sync.WaitGroup
	log    *slog.Logger
	cs     kubernetes.Interface

	mu       sync.Mutex
	nodes    []cluster.Node
	services map[string]ServiceInfo
	refresh  map[string]chan struct{}
	// prevEndpoints: service → address → endpoint, for change marks.
	prevEndpoints map[string]map[string]EndpointView
	svcListers    map[string]func() ([]*corev1.Service, []*discoveryv1.EndpointSlice)
	round         int
	health        Health
}

// Start starts the collectors; Stop ends them.
func Start(ctx context.Context, cfg Config) (*Feed, error) {
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = time.Second
	}
	if cfg.RulesInterval <= 0 {
		cfg.RulesInterval = 3 * time.Second
	}
	l := &Feed{cfg: cfg, bus: NewBus(300), log: cfg.Log, services: map[string]ServiceInfo{}, refresh: map[string]chan struct{}{}, prevEndpoints: map[string]map[string]EndpointView{}, svcListers: map[string]func() ([]*corev1.Service, []*discoveryv1.EndpointSlice){}}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	l.cs = cfg.Client
	if l.cs == nil {
		cs, err := cfg.Cluster.Client()
		if err != nil {
			return nil, fmt.Errorf("a client for cluster %s: %w", cfg.Cluster.Name(), err)
		}
		l.cs = cs
	}
	nodes, err := cfg.Cluster.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the nodes of cluster %s: %w", cfg.Cluster.Name(), err)
	}
	l.nodes = nodes
	for _, n := range nodes {
		l.refresh[n.Name] = make(chan struct{}, 1)
	}
	ctx, l.cancel = context.WithCancel(context.Background())
	infos := make([]NodeInfo, 0, len(nodes))
	for _, n := range nodes {
		infos = append(infos, NodeInfo{Name: n.Name, IP: n.IP, Role: string(n.Role)})
	}
	l.bus.Publish(TopicNodes, infos, false)
	// A dead API server is said in seconds, not after the informers'
	// wait for their first list.
	if err := l.apiReady(ctx); err != nil {
		l.cancel()
		return nil, fmt.Errorf("cluster %s: its API server does not answer: %w", cfg.Cluster.Name(), err)
	}
	if err := l.watchAPI(ctx); err != nil {
		l.cancel()
		return nil, err
	}
	for _, n := range nodes {
		l.goLoop(ctx, func(ctx context.Context) { l.rulesLoop(ctx, n.Name) })
		l.goLoop(ctx, func(ctx context.Context) { l.proxierEvents(ctx, n.Name) })
		l.goLoop(ctx, func(ctx context.Context) { l.monitorRules(ctx, n.Name) })
	}
	l.goLoop(ctx, l.probeLoop)
	l.goLoop(ctx, l.healthLoop)
	return l, nil
}

func (l *Feed) goLoop(ctx context.Context, f func(ctx context.Context)) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		f(ctx)
	}()
}

// Bus is where the Feed publishes its frames.
func (l *Feed) Bus() *Bus { return l.bus }

// Stop ends the collectors and the bus's subscriptions.
func (l *Feed) Stop() {
	l.cancel()
	l.wg.Wait()
	l.bus.Close()
}

// Record adds an entry to the timeline (a terminal command, a check).
func (l *Feed) Record(ev TimelineEvent) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	l.bus.Publish(TopicTimeline, ev, true)
}

// observed adds an event the Feed saw to the timeline.
func (l *Feed) observed(ev TimelineEvent) {
	ev = ev.bounded()
	l.bus.Publish(TopicTimeline, ev, true)
	if l.cfg.Observe != nil {
		l.cfg.Observe(ev)
	}
}

// Nodes are the cluster's nodes.
func (l *Feed) Nodes() []cluster.Node { return l.nodes }

// Services are the watched Services as last seen.
func (l *Feed) Services() []ServiceInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []ServiceInfo
	for _, id := range l.cfg.Services {
		if s, ok := l.services[id]; ok {
			out = append(out, s)
		}
	}
	return out
}

// RefreshRules asks for node's rules to be read now (all nodes if "").
func (l *Feed) RefreshRules(node string) {
	for n, ch := range l.refresh {
		if node == "" || n == node {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

func splitID(id string) (ns, name string) {
	ns, name, ok := strings.Cut(id, "/")
	if !ok {
		return "default", id
	}
	return ns, name
}

// watchAPI watches the Services, their EndpointSlices and the events of
// their namespaces.
func (l *Feed) watchAPI(ctx context.Context) error {
	byNS := map[string][]string{}
	for _, id := range l.cfg.Services {
		ns, _ := splitID(id)
		byNS[ns] = append(byNS[ns], id)
	}
	started := time.Now()
	var syncs []cache.InformerSynced
	for ns := range byNS {
		f := informers.NewSharedInformerFactoryWithOptions(l.cs, 0, informers.WithNamespace(ns), informers.WithTransform(trimObject))
		svcs := f.Core().V1().Services()
		slices := f.Discovery().V1().EndpointSlices()
		evs := f.Core().V1().Events()
		changed := cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { l.publishSlices() },
			UpdateFunc: func(any, any) { l.publishSlices() },
			DeleteFunc: func(any) { l.publishSlices() },
		}
		if _, err := svcs.Informer().AddEventHandler(changed); err != nil {
			return err
		}
		if _, err := slices.Informer().AddEventHandler(changed); err != nil {
			return err
		}
		onEvent := func(obj any) {
			if e, ok := obj.(*corev1.Event); ok {
				l.kubeEvent(e, started)
			}
		}
		if _, err := evs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onEvent, UpdateFunc: func(_, o any) { onEvent(o) }}); err != nil {
			return err
		}
		svcLister, sliceLister := svcs.Lister(), slices.Lister()
		l.svcListers[ns] = func() ([]*corev1.Service, []*discoveryv1.EndpointSlice) {
			s, _ := svcLister.Services(ns).List(labels.Everything())
			e, _ := sliceLister.EndpointSlices(ns).List(labels.Everything())
			return s, e
		}
		syncs = append(syncs, svcs.Informer().HasSynced, slices.Informer().HasSynced, evs.Informer().HasSynced)
		f.Start(ctx.Done())
		l.wg.Add(1)
		go func() { defer l.wg.Done(); <-ctx.Done(); f.Shutdown() }()
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(wctx.Done(), syncs...) {
		return fmt.Errorf("cluster %s: the API server did not list the Services and EndpointSlices in 30s", l.cfg.Cluster.Name())
	}
	l.publishSlices()
	return nil
}

// trimObject is what the views' informers keep of an object the lab
// wrote: no managed fields, and of an Event only what the timeline shows,
// each field cut to a bound (the API server bounds an Event's fields by
// the object's size only, and the informers' caches are svclab's memory,
// outside the lab's limits).
func trimObject(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Event:
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, UID: o.UID, ResourceVersion: o.ResourceVersion, CreationTimestamp: o.CreationTimestamp},
			InvolvedObject: corev1.ObjectReference{Kind: clip(o.InvolvedObject.Kind, 64), Name: clip(o.InvolvedObject.Name, 253)},
			Reason:         clip(o.Reason, 128),
			Message:        clip(o.Message, maxTimelineText),
			Source:         corev1.EventSource{Component: clip(o.Source.Component, maxTimelineSource)},
			Type:           clip(o.Type, 32),
			Count:          o.Count,
			LastTimestamp:  o.LastTimestamp,
			EventTime:      o.EventTime,
		}, nil
	case metav1.Object:
		o.SetManagedFields(nil)
	}
	return obj, nil
}

func (l *Feed) kubeEvent(e *corev1.Event, started time.Time) {
	t := e.LastTimestamp.Time
	if t.IsZero() {
		t = e.EventTime.Time
	}
	if t.IsZero() {
		t = e.CreationTimestamp.Time
	}
	// Event times have whole seconds.
	if !l.cfg.Since.IsZero() && t.Before(l.cfg.Since.Truncate(time.Second)) {
		return
	}
	level := "info"
	if e.Type == corev1.EventTypeWarning {
		level = "warning"
	}
	obj := strings.ToLower(e.InvolvedObject.Kind) + "/" + e.InvolvedObject.Name
	text := fmt.Sprintf("%s %s: %s", obj, e.Reason, e.Message)
	if e.Count > 1 {
		text += fmt.Sprintf(" (×%d)", e.Count)
	}
	l.observed(TimelineEvent{Time: t, Kind: KindKubernetes, Source: e.Source.Component, Text: text, Level: level})
}

// publishSlices rebuilds the EndpointSlice view from the informers' caches.
func (l *Feed) publishSlices() {
	l.mu.Lock()
	defer l.mu.Unlock()
	view := SlicesView{}
	rulesChanged := false
	for _, id := range l.cfg.Services {
		ns, name := splitID(id)
		list, ok := l.svcListers[ns]
		if !ok {
			continue
		}
		svcs, slices := list()
		ss := ServiceSlices{Service: id, Missing: true}
		var info ServiceInfo
		for _, s := range svcs {
			if s.Name != name {
				continue
			}
			ss.Missing = false
			info = serviceInfo(s)
			ss.ClusterIP, ss.Ports = info.ClusterIP, info.Ports
			ss.Selector = labels.SelectorFromSet(s.Spec.Selector).String()
		}
		prev := l.prevEndpoints[id]
		now := map[string]EndpointView{}
		sort.Slice(slices, func(i, j int) bool { return slices[i].Name < slices[j].Name })
		for _, sl := range slices {
			if sl.Labels[discoveryv1.LabelServiceName] != name {
				continue
			}
			sv := SliceView{Name: sl.Name}
			for _, p := range sl.Ports {
				pi := PortInfo{Protocol: "tcp"}
				if p.Name != nil {
					pi.Name = *p.Name
				}
				if p.Protocol != nil {
					pi.Protocol = strings.ToLower(string(*p.Protocol))
				}
				if p.Port != nil {
					pi.Port = int(*p.Port)
				}
				sv.Ports = append(sv.Ports, pi)
			}
			for _, ep := range sl.Endpoints {
				ev := endpointView(ep)
				if old, ok := prev[ev.Address]; !ok {
					ev.Change = "added"
				} else if old.Ready != ev.Ready || old.Serving != ev.Serving || old.Terminating != ev.Terminating || old.NodeName != ev.NodeName {
					ev.Change = "changed"
				}
				if prev == nil {
					ev.Change = ""
				}
				now[ev.Address] = ev
				sv.Endpoints = append(sv.Endpoints, ev)
			}
			ss.Slices = append(ss.Slices, sv)
		}
		for addr, old := range prev {
			if _, ok := now[addr]; !ok && len(ss.Slices) > 0 {
				old.Change = "removed"
				ss.Slices[0].Endpoints = append(ss.Slices[0].Endpoints, old)
			}
		}
		l.prevEndpoints[id] = now
		if old, ok := l.services[id]; !ok || old.ClusterIP != info.ClusterIP || fmt.Sprint(old.Ports) != fmt.Sprint(info.Ports) {
			rulesChanged = true
		}
		if ss.Missing {
			delete(l.services, id)
		} else {
			l.services[id] = info
		}
		view.Services = append(view.Services, ss)
	}
	l.bus.Publish(TopicSlices, view, false)
	if rulesChanged {
		go l.RefreshRules("")
	}
}

func serviceInfo(s *corev1.Service) ServiceInfo {
	info := ServiceInfo{Namespace: s.Namespace, Name: s.Name, ClusterIP: s.Spec.ClusterIP}
	for _, ip := range s.Spec.ClusterIPs {
		if ip != "None" {
			info.IPs = append(info.IPs, ip)
		}
	}
	info.IPs = append(info.IPs, s.Spec.ExternalIPs...)
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			info.IPs = append(info.IPs, in.IP)
		}
	}
	for _, p := range s.Spec.Ports {
		info.Ports = append(info.Ports, PortInfo{Name: p.Name, Protocol: strings.ToLower(string(p.Protocol)), Port: int(p.Port), NodePort: int(p.NodePort)})
	}
	return info
}

func endpointView(ep discoveryv1.Endpoint) EndpointView {
	ev := EndpointView{Address: strings.Join(ep.Addresses, ",")}
	c := ep.Conditions
	ev.Ready = c.Ready == nil || *c.Ready
	ev.Serving = c.Serving == nil || *c.Serving
	ev.Terminating = c.Terminating != nil && *c.Terminating
	if ep.NodeName != nil {
		ev.NodeName = *ep.NodeName
	}
	if ep.Zone != nil {
		ev.Zone = *ep.Zone
	}
	if ep.Hints != nil {
		var hs []string
		for _, z := range ep.Hints.ForZones {
			hs = append(hs, "zone:"+z.Name)
		}
		for _, n := range ep.Hints.ForNodes {
			hs = append(hs, "node:"+n.Name)
		}
		ev.Hints = strings.Join(hs, ",")
	}
	if ep.TargetRef != nil {
		ev.Target = ep.TargetRef.Name
	}
	return ev
}

// nodeOutput reads node's dataplane with cmd and returns its standard
// output (see cluster.DataplaneOutput: the host's tools in the node's
// network namespace where the cluster allows it, never the lab's).
func (l *Feed) nodeOutput(ctx context.Context, node string, cmd ...string) (string, error) {
	return cluster.DataplaneOutput(ctx, l.cfg.Cluster, node, cmd...)
}

// readRules reads node's proxy rules: kube-proxy's nftables table, or
// iptables-save when there is none.
func (l *Feed) readRules(ctx context.Context, node string) (mode, raw string, err error) {
	raw, err = l.nodeOutput(ctx, node, "nft", "list", "table", "ip", "kube-proxy")
	if err == nil {
		return "nftables", raw, nil
	}
	save, iptErr := l.nodeOutput(ctx, node, "iptables-save")
	if iptErr == nil && strings.Contains(save, "KUBE-SERVICES") {
		return "iptables", save, nil
	}
	return "", "", fmt.Errorf("node %s has neither kube-proxy's nftables table nor its iptables chains (is kube-proxy running there?): %w", node, err)
}

func (l *Feed) rulesLoop(ctx context.Context, node string) {
	var last RulesView
	var lastLines = map[string][]RuleLine{}
	lastServices := ""
	for {
		start := time.Now()
		mode, raw, err := l.readRules(ctx, node)
		if ctx.Err() != nil {
			return
		}
		services := l.Services()
		svcKey := fmt.Sprint(services)
		v := RulesView{Node: node, Mode: mode, Raw: raw, Changed: last.Changed}
		if err != nil {
			v.Error = err.Error()
		}
		if err != nil && last.Error != v.Error || err == nil && (raw != last.Raw || svcKey != lastServices || last.Error != "") {
			var groups []RuleGroup
			if mode == "nftables" {
				groups = nftGroups(parseNFT(raw), services)
			} else if mode == "iptables" {
				groups = iptablesGroups(raw, services)
			}
			for i, g := range groups {
				plain := append([]RuleLine(nil), g.Lines...)
				if prev, ok := lastLines[g.Service]; ok && last.Raw != "" {
					groups[i].Lines = diffLines(prev, g.Lines)
				}
				lastLines[g.Service] = plain
			}
			v.Groups = groups
			v.Changed = time.Now()
			l.bus.Publish(TopicRules(node), v, false)
			last, lastServices = v, svcKey
		}
		cost := time.Since(start)
		select {
		case <-ctx.Done():
			return
		case <-l.after(l.cfg.RulesInterval):
		case <-l.refresh[node]:
		}
		// A lab that commits rules in a tight loop (nft monitor tells
		// each commit) gets them read at most half the time (reading and
		// parsing are svclab's work, on the host's CPU) and at most every
		// minRulesGap.
		if wait := max(minRulesGap, 2*cost) - time.Since(start); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}
}

// minRulesGap is the shortest time between two readings of a node's rules.
const minRulesGap = 250 * time.Millisecond

// after is a channel that receives once d, stretched by Config.Pace, has
// passed.
func (l *Feed) after(d time.Duration) <-chan time.Time {
	if l.cfg.Pace != nil {
		d *= time.Duration(max(1, l.cfg.Pace()))
	}
	return time.After(d)
}

// monitorRules reads node's rules again whenever its ruleset changes,
// whoever changed it (the proxier, a fault, the learner): nft monitor
// prints a "new generation" line after each committed transaction.
func (l *Feed) monitorRules(ctx context.Context, node string) {
	l.follow(ctx, node, []string{"nft", "monitor"}, func(line []byte) {
		if bytes.HasPrefix(line, []byte("# new generation")) {
			l.RefreshRules(node)
		}
	})
}

// follow runs a long-lived command against node's dataplane (the host's
// program in its network namespace where the cluster allows it, else on
// the node) and hands each line of its output to f, starting it again
// (after a pause) whenever it ends, until ctx ends.
func (l *Feed) follow(ctx context.Context, node string, cmd []string, f func(line []byte)) {
	if nc, ok := l.cfg.Cluster.(cluster.NetnsCluster); ok {
		l.followStream(ctx, node, f, func(ctx context.Context) (io.ReadCloser, func() error, error) {
			ns, err := nc.NodeNetns(node)
			if err != nil {
				return nil, nil, err
			}
			x, err := ns.Command(ctx, cmd...)
			if err != nil {
				return nil, nil, err
			}
			out, err := x.StdoutPipe()
			if err != nil {
				return nil, nil, err
			}
			if err := x.Start(); err != nil {
				return nil, nil, err
			}
			return out, x.Wait, nil
		})
		return
	}
	for ctx.Err() == nil {
		pr, pw := io.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			sc := bufio.NewScanner(pr)
			sc.Buffer(make([]byte, 64*1024), 4<<20)
			for sc.Scan() {
				f(sc.Bytes())
			}
			io.Copy(io.Discard, pr)
		}()
		// Killing the command on the host leaves what it started in the
		// node running: the wrapper ends it when its input closes, which
		// happens when ctx ends (or the host side dies).
		// The input is a real pipe, so waiting for the command never waits
		// on a copy of it.
		wrapped := append([]string{"sh", "-c", `exec 3<&0; "$@" & p=$!; (cat <&3 >/dev/null; kill $p 2>/dev/null) & wait $p`, "sh"}, cmd...)
		inR, inW, err := os.Pipe()
		if err != nil {
			l.log.Error("a pipe for a node command", "err", err)
			pw.Close()
			<-done
			return
		}
		ended := make(chan struct{})
		go func() {
			select {
			case <-ctx.Done():
			case <-ended:
			}
			inW.Close()
		}()
		err = l.cfg.Cluster.NodeExec(ctx, node, wrapped, cluster.Stdio{Stdin: inR, Stdout: pw})
		close(ended)
		inR.Close()
		pw.Close()
		<-done
		if ctx.Err() != nil {
			return
		}
		l.log.Debug("a node command ended; starting it again", "node", node, "cmd", cmd, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}

// proxierEvents follows the proxier's sync events on node (its /events
// stream, read with curl on the node) into the timeline, and reads the
// rules again after each sync that changed them.
func (l *Feed) proxierEvents(ctx context.Context, node string) {
	handle := func(line []byte) {
		var ev events.Event
		if json.Unmarshal(line, &ev) == nil {
			l.proxierEvent(node, ev)
		}
	}
	const path = "/events?replay=0"
	nc, ok := l.cfg.Cluster.(cluster.NetnsCluster)
	if !ok {
		l.follow(ctx, node, []string{"curl", "-sSN", "--fail", "http://" + proxierctl.Addr() + path}, handle)
		return
	}
	// svclab's own HTTP client, from the node's network namespace.
	l.followStream(ctx, node, handle, func(ctx context.Context) (io.ReadCloser, func() error, error) {
		ns, err := nc.NodeNetns(node)
		if err != nil {
			return nil, nil, err
		}
		tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return ns.DialFrom(ctx, network, "", addr)
		}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+proxierctl.Addr()+path, nil)
		if err != nil {
			return nil, nil, err
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return nil, nil, err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, nil, fmt.Errorf("the proxier's events answered %s", resp.Status)
		}
		return resp.Body, func() error { tr.CloseIdleConnections(); return nil }, nil
	})
}

// followStream reads lines from the streams open makes, one after the
// other (after a pause when one ends), until ctx ends; wait reaps what
// made a stream once it is read to its end.
func (l *Feed) followStream(ctx context.Context, node string, f func(line []byte), open func(context.Context) (io.ReadCloser, func() error, error)) {
	for ctx.Err() == nil {
		r, wait, err := open(ctx)
		if err == nil {
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 64*1024), 4<<20)
			for sc.Scan() {
				f(sc.Bytes())
			}
			r.Close()
			err = wait()
		}
		if ctx.Err() != nil {
			return
		}
		l.log.Debug("a node stream ended; starting it again", "node", node, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}

func (l *Feed) proxierEvent(node string, ev events.Event) {
	changes := len(ev.RulesAdded) + len(ev.RulesRemoved)
	if changes > 0 || ev.Kind != events.KindSync {
		l.RefreshRules(node)
	}
	if ev.Kind == events.KindSync && changes == 0 && ev.Error == "" {
		return // a sync that changed nothing is not news
	}
	level, text := "info", ""
	switch ev.Kind {
	case events.KindSync:
		kind := "partial"
		if ev.Full {
			kind = "full (" + ev.Reason + ")"
		}
		text = fmt.Sprintf("%s sync in %.0f ms: +%d −%d rules", kind, ev.DurationSeconds*1000, len(ev.RulesAdded), len(ev.RulesRemoved))
		if len(ev.EndpointsChanged) > 0 {
			text += "; endpoints of " + strings.Join(ev.EndpointsChanged, ", ")
		}
		if len(ev.ServicesChanged) > 0 {
			text += "; Services " + strings.Join(ev.ServicesChanged, ", ")
		}
		if ev.Error != "" {
			level, text = "error", text+": "+ev.Error
		}
	case events.KindConntrack:
		text = fmt.Sprintf("deleted %d stale UDP conntrack entries", ev.ConntrackDeleted)
	default:
		level, text = "warning", ev.Kind+": "+ev.Message
	}
	l.observed(TimelineEvent{Time: ev.Time, Kind: KindProxier, Source: node, Text: text, Level: level})
}

// Path traces a new connection through the rules of the node it starts
// on. A request may name its source instead of giving its address:
// SourceName is a node (FromNode) or a Pod ("namespace/name"), and the
// path is traced on that node, or on the Pod's node.
func (l *Feed) Path(ctx context.Context, req PathRequest) (*Path, error) {
	if req.Port < 1 || req.Port > 65535 || req.Dest == "" {
		return nil, fmt.Errorf("choose a Service port to trace (port %d, address %q)", req.Port, req.Dest)
	}
	switch {
	case req.Source != "":
	case req.FromNode:
		for _, n := range l.nodes {
			if n.Name == req.SourceName {
				req.Node, req.Source = n.Name, n.IP
			}
		}
	case req.SourceName != "":
		ns, name := splitID(req.SourceName)
		pod, err := l.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("the source Pod %s: %w", req.SourceName, err)
		}
		if pod.Status.PodIP == "" || pod.Spec.NodeName == "" {
			return nil, fmt.Errorf("the source Pod %s has no address or node yet (it is %s)", req.SourceName, pod.Status.Phase)
		}
		req.Node, req.Source = pod.Spec.NodeName, pod.Status.PodIP
	}
	known := false
	for _, n := range l.nodes {
		known = known || n.Name == req.Node
	}
	if !known || req.Source == "" {
		return nil, fmt.Errorf("cluster %s has no node or Pod %q to trace from", l.cfg.Cluster.Name(), req.SourceName+req.Node)
	}
	mode, raw, err := l.readRules(ctx, req.Node)
	if err != nil {
		return nil, err
	}
	for _, n := range l.nodes {
		if n.Name == req.Node {
			req.NodeIP = n.IP
		}
	}
	var p *Path
	if mode == "iptables" {
		p = tracePathIPTables(raw, req)
	} else {
		p = tracePath(parseNFT(raw), req)
	}
	p.Request.Node = req.Node
	return p, nil
}
