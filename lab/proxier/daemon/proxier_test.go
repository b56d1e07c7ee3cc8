//go:build linux

package daemon

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/vishvananda/netlink"
	discovery "k8s.io/api/discovery/v1"
	"sigs.k8s.io/knftables"

	"github.com/svclab/svclab/lab/proxier/control"
	"github.com/svclab/svclab/lab/proxier/events"
	"github.com/svclab/svclab/lab/proxier/faults"
)

func ptr[T any](v T) *T { return &v }

func TestNotSyncingUntilInitialized(t *testing.T) {
	h := newHarness(t)
	evs, err := h.sync()
	if err != nil || len(evs) != 0 {
		t.Fatalf("evs %v err %v", evs, err)
	}
	if h.nft.Table != nil {
		t.Error("rules written before Services and EndpointSlices were synced")
	}
}

func TestInitialFullSync(t *testing.T) {
	h := newHarness(t)
	h.load(baseObjects)
	ev := h.syncOne(events.KindSync)
	if !ev.Full || ev.Reason != ReasonInitial || ev.Error != "" {
		t.Errorf("event %+v", ev)
	}
	if !slices.Contains(ev.ServicesChanged, "demo/web") || !slices.Contains(ev.EndpointsChanged, "kube-system/dns") {
		t.Errorf("changes %v %v", ev.ServicesChanged, ev.EndpointsChanged)
	}
	if !slices.ContainsFunc(ev.RulesAdded, func(l string) bool { return strings.HasPrefix(l, "chain services: ") }) {
		t.Errorf("rulesAdded %v", ev.RulesAdded)
	}
	if h.serviceChain("service", "demo/web/tcp/http") == "" {
		t.Fatalf("no service chain for demo/web: %v", h.nft.Dump())
	}
	// Health check node ports and local ready endpoints (the not-ready
	// endpoint does not count).
	if h.sh.ports["demo/lb"] != 32000 || h.sh.endpoints["demo/lb"] != 1 {
		t.Errorf("service health %v %v", h.sh.ports, h.sh.endpoints)
	}
	m := h.p.Metrics()
	if got := testutil.ToFloat64(m.SyncProxyRulesLastTimestamp.WithLabelValues("IPv4")); got == 0 {
		t.Error("last timestamp not set")
	}
	if got := testutil.CollectAndCount(m.SyncFullProxyRulesLatency); got != 1 {
		t.Errorf("full sync histogram has %d series", got)
	}
	// A UDP Service got endpoints: the reconciler ran.
	if h.ct.listCount() != 1 {
		t.Errorf("conntrack lists %d, want 1", h.ct.listCount())
	}
}

func TestPartialSyncOnEndpointChange(t *testing.T) {
	h := newHarness(t)
	h.load(baseObjects)
	h.syncOne(events.KindSync)
	webChain := h.serviceChain("service", "demo/web/tcp/http")
	before := len(h.chain(webChain).Rules)

	h.clock.Step(2 * time.Second)
	h.load(strings.Replace(baseObjects, "- {addresses: [10.180.2.1], nodeName: node-2}", "- {addresses: [10.180.2.1], nodeName: node-2}\n- {addresses: [10.180.3.1], nodeName: node-3}", 1))
	ev := h.syncOne(events.KindSync)
	if ev.Full || !slices.Equal(ev.EndpointsChanged, []string{"demo/web"}) || !slices.Equal(ev.ChainsRewritten, []string{"demo/web"}) {
		t.Errorf("event %+v", ev)
	}
	if len(ev.RulesAdded) != 1 || !strings.Contains(ev.RulesAdded[0], "10.180.3.1") || len(ev.RulesRemoved) != 1 {
		t.Errorf("rule diff +%v -%v", ev.RulesAdded, ev.RulesRemoved)
	}
	if len(h.chain(webChain).Rules) != before {
		t.Errorf("web chain has %d rules, want %d", len(h.chain(webChain).Rules), before)
	}
	if got := testutil.ToFloat64(h.p.Metrics().EndpointChangesPending); got != 0 {
		t.Errorf("pending endpoint changes %v after the sync", got)
	}
	// TCP-only change: no conntrack reconciliation.
	if h.ct.listCount() != 1 {
		t.Errorf("conntrack ran for a TCP-only change")
	}
}

