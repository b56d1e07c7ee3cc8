package daemon

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/svclab/svclab/lab/proxier/conntrack"
	"github.com/svclab/svclab/lab/proxier/control"
	"github.com/svclab/svclab/lab/proxier/events"
	"github.com/svclab/svclab/lab/proxier/faults"
	"github.com/svclab/svclab/lab/proxier/healthcheck"
	"github.com/svclab/svclab/lab/proxier/metrics"
	"github.com/svclab/svclab/lab/proxier/model"
	"github.com/svclab/svclab/lab/proxier/runner"
)

// Full-sync reasons reported in events.
const (
	ReasonInitial      = "initial"
	ReasonPeriodic     = "periodic"
	ReasonAfterFailure = "after-failure"
	ReasonTopology     = "topology"
	ReasonCanary       = "canary"
	ReasonRequested    = "requested"
)

// DefaultRuleDiffLimit caps the rule lines of one event.
const DefaultRuleDiffLimit = 500

// ServiceHealth is the part of healthcheck.ServiceHealthServer a sync
// updates.
type ServiceHealth interface {
	SyncServices(ctx context.Context, ports map[types.NamespacedName]uint16) error
	SyncEndpoints(counts map[types.NamespacedName]int)
}

// Config configures a Proxier.
type Config struct {
	// Family is the IP family proxied (IPv4Protocol by default).
	Family v1.IPFamily
	// NodeName is this node; endpoints on it are local.
	NodeName string

	// MinSyncPeriod, SyncPeriod and FullSyncPeriod are kube-proxy's
	// minSyncPeriod (1s), syncPeriod (30s: the retry interval and half the
	// health timeout) and the full resync period (1h).
	MinSyncPeriod  time.Duration
	SyncPeriod     time.Duration
	FullSyncPeriod time.Duration

	// RuleDiffLimit caps the rules listed per event (0: the default);
	// negative disables rule diffs (no extra listing per sync).
	RuleDiffLimit int

	Applier Applier
	// Conntrack reconciles UDP flows; nil disables the reconciler.
	Conntrack conntrack.Interface
	// ServiceHealth serves healthCheckNodePorts; nil disables them.
	ServiceHealth ServiceHealth

	// Metrics, Events and Faults are created if nil.
	Metrics *metrics.Metrics
	Events  *events.Broker
	Faults  *faults.Switches

	// Control, when set, guards the teaching hooks /faults and /sync:
	// only requests signed with its private half pass (package control).
	// The faults are then covert: no log line, metric or event names
	// them, as nothing would name the failure they stand for.
	Control ed25519.PublicKey

	// Clock is the real clock unless a test fakes it.
	Clock  clock.WithDelayedExecution
	Logger *slog.Logger
}

// Proxier is the proxier daemon's core: object handlers, the sync loop
// and the teaching hooks. Create it with New, feed it objects (from
// informers or a file) and call Run.
type Proxier struct {
	cfg     Config
	logger  *slog.Logger
	clock   clock.WithDelayedExecution
	applier Applier
	metrics *metrics.Metrics
	events  *events.Broker
	faults  *faults.Switches
	health  *healthcheck.ProxyHealthServer
	runner  *runner.BoundedFrequencyRunner

	// syncMu is held for a whole sync (the runner's, or an initial one
	// called directly); mu guards the state the handlers change.
	syncMu     sync.Mutex
	mu         sync.Mutex
	st         *store
	needFull   bool
	fullReason string
	// inFlight is set while a sync works on changes it took from st;
	// programmedRV is st.seenRV as it was when the last successful
	// sync took its changes.
	inFlight     bool
	programmedRV uint64

	// Owned by the sync in progress (syncMu).
	builder         model.Builder
	lastApplied     *model.Snapshot
	lastFullSync    time.Time
	lastSyncAttempt time.Time
	largeCluster    bool
	delayed         clock.Timer
}

// New returns a Proxier. It does not sync until Run is called and both
// Services and EndpointSlices have been reported synced.
func New(cfg Config) (*Proxier, error) {
	if cfg.Applier == nil {
		return nil, errors.New("proxier: an applier is required")
	}
	if cfg.Family == "" {
		cfg.Family = v1.IPv4Protocol
	}
	if cfg.NodeName == "" {
		return nil, errors.New("proxier: a node name is required")
	}
	if cfg.SyncPeriod <= 0 {
		cfg.SyncPeriod = 30 * time.Second
	}
	if cfg.MinSyncPeriod < 0 {
		cfg.MinSyncPeriod = 0
	}
	if cfg.FullSyncPeriod <= 0 {
		cfg.FullSyncPeriod = time.Hour
	}
	if cfg.RuleDiffLimit == 0 {
		cfg.RuleDiffLimit = DefaultRuleDiffLimit
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(cfg.Applier.Mode())
	}
	if cfg.Events == nil {
		cfg.Events = events.NewBroker(200, cfg.Metrics.EventsDropped.Inc)
	}
	if cfg.Faults == nil {
		if cfg.Control != nil {
			cfg.Faults = faults.New(nil, nil)
		} else {
			cfg.Faults = faults.New(cfg.Logger, cfg.Metrics)
		}
	}
	if cfg.Control != nil {
		cfg.Metrics.Covert()
	}
	p := &Proxier{
		cfg:        cfg,
		logger:     cfg.Logger,
		clock:      cfg.Clock,
		applier:    cfg.Applier,
		metrics:    cfg.Metrics,
		events:     cfg.Events,
		faults:     cfg.Faults,
		st:         newStore(),
		needFull:   true,
		fullReason: ReasonInitial,
	}
	p.health = healthcheck.NewProxyHealthServer(2*cfg.SyncPeriod, p.Node, healthcheck.Counters{
		Healthz: cfg.Metrics.ProxyHealthzTotal, Livez: cfg.Metrics.ProxyLivezTotal,
	}, cfg.Clock)
	r, err := runner.New("sync-runner", p.syncProxyRules, cfg.MinSyncPeriod, cfg.SyncPeriod, cfg.FullSyncPeriod, cfg.Clock, cfg.Logger)
	if err != nil {
		return nil, err
	}
	p.runner = r
	p.faults.OnChange(p.onFaultChange)
	p.logger.InfoContext(context.Background(), "sync params", "mode", cfg.Applier.Mode(), "minSyncPeriod", cfg.MinSyncPeriod,
		"syncPeriod", cfg.SyncPeriod, "maxSyncPeriod", cfg.FullSyncPeriod)
	return p, nil
}

// Events is the sync-event stream.
func (p *Proxier) Events() *events.Broker { return p.events }

// Faults are the fault switches.
func (p *Proxier) Faults() *faults.Switches { return p.faults }

// Metrics are the proxier's metrics.
func (p *Proxier) Metrics() *metrics.Metrics { return p.metrics }

// Health is the proxy health server (/healthz, /livez).
func (p *Proxier) Health() *healthcheck.ProxyHealthServer { return p.health }

// Mode is the applier's mode.
func (p *Proxier) Mode() string { return p.applier.Mode() }

// Node returns this node's Node object, or nil.
func (p *Proxier) Node() *v1.Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st.node
}

// Run runs the sync loop until ctx is done.
func (p *Proxier) Run(ctx context.Context) {
	// As SyncLoop: report healthy at the start in case no sync ever
	// succeeds, and synthesize the "last queued" time.
	p.health.Updated(p.cfg.Family)
	p.metrics.SyncProxyRulesLastQueued.WithLabelValues(string(p.cfg.Family)).SetToCurrentTime()
	p.runner.Loop(ctx)
	p.mu.Lock()
	if p.delayed != nil {
		p.delayed.Stop()
	}
	p.mu.Unlock()
}