func TestFullResyncRepairsHandDeletedRules(t *testing.T) {
	h := newHarness(t)
	h.load(baseObjects)
	h.syncOne(events.KindSync)
	webChain := h.serviceChain("service", "demo/web/tcp/http")
	want := len(h.chain(webChain).Rules)

	// Someone flushes the chain by hand.
	tx := h.nft.NewTransaction()
	tx.Flush(&knftables.Chain{Name: webChain})
	if err := h.nft.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	// A partial sync with no changes does not notice...
	h.clock.Step(2 * time.Second)
	h.p.Sync()
	ev := h.syncOne(events.KindSync)
	if ev.Full || len(h.chain(webChain).Rules) != 0 {
		t.Fatalf("partial sync repaired the chain? full=%v rules=%d", ev.Full, len(h.chain(webChain).Rules))
	}
	// ...the periodic full resync does.
	h.clock.Step(time.Hour)
	ev = h.syncOne(events.KindSync)
	if !ev.Full || ev.Reason != ReasonPeriodic {
		t.Errorf("event %+v", ev)
	}
	if got := len(h.chain(webChain).Rules); got != want {
		t.Errorf("after the full resync the chain has %d rules, want %d", got, want)
	}
	if len(ev.RulesAdded) != want || len(ev.RulesRemoved) != 0 {
		t.Errorf("repair diff +%v -%v", ev.RulesAdded, ev.RulesRemoved)
	}
	// A requested full sync says so.
	h.p.ForceFullSync(ReasonRequested)
	if ev := h.syncOne(events.KindSync); !ev.Full || ev.Reason != ReasonRequested {
		t.Errorf("requested: %+v", ev)
	}
}

func TestFailedApplyKeepsRulesAndRetriesFull(t *testing.T) {
	h := newHarness(t)
	h.load(baseObjects)
	h.syncOne(events.KindSync)
	good := h.nft.Dump()

	h.clock.Step(2 * time.Second)
	h.nft.setFail(errInjected)
	h.load(strings.Replace(baseObjects, "10.180.2.1", "10.180.2.9", 1))
	evs, err := h.sync()
	if err == nil || len(evs) != 1 || !strings.Contains(evs[0].Error, "injected") {
		t.Fatalf("err %v events %+v", err, evs)
	}
	if h.nft.Dump() != good {
		t.Error("a failed sync changed the rules")
	}
	m := h.p.Metrics()
	if got := testutil.ToFloat64(m.NFTablesSyncFailures.WithLabelValues("IPv4")); got != 1 {
		t.Errorf("nftables sync failures %v", got)
	}
	if got := testutil.ToFloat64(m.SyncFailures.WithLabelValues("apply", "nftables")); got != 1 {
		t.Errorf("sync failures %v", got)
	}

	h.nft.setFail(nil)
	h.clock.Step(30 * time.Second)
	ev := h.syncOne(events.KindSync)
	if !ev.Full || ev.Reason != ReasonAfterFailure || !slices.Contains(ev.EndpointsChanged, "demo/web") {
		t.Errorf("retry event %+v", ev)
	}
	if !strings.Contains(h.nft.Dump(), "10.180.2.9") {
		t.Error("the retry did not program the change")
	}
}