// Sync queues a sync as soon as minSyncPeriod allows.
func (p *Proxier) Sync() {
	p.health.QueuedUpdate(p.cfg.Family)
	p.metrics.SyncProxyRulesLastQueued.WithLabelValues(string(p.cfg.Family)).SetToCurrentTime()
	p.runner.Run()
}

// ForceFullSync queues a full sync (reason is reported in its event).
func (p *Proxier) ForceFullSync(reason string) {
	p.mu.Lock()
	p.setNeedFull(reason)
	p.mu.Unlock()
	p.Sync()
}

func (p *Proxier) setNeedFull(reason string) {
	if !p.needFull {
		p.fullReason = reason
	}
	p.needFull = true
}

func (p *Proxier) initialized() bool { return p.st.servicesSynced && p.st.slicesSynced }

func (p *Proxier) updatePendingGauges() {
	p.metrics.ServiceChangesPending.Set(float64(len(p.st.pendingServices)))
	p.metrics.EndpointChangesPending.Set(float64(len(p.st.pendingEndpoints)))
}

// OnServiceUpdate records a Service (nil new means deleted; nil old means
// added).
func (p *Proxier) OnServiceUpdate(old, svc *v1.Service) {
	var name types.NamespacedName
	switch {
	case svc != nil:
		name = nameOf(svc.Namespace, svc.Name)
	case old != nil:
		name = nameOf(old.Namespace, old.Name)
	default:
		return
	}
	p.mu.Lock()
	p.settle()
	changed := p.st.setService(name, svc)
	if changed {
		p.metrics.ServiceChangesTotal.Inc()
		p.updatePendingGauges()
	}
	ready := p.initialized()
	p.mu.Unlock()
	if changed && ready {
		p.Sync()
	}
}

// OnServicesSynced is called once the initial Services are known. As
// upstream's, it syncs at once, outside the sync runner: the first sync with
// both Services and EndpointSlices known programs the node straight away,
// without waiting for minSyncPeriod. Its error is logged, not retried (the
// runner's next run retries it).
func (p *Proxier) OnServicesSynced(ctx context.Context) {
	p.mu.Lock()
	p.st.servicesSynced = true
	p.mu.Unlock()
	_ = p.syncProxyRules(ctx)
}

// OnEndpointSliceUpdate records an EndpointSlice (nil new means deleted).
func (p *Proxier) OnEndpointSliceUpdate(old, slice *discovery.EndpointSlice) {
	var name types.NamespacedName
	switch {
	case slice != nil:
		name = nameOf(slice.Namespace, slice.Name)
	case old != nil:
		name = nameOf(old.Namespace, old.Name)
	default:
		return
	}
	p.mu.Lock()
	p.settle()
	changed := p.st.setSlice(name, slice)
	if changed {
		p.metrics.EndpointChangesTotal.Inc()
		p.updatePendingGauges()
	}
	ready := p.initialized()
	p.mu.Unlock()
	if changed && ready {
		p.Sync()
	}
}

// OnEndpointSlicesSynced is called once the initial EndpointSlices are
// known; it syncs at once, as OnServicesSynced.
func (p *Proxier) OnEndpointSlicesSynced(ctx context.Context) {
	p.mu.Lock()
	p.st.slicesSynced = true
	p.mu.Unlock()
	_ = p.syncProxyRules(ctx)
}

// OnNodeUpdate records this node's Node object (nil: deleted). A change of
// its topology labels forces a full sync (OnTopologyChange).
func (p *Proxier) OnNodeUpdate(node *v1.Node) {
	if node != nil && node.Name != p.cfg.NodeName {
		return
	}
	p.mu.Lock()
	old := p.st.node
	p.st.node = node
	topoChanged := !maps.Equal(topologyLabels(old), topologyLabels(node))
	if topoChanged {
		p.setNeedFull(ReasonTopology)
	}
	ready := p.initialized()
	p.mu.Unlock()
	if topoChanged {
		p.logger.Info("updated proxier node topology labels", "labels", topologyLabels(node))
		if ready {
			p.Sync()
		}
	}
}

// OnServiceCIDRsChanged records the cluster's ServiceCIDRs. As upstream,
// this does not trigger a sync; the next full sync uses them.
func (p *Proxier) OnServiceCIDRsChanged(cidrs []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.st.serviceCIDRs = append([]string(nil), cidrs...)
}

// ReplaceAll replaces every Service and EndpointSlice and the Node (as
// read from an objects file), records what changed and marks both kinds
// synced.
func (p *Proxier) ReplaceAll(services []*v1.Service, slices []*discovery.EndpointSlice, node *v1.Node) {
	p.mu.Lock()
	p.settle()
	changed := false
	seenSvc := map[types.NamespacedName]bool{}
	for _, svc := range services {
		n := nameOf(svc.Namespace, svc.Name)
		seenSvc[n] = true
		changed = p.st.setService(n, svc) || changed
	}
	for n := range p.st.services {
		if !seenSvc[n] {
			changed = p.st.setService(n, nil) || changed
		}
	}
	seenSlice := map[types.NamespacedName]bool{}
	for _, sl := range slices {
		n := nameOf(sl.Namespace, sl.Name)
		seenSlice[n] = true
		changed = p.st.setSlice(n, sl) || changed
	}
	for n := range p.st.slices {
		if !seenSlice[n] {
			changed = p.st.setSlice(n, nil) || changed
		}
	}
	wasReady := p.initialized()
	p.st.servicesSynced, p.st.slicesSynced = true, true
	p.updatePendingGauges()
	p.mu.Unlock()
	p.OnNodeUpdate(node)
	if changed || !wasReady {
		p.Sync()
	}
}

func (p *Proxier) onFaultChange(old, cur faults.State) {
	if !p.covert() {
		p.events.Publish(events.Event{
			Kind: events.KindFault, Mode: p.Mode(), Family: string(p.cfg.Family),
			Faults: cur.Active(), Message: faultMessage(cur),
		})
	}
	// Any change may unblock or reshape a sync.
	p.Sync()
}

// covert tells whether the faults must not announce themselves (see
// Config.Control).
func (p *Proxier) covert() bool { return p.cfg.Control != nil }

func faultMessage(s faults.State) string {
	b, _ := json.Marshal(s)
	return "fault switches: " + string(b)
}