func TestFaultStopSyncing(t *testing.T) {
	h := newHarness(t)
	h.load(baseObjects)
	h.syncOne(events.KindSync)
	good := h.nft.Dump()

	if _, err := h.p.Faults().Set(context.Background(), faults.Patch{StopSyncing: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	<-h.evs // the fault event
	h.load(strings.Replace(baseObjects, "10.180.2.1", "10.180.2.9", 1))
	ev := h.syncOne(events.KindSkipped)
	if !slices.Contains(ev.Faults, faults.StopSyncing) {
		t.Errorf("skipped event %+v", ev)
	}
	if h.nft.Dump() != good {
		t.Error("rules changed while syncing is stopped")
	}
	// The queued update ages: after 2×syncPeriod the proxy is unhealthy.
	h.clock.Step(61 * time.Second)
	if h.p.Health().Health().Healthy {
		t.Error("proxy still healthy with a stale queued update")
	}
	if got := testutil.ToFloat64(h.p.Metrics().FaultActive.WithLabelValues(faults.StopSyncing)); got != 1 {
		t.Errorf("fault gauge %v", got)
	}

	h.p.Faults().Reset(context.Background())
	<-h.evs
	ev = h.syncOne(events.KindSync)
	if !strings.Contains(h.nft.Dump(), "10.180.2.9") || !h.p.Health().Health().Healthy {
		t.Errorf("after the fault: event %+v", ev)
	}
}

func TestFaultOmitService(t *testing.T) {
	h := newHarness(t)
	h.load(baseObjects)
	h.syncOne(events.KindSync)
	if _, err := h.p.Faults().Set(context.Background(), faults.Patch{OmitService: ptr("demo/web")}); err != nil {
		t.Fatal(err)
	}
	<-h.evs
	h.clock.Step(2 * time.Second)
	ev := h.syncOne(events.KindSync)
	if !slices.Contains(ev.ChainsRewritten, "demo/web") || len(ev.RulesRemoved) == 0 {
		t.Errorf("event %+v", ev)
	}
	if strings.Contains(h.nft.Dump(), "172.30.0.10") {
		t.Error("the omitted Service's ClusterIP is still in the rules")
	}
	if got := testutil.ToFloat64(h.p.Metrics().ServicesOmitted); got != 1 {
		t.Errorf("omitted gauge %v", got)
	}
}

func TestFaultSyncEvery(t *testing.T) {
	h := newHarness(t)
	h.load(baseObjects)
	h.syncOne(events.KindSync)
	if _, err := h.p.Faults().Set(context.Background(), faults.Patch{SyncEverySeconds: ptr(20)}); err != nil {
		t.Fatal(err)
	}
	<-h.evs
	h.clock.Step(5 * time.Second)
	h.load(strings.Replace(baseObjects, "10.180.2.1", "10.180.2.9", 1))
	ev := h.syncOne(events.KindSkipped)
	if !strings.Contains(ev.Message, "sync-every") {
		t.Errorf("event %+v", ev)
	}
	// A second attempt inside the window is silent (one delay timer).
	if evs, _ := h.sync(); len(evs) != 0 {
		t.Errorf("second attempt published %+v", evs)
	}
	h.clock.Step(15 * time.Second)
	if ev := h.syncOne(events.KindSync); ev.Error != "" || !strings.Contains(h.nft.Dump(), "10.180.2.9") {
		t.Errorf("the delayed sync did not happen: %+v", ev)
	}
}

func TestConntrackCleanupAndFault(t *testing.T) {
	tests := []struct {
		name        string
		skip        bool
		wantDeleted int
	}{
		{name: "stale UDP flow deleted", wantDeleted: 1},
		{name: "skip-conntrack-cleanup fault", skip: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.load(baseObjects)
			h.syncOne(events.KindSync)
			if tc.skip {
				if _, err := h.p.Faults().Set(context.Background(), faults.Patch{SkipConntrackCleanup: ptr(true)}); err != nil {
					t.Fatal(err)
				}
				<-h.evs
			}
			// The DNS pod moves: flows still answered by the old pod are stale.
			h.ct.flows = []*netlink.ConntrackFlow{udpFlow("172.30.0.53", 53, "10.180.0.53", 53)}
			h.clock.Step(2 * time.Second)
			h.load(strings.Replace(baseObjects, "10.180.0.53", "10.180.0.54", 1))
			ev := h.syncOne(events.KindSync)
			if ev.ConntrackDeleted != tc.wantDeleted || len(h.ct.deleted) != tc.wantDeleted {
				t.Errorf("deleted %d (event %d), want %d", len(h.ct.deleted), ev.ConntrackDeleted, tc.wantDeleted)
			}
			m := h.p.Metrics()
			if got := testutil.ToFloat64(m.ConntrackDeletedEntries.WithLabelValues("IPv4")); int(got) != tc.wantDeleted {
				t.Errorf("deleted metric %v", got)
			}
			skipped := testutil.ToFloat64(m.ConntrackSkipped.WithLabelValues("IPv4"))
			if (skipped == 1) != tc.skip {
				t.Errorf("skipped metric %v", skipped)
			}
		})
	}
}

func TestTopologyChangeForcesFullSync(t *testing.T) {
	h := newHarness(t)
	h.load(baseObjects)
	h.syncOne(events.KindSync)
	h.clock.Step(2 * time.Second)
	h.load(strings.Replace(baseObjects, "zone-a", "zone-b", 1))
	ev := h.syncOne(events.KindSync)
	if !ev.Full || ev.Reason != ReasonTopology {
		t.Errorf("event %+v", ev)
	}
}

func TestNodeEligibility(t *testing.T) {
	h := newHarness(t)
	h.load(baseObjects)
	h.syncOne(events.KindSync)
	if !h.p.Health().NodeEligible() {
		t.Error("node not eligible")
	}
	objs := decode(t, baseObjects)
	h.p.ReplaceAll(objs.Services, objs.EndpointSlices, nil)
	if h.p.Health().NodeEligible() {
		t.Error("node eligible without a Node object")
	}
}

func TestServiceProxyNameIgnored(t *testing.T) {
	h := newHarness(t)
	h.load(strings.Replace(baseObjects, "metadata: {namespace: demo, name: web}", "metadata: {namespace: demo, name: web, labels: {service.kubernetes.io/service-proxy-name: other}}", 1))
	h.syncOne(events.KindSync)
	if strings.Contains(h.nft.Dump(), "172.30.0.10") {
		t.Error("a Service for another proxy was programmed")
	}
}

func TestConntrackCleanupRequired(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name string
		from string
		to   string
		want bool
	}{
		{"identical", baseObjects, baseObjects, false},
		{"TCP endpoints change", baseObjects, strings.Replace(baseObjects, "10.180.2.1", "10.180.2.2", 1), false},
		{"UDP endpoint change", baseObjects, strings.Replace(baseObjects, "10.180.0.53", "10.180.0.54", 1), true},
		{"UDP endpoint becomes not ready", baseObjects, strings.Replace(baseObjects, "- {addresses: [10.180.0.53], nodeName: test-node}", "- {addresses: [10.180.0.53], nodeName: test-node, conditions: {ready: false, serving: false}}", 1), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := h.snapshot(tc.from)
			b := h.snapshot(tc.to)
			if got := conntrackCleanupRequired(a, b); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if !conntrackCleanupRequired(nil, h.snapshot(baseObjects)) {
		t.Error("a restart must reconcile UDP Services with endpoints")
	}
}

// TestCovertFaults: with a control key, a learner on the node can neither
// switch a fault off nor find it named anywhere — not in /metrics, the
// event stream or a fault state listing — while svclab's signed requests
// work and the fault does what it does.
func TestCovertFaults(t *testing.T) {
	pub, priv, err := control.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, Config{Control: pub})
	h.load(baseObjects)
	h.syncOne(events.KindSync)
	good := h.nft.Dump()
	srv := httptest.NewServer(h.p.MetricsHandler(nil))
	defer srv.Close()
	ctx := context.Background()
	if _, err := control.Do(ctx, srv.Client(), priv, srv.URL, http.MethodPost, "/faults", []byte(`{"stopSyncing":true}`)); err != nil {
		t.Fatalf("svclab's signed request: %v", err)
	}
	if !h.p.Faults().State().StopSyncing {
		t.Fatal("the signed request did not set the fault")
	}
	if _, held := h.p.Programmed(); held != "" {
		t.Errorf("Programmed names the covert fault: %q", held)
	}
	h.load(strings.Replace(baseObjects, "10.180.2.1", "10.180.2.9", 1))
	if evs, _ := h.sync(); len(evs) != 0 {
		t.Errorf("a covert fault published events: %+v", evs)
	}
	if h.nft.Dump() != good {
		t.Error("rules changed while syncing is stopped")
	}
	get := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/faults", `{"stopSyncing":false}`},
		{"DELETE", "/faults", ""},
		{"GET", "/faults", ""},
		{"POST", "/sync?full=true", ""},
	} {
		if code, _ := get(tc.method, tc.path, tc.body); code != http.StatusForbidden {
			t.Errorf("%s %s unsigned: %d, want 403", tc.method, tc.path, code)
		}
	}
	if !h.p.Faults().State().StopSyncing {
		t.Fatal("an unsigned request switched the fault off")
	}
	_, metrics := get("GET", "/metrics", "")
	for _, word := range []string{"fault", "stop-syncing", "syncs_skipped", "omitted"} {
		if strings.Contains(metrics, word) {
			t.Errorf("/metrics names %q", word)
		}
	}
	if !strings.Contains(metrics, "kubeproxy_sync_proxy_rules_last_timestamp_seconds") {
		t.Error("/metrics lost kube-proxy's own metrics")
	}
	if code, mode := get("GET", "/proxyMode", ""); code != http.StatusOK || mode != "nftables" {
		t.Errorf("/proxyMode: %d %q", code, mode)
	}
}