// syncProxyRules is the runner's function: one sync attempt. The initial
// syncs call it directly too; syncMu keeps one sync at a time.
func (p *Proxier) syncProxyRules(ctx context.Context) error {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	fs := p.faults.State()
	family := string(p.cfg.Family)

	p.mu.Lock()
	if !p.initialized() {
		p.mu.Unlock()
		p.logger.DebugContext(ctx, "not syncing until Services and EndpointSlices have been received")
		return nil
	}
	if fs.StopSyncing {
		p.mu.Unlock()
		if !p.covert() {
			p.metrics.SyncsSkipped.WithLabelValues(faults.StopSyncing).Inc()
			p.logger.WarnContext(ctx, "FAULT stop-syncing: not syncing rules; the previous rules stay in place")
			p.events.Publish(events.Event{Kind: events.KindSkipped, Mode: p.Mode(), Family: family, Faults: fs.Active(),
				Message: "sync skipped: the stop-syncing fault is on"})
		}
		return nil
	}
	now := p.clock.Now()
	if iv := fs.SyncInterval(); iv > 0 && !p.lastSyncAttempt.IsZero() {
		if wait := p.lastSyncAttempt.Add(iv).Sub(now); wait > 0 {
			first := p.delayed == nil
			if first {
				p.delayed = p.clock.AfterFunc(wait, func() {
					p.mu.Lock()
					p.delayed = nil
					p.mu.Unlock()
					p.Sync()
				})
			}
			p.mu.Unlock()
			if first && !p.covert() {
				p.metrics.SyncsSkipped.WithLabelValues(faults.SyncEvery).Inc()
				p.logger.WarnContext(ctx, "FAULT sync-every: delaying sync", "in", wait.Round(time.Millisecond))
				p.events.Publish(events.Event{Kind: events.KindSkipped, Mode: p.Mode(), Family: family, Faults: fs.Active(),
					Message: fmt.Sprintf("sync delayed %s by the sync-every fault (%ds)", wait.Round(time.Millisecond), fs.SyncEverySeconds)})
			}
			return nil
		}
	}
	p.lastSyncAttempt = now

	full, reason := p.needFull, p.fullReason
	// Avoid regular full syncs for large clusters (iptables).
	if !full && !p.largeCluster && now.Sub(p.lastFullSync) > p.cfg.FullSyncPeriod {
		full, reason = true, ReasonPeriodic
	}
	p.needFull, p.fullReason = false, ""
	services, slices := p.st.lists()
	node := p.st.node
	cidrs := append([]string(nil), p.st.serviceCIDRs...)
	pendingSvcs, pendingEps, triggers := p.st.takePending()
	takenRV := p.st.seenRV
	p.inFlight = true
	p.updatePendingGauges()
	p.mu.Unlock()

	start := p.clock.Now()
	ev := events.Event{Kind: events.KindSync, Mode: p.Mode(), Family: family, Faults: fs.Active(),
		ServicesChanged: sortedNames(pendingSvcs), EndpointsChanged: sortedNames(pendingEps)}
	fail := func(stage string, err error) error {
		p.mu.Lock()
		p.setNeedFull(ReasonAfterFailure)
		p.st.restorePending(pendingSvcs, pendingEps)
		p.inFlight = false
		p.mu.Unlock()
		p.metrics.SyncFailures.WithLabelValues(stage, p.Mode()).Inc()
		ev.Error = err.Error()
		ev.DurationSeconds = p.clock.Since(start).Seconds()
		p.events.Publish(ev)
		p.logger.ErrorContext(ctx, "sync failed; the previous rules stay in place, retrying with a full sync", "stage", stage, "retryIn", p.cfg.SyncPeriod, "err", err)
		return err
	}

	snap, err := p.builder.Build(ctx, p.logger, model.Input{Family: p.cfg.Family, Node: node, NodeName: p.cfg.NodeName, Services: services, EndpointSlices: slices})
	if err != nil {
		return fail("model", err)
	}
	omitted := 0
	if nn, ok := fs.OmittedService(); ok {
		kept := snap.Ports[:0:0]
		for _, sp := range snap.Ports {
			if sp.Name.NamespacedName == nn {
				omitted++
				continue
			}
			kept = append(kept, sp)
		}
		snap.Ports = kept
		if omitted > 0 {
			p.logger.WarnContext(ctx, "FAULT omit-service: leaving the Service out of the rules", "service", nn.String(), "ports", omitted)
		}
	}
	p.metrics.ServicesOmitted.Set(float64(omitted))

	var before []string
	diff := p.cfg.RuleDiffLimit > 0
	if diff {
		if before, err = p.applier.Rules(ctx); err != nil {
			p.logger.DebugContext(ctx, "cannot list rules for the event diff", "err", err)
			diff = false
		}
	}

	p.applier.SetServiceCIDRs(cidrs)
	p.logger.DebugContext(ctx, "syncing rules", "mode", p.Mode(), "fullSync", full, "reason", reason)
	applied, err := p.applier.Apply(ctx, snap, full)
	elapsed := p.clock.Since(start)
	if applied != nil {
		full = applied.Full
		if applied.Full && reason == "" {
			reason = ReasonAfterFailure
		}
		ev.ChainsRewritten = namesOf(applied.Rewritten)
		if applied.CleanupFailed {
			p.metrics.NFTablesCleanupFailures.WithLabelValues(family).Inc()
		}
	}
	ev.Full, ev.Reason = full, reason
	if !full {
		ev.Reason = ""
	}
	p.metrics.SyncProxyRulesLatency.WithLabelValues(family).Observe(elapsed.Seconds())
	if full {
		p.metrics.SyncFullProxyRulesLatency.WithLabelValues(family).Observe(elapsed.Seconds())
	} else {
		p.metrics.SyncPartialProxyRulesLatency.WithLabelValues(family).Observe(elapsed.Seconds())
	}
	if err != nil {
		switch p.Mode() {
		case "nftables":
			p.metrics.NFTablesSyncFailures.WithLabelValues(family).Inc()
		case "iptables":
			p.metrics.IPTablesRestoreFailures.WithLabelValues(family).Inc()
			if !full {
				p.metrics.IPTablesPartialRestoreFailure.WithLabelValues(family).Inc()
			}
		}
		return fail("apply", err)
	}
	if full {
		p.lastFullSync = p.clock.Now()
	}
	p.largeCluster = applied.LargeClusterMode
	for table, n := range applied.RulesWritten {
		p.metrics.IPTablesRulesLastSync.WithLabelValues(table, family).Set(float64(n))
	}

	// Bookkeeping after a successful sync, in upstream's order.
	for _, ts := range triggers {
		for _, t := range ts {
			p.metrics.NetworkProgrammingLatency.WithLabelValues(family).Observe(p.clock.Since(t).Seconds())
		}
	}
	internal, external := noLocalEndpoints(snap)
	p.metrics.NoLocalEndpointsTotal.WithLabelValues("internal", family).Set(float64(internal))
	p.metrics.NoLocalEndpointsTotal.WithLabelValues("external", family).Set(float64(external))
	p.health.Updated(p.cfg.Family)
	p.metrics.SyncProxyRulesLastTimestamp.WithLabelValues(family).SetToCurrentTime()
	if p.cfg.ServiceHealth != nil {
		if err := p.cfg.ServiceHealth.SyncServices(ctx, healthCheckNodePorts(snap)); err != nil {
			p.logger.ErrorContext(ctx, "error syncing healthcheck services", "err", err)
		}
		p.cfg.ServiceHealth.SyncEndpoints(localReadyEndpoints(snap))
	}

	if diff {
		if after, err := p.applier.Rules(ctx); err == nil {
			ev.RulesAdded, ev.RulesRemoved, ev.RulesTruncated = events.DiffRules(before, after, p.cfg.RuleDiffLimit)
			if p.Mode() == "iptables" {
				// kubeproxy_sync_proxy_rules_iptables_total: rules owned
				// by kube-proxy now in each table.
				count := map[string]int{"filter": 0, "nat": 0}
				for _, l := range after {
					if table, _, ok := strings.Cut(strings.TrimPrefix(l, "-t "), " "); ok {
						count[table]++
					}
				}
				for table, n := range count {
					p.metrics.IPTablesRulesTotal.WithLabelValues(table, family).Set(float64(n))
				}
			}
		}
	}

	if p.cfg.Conntrack != nil && conntrackCleanupRequired(p.lastApplied, snap) {
		if fs.SkipConntrackCleanup {
			if !p.covert() {
				p.metrics.ConntrackSkipped.WithLabelValues(family).Inc()
				p.logger.WarnContext(ctx, "FAULT skip-conntrack-cleanup: not reconciling UDP conntrack entries")
				ev.Message = "UDP conntrack cleanup skipped by the skip-conntrack-cleanup fault"
			}
		} else {
			res, err := conntrack.CleanStaleEntries(ctx, p.logger, p.cfg.Conntrack, snap)
			p.metrics.ConntrackReconcileLatency.WithLabelValues(family).Observe(res.Duration.Seconds())
			p.metrics.ConntrackDeletedEntries.WithLabelValues(family).Add(float64(res.Deleted))
			ev.ConntrackDeleted = res.Deleted
			if err != nil {
				p.logger.ErrorContext(ctx, "failed to reconcile conntrack entries", "err", err)
			}
		}
	}
	p.lastApplied = snap
	p.mu.Lock()
	p.inFlight = false
	p.programmedRV = max(p.programmedRV, takenRV)
	p.mu.Unlock()
	ev.DurationSeconds = p.clock.Since(start).Seconds()
	p.events.Publish(ev)
	p.logger.InfoContext(ctx, "synced rules", "mode", p.Mode(), "full", full, "reason", ev.Reason, "elapsed", elapsed.Round(time.Microsecond),
		"servicesChanged", len(ev.ServicesChanged), "endpointsChanged", len(ev.EndpointsChanged),
		"rulesAdded", len(ev.RulesAdded), "rulesRemoved", len(ev.RulesRemoved))
	// A full sync of a large cluster builds its whole ruleset and the nft
	// or iptables-restore input at once: give that memory back to the
	// system now rather than keeping it as heap headroom until the next
	// full sync (an hour later).
	if full && len(snap.Ports) >= freeMemoryPorts {
		debug.FreeOSMemory()
	}
	return nil
}

// freeMemoryPorts is the size of a full sync after which the daemon
// returns freed memory to the system.
const freeMemoryPorts = 1000

// noLocalEndpoints counts the Service ports whose internal or external
// traffic policy is Local and that have endpoints, but none on this node.
func noLocalEndpoints(snap *model.Snapshot) (internal, external int) {
	for _, sp := range snap.Ports {
		cat := snap.Categorize(sp)
		if !cat.HasAnyEndpoints {
			continue
		}
		if sp.InternalPolicyLocal && len(cat.Local) == 0 {
			internal++
		}
		if sp.ExternalPolicyLocal && len(cat.Local) == 0 {
			external++
		}
	}
	return internal, external
}

// healthCheckNodePorts is ServicePortMap.HealthCheckNodePorts.
func healthCheckNodePorts(snap *model.Snapshot) map[types.NamespacedName]uint16 {
	out := map[types.NamespacedName]uint16{}
	for _, sp := range snap.Ports {
		if sp.HealthCheckNodePort != 0 {
			out[sp.Name.NamespacedName] = uint16(sp.HealthCheckNodePort)
		}
	}
	return out
}

// localReadyEndpoints is EndpointsMap.LocalReadyEndpoints: the number of
// distinct local ready endpoint IPs per Service.
func localReadyEndpoints(snap *model.Snapshot) map[types.NamespacedName]int {
	ips := map[types.NamespacedName]map[string]bool{}
	for _, sp := range snap.Ports {
		for _, ep := range sp.Endpoints {
			if ep.Local && ep.Ready {
				if ips[sp.Name.NamespacedName] == nil {
					ips[sp.Name.NamespacedName] = map[string]bool{}
				}
				ips[sp.Name.NamespacedName][ep.IP] = true
			}
		}
	}
	out := make(map[types.NamespacedName]int, len(ips))
	for n, set := range ips {
		out[n] = len(set)
	}
	return out
}