// As upstream's, the informers' synced callbacks sync at once, outside the
// runner: a long minSyncPeriod does not hold back the node's first rules.
// After that every change waits until minSyncPeriod has passed since the
// runner's previous run, and the sync metrics show it pending.
func TestMinSyncPeriodHoldsChangesNotTheInitialSync(t *testing.T) {
	const minSync = 10 * time.Minute
	h := newHarnessWith(t, Config{MinSyncPeriod: minSync})
	objs := decode(t, baseObjects)
	for _, svc := range objs.Services {
		h.p.OnServiceUpdate(nil, svc)
	}
	for _, sl := range objs.EndpointSlices {
		h.p.OnEndpointSliceUpdate(nil, sl)
	}
	h.p.OnNodeUpdate(objs.Node(testNode))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { h.p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	h.p.OnServicesSynced(ctx)
	if h.nft.Table != nil {
		t.Fatal("rules written before the EndpointSlices were synced")
	}
	h.p.OnEndpointSlicesSynced(ctx)
	if h.serviceChain("service", "demo/web/tcp/http") == "" {
		t.Fatalf("no rules for demo/web right after the initial sync: %v", h.nft.Dump())
	}
	if ev := h.nextEvent(t); !ev.Full || ev.Reason != ReasonInitial {
		t.Fatalf("initial sync event %+v", ev)
	}
	m := h.p.Metrics()

	// The runner has not run yet: the first change is synced at once.
	web := func(extra string) *discovery.EndpointSlice {
		t.Helper()
		text := strings.Replace(baseObjects, "- {addresses: [10.180.2.1], nodeName: node-2}", "- {addresses: [10.180.2.1], nodeName: node-2}\n"+extra, 1)
		for _, sl := range decode(t, text).EndpointSlices {
			if sl.Namespace == "demo" && sl.Labels[discovery.LabelServiceName] == "web" {
				return sl
			}
		}
		t.Fatal("no EndpointSlice for demo/web")
		return nil
	}
	h.p.OnEndpointSliceUpdate(nil, web("- {addresses: [10.180.3.1], nodeName: node-3}"))
	if ev := h.nextEvent(t); ev.Full || !slices.Equal(ev.EndpointsChanged, []string{"demo/web"}) {
		t.Fatalf("first change: event %+v", ev)
	}

	// The next change waits for minSyncPeriod after that run.
	h.p.OnEndpointSliceUpdate(nil, web("- {addresses: [10.180.3.1], nodeName: node-3}\n- {addresses: [10.180.4.1], nodeName: node-3}"))
	select {
	case ev := <-h.evs:
		t.Fatalf("synced before minSyncPeriod passed: %+v", ev)
	case <-time.After(300 * time.Millisecond):
	}
	if got := testutil.ToFloat64(m.EndpointChangesPending); got != 1 {
		t.Errorf("endpoint changes pending = %v while waiting, want 1", got)
	}
	if last, queued := testutil.ToFloat64(m.SyncProxyRulesLastTimestamp.WithLabelValues("IPv4")), testutil.ToFloat64(m.SyncProxyRulesLastQueued.WithLabelValues("IPv4")); queued < last {
		t.Errorf("last queued %v before last synced %v while a change waits", queued, last)
	}
	if strings.Contains(h.nft.Dump(), "10.180.4.1") {
		t.Fatal("the waiting endpoint is programmed already")
	}
	waitFor(t, func() bool { return h.clock.HasWaiters() })
	h.clock.Step(minSync)
	if ev := h.nextEvent(t); !slices.Equal(ev.EndpointsChanged, []string{"demo/web"}) {
		t.Fatalf("change after minSyncPeriod: event %+v", ev)
	}
	if !strings.Contains(h.nft.Dump(), "10.180.4.1") {
		t.Error("the endpoint is not programmed after minSyncPeriod")
	}
	if got := testutil.ToFloat64(m.EndpointChangesPending); got != 0 {
		t.Errorf("endpoint changes pending = %v after the sync", got)
	}
}

// TestProgrammed follows how far the rules follow the API through changes
// that wait for a sync, a sync that fails, a change that does not touch
// the rules, and a fault that holds syncs back.
func TestProgrammed(t *testing.T) {
	h := newHarness(t)
	withRV := func(text, rv string) string {
		return strings.ReplaceAll(text, "metadata: {", "metadata: {resourceVersion: \""+rv+"\", ")
	}
	check := func(step string, wantRV uint64, wantHeld string) {
		t.Helper()
		rv, held := h.p.Programmed()
		if rv != wantRV || held != wantHeld {
			t.Errorf("%s: Programmed() = %d %q, want %d %q", step, rv, held, wantRV, wantHeld)
		}
	}
	check("before the first sync", 0, "")
	h.load(withRV(baseObjects, "100"))
	check("objects seen, not synced", 0, "")
	h.syncOne(events.KindSync)
	check("after the first sync", 100, "")

	h.clock.Step(2 * time.Second)
	changed := strings.Replace(baseObjects, "10.180.2.1", "10.180.2.9", 1)
	h.load(withRV(changed, "120"))
	check("a change pending", 100, "")
	h.nft.setFail(errInjected)
	if _, err := h.sync(); err == nil {
		t.Fatal("the injected failure did not fail the sync")
	}
	check("after a failed sync", 100, "")
	h.nft.setFail(nil)
	h.clock.Step(30 * time.Second)
	h.syncOne(events.KindSync)
	check("after the retry", 120, "")

	// An update that changes nothing the rules depend on needs no sync.
	h.load(withRV(changed, "130"))
	check("an unchanged object seen", 130, "")

	if _, err := h.p.Faults().Set(context.Background(), faults.Patch{StopSyncing: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	<-h.evs
	h.load(withRV(strings.Replace(baseObjects, "10.180.2.1", "10.180.2.7", 1), "140"))
	h.syncOne(events.KindSkipped)
	check("syncs stopped by the fault", 130, faults.StopSyncing)
}

func TestProgrammedEndpoint(t *testing.T) {
	h := newHarness(t)
	h.load(strings.ReplaceAll(baseObjects, "metadata: {", "metadata: {resourceVersion: \"7\", "))
	h.syncOne(events.KindSync)
	srv := httptest.NewServer(h.p.MetricsHandler(nil))
	defer srv.Close()
	resp, err := http.Get(srv.URL + events.ProgrammedPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != `{"resourceVersion":"7"}` {
		t.Errorf("%s: %d %s", events.ProgrammedPath, resp.StatusCode, body)
	}
}

// A long minSyncPeriod holds pending changes back, and Programmed says so.
func TestProgrammedSaysALongMinSyncPeriodHolds(t *testing.T) {
	h := newHarnessWith(t, Config{MinSyncPeriod: 10 * time.Minute})
	h.load(baseObjects)
	h.syncOne(events.KindSync)
	if _, held := h.p.Programmed(); held != "" {
		t.Errorf("idle: held %q", held)
	}
	h.load(strings.Replace(baseObjects, "10.180.2.1", "10.180.2.9", 1))
	if _, held := h.p.Programmed(); held != HeldMinSyncPeriod {
		t.Errorf("a change pending: held %q, want %q", held, HeldMinSyncPeriod)
	}
}