// conntrackCleanupRequired mirrors EndpointsMap.Update's
// ConntrackCleanupRequired: some Service whose endpoints changed has a
// UDP port (before or after the change).
func conntrackCleanupRequired(prev, cur *model.Snapshot) bool {
	type svcState struct {
		udp       bool
		endpoints map[model.ServicePortName][]model.Endpoint
	}
	group := func(s *model.Snapshot) map[types.NamespacedName]*svcState {
		out := map[types.NamespacedName]*svcState{}
		if s == nil {
			return out
		}
		for _, sp := range s.Ports {
			st := out[sp.Name.NamespacedName]
			if st == nil {
				st = &svcState{endpoints: map[model.ServicePortName][]model.Endpoint{}}
				out[sp.Name.NamespacedName] = st
			}
			st.udp = st.udp || sp.Protocol == v1.ProtocolUDP
			if len(sp.Endpoints) > 0 {
				st.endpoints[sp.Name] = sp.Endpoints
			}
		}
		return out
	}
	p, c := group(prev), group(cur)
	check := func(n types.NamespacedName) bool {
		a, b := p[n], c[n]
		udp := (a != nil && a.udp) || (b != nil && b.udp)
		if !udp {
			return false
		}
		var ea, eb map[model.ServicePortName][]model.Endpoint
		if a != nil {
			ea = a.endpoints
		}
		if b != nil {
			eb = b.endpoints
		}
		if len(ea) == 0 && len(eb) == 0 {
			return false
		}
		return !reflect.DeepEqual(ea, eb)
	}
	for n := range c {
		if check(n) {
			return true
		}
	}
	for n := range p {
		if _, ok := c[n]; !ok && check(n) {
			return true
		}
	}
	return false
}

// Programmed is how far the node's rules follow the API: the highest
// resourceVersion up to which every Service and EndpointSlice change the
// proxier was handed is in its rules (and conntrack), and which fault
// holds its syncs back (faults.StopSyncing, faults.SyncEvery, or a long
// minSyncPeriod, HeldMinSyncPeriod: it will not catch up soon), faults
// unless they are covert (svclab's labs: a learner must
// not read the fault here; svclab asks /faults instead); served at
// events.ProgrammedPath. Everything seen counts once nothing is pending
// and no sync is under way (changes that do not touch the rules included).
func (p *Proxier) Programmed() (rv uint64, held string) {
	if fs := p.faults.State(); !p.covert() {
		switch {
		case fs.StopSyncing:
			held = faults.StopSyncing
		case fs.SyncInterval() > 0:
			held = faults.SyncEvery
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idle() {
		return p.st.seenRV, held
	}
	if held == "" && p.cfg.MinSyncPeriod >= slowMinSyncPeriod {
		// Its configuration, not a fault: anyone may read it.
		held = HeldMinSyncPeriod
	}
	return p.programmedRV, held
}

// HeldMinSyncPeriod is what Programmed says holds syncs back when the
// proxier's minSyncPeriod is slowMinSyncPeriod or more: pending changes
// may wait that long.
const HeldMinSyncPeriod = "min-sync-period"

const slowMinSyncPeriod = 5 * time.Second

// idle tells whether every change seen is in the rules: nothing pending,
// no sync under way (p.mu held).
func (p *Proxier) idle() bool {
	return p.initialized() && !p.inFlight && len(p.st.pendingServices) == 0 && len(p.st.pendingEndpoints) == 0
}

// settle is called (p.mu held) before a handler records an object: when
// idle, everything seen so far counts as programmed from now on.
func (p *Proxier) settle() {
	if p.idle() {
		p.programmedRV = max(p.programmedRV, p.st.seenRV)
	}
}

// MetricsHandler serves the metrics address: /proxyMode, /metrics,
// /healthz, /configz, /programmed, and the teaching hooks /events, /faults
// and /sync (POST; ?full=true forces a full sync).
func (p *Proxier) MetricsHandler(configz any) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		fmt.Fprint(w, p.Mode())
	})
	mux.Handle("/metrics", p.metrics.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		fmt.Fprint(w, "ok")
	})
	mux.HandleFunc("/configz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"kubeproxy.config.k8s.io": configz})
	})
	mux.HandleFunc(events.ProgrammedPath, func(w http.ResponseWriter, _ *http.Request) {
		rv, held := p.Programmed()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(events.Programmed{ResourceVersion: strconv.FormatUint(rv, 10), Held: held})
	})
	mux.Handle("/events", p.events.Handler())
	// The teaching hooks, svclab's alone when there is a control key.
	guard := func(h http.Handler) http.Handler { return h }
	if p.cfg.Control != nil {
		g := control.NewGuard(p.cfg.Control)
		mux.Handle(control.NoncePath, g.NonceHandler())
		guard = g.Wrap
	}
	mux.Handle("/faults", guard(p.faults.Handler()))
	mux.Handle("/sync", guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "use POST", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Query().Get("full") == "true" {
			p.ForceFullSync(ReasonRequested)
			fmt.Fprintln(w, "full sync queued")
			return
		}
		p.Sync()
		fmt.Fprintln(w, "sync queued")
	})))
	return mux
}
