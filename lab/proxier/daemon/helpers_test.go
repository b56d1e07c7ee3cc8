//go:build linux

package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/knftables"

	"github.com/svclab/svclab/lab/proxier/events"
	"github.com/svclab/svclab/lab/proxier/manifest"
	"github.com/svclab/svclab/lab/proxier/model"
	"github.com/svclab/svclab/lab/proxier/nftables"
)

const testNode = "test-node"

// baseObjects: demo/web (TCP, two endpoints, one local), kube-system/dns
// (UDP, one local endpoint) and demo/lb (LoadBalancer, eTP Local, health
// check node port 32000, one local endpoint).
const baseObjects = `
apiVersion: v1
kind: Service
metadata: {namespace: demo, name: web}
spec:
  clusterIP: 172.30.0.10
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {namespace: kube-system, name: dns}
spec:
  clusterIP: 172.30.0.53
  ports: [{name: dns, port: 53, protocol: UDP}]
---
apiVersion: v1
kind: Service
metadata: {namespace: demo, name: lb}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  healthCheckNodePort: 32000
  clusterIP: 172.30.0.20
  ports: [{name: http, port: 80, nodePort: 30080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: demo, name: web-1, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints:
- {addresses: [10.180.0.1], nodeName: test-node}
- {addresses: [10.180.2.1], nodeName: node-2}
ports: [{name: http, port: 8080, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: kube-system, name: dns-1, labels: {kubernetes.io/service-name: dns}}
addressType: IPv4
endpoints:
- {addresses: [10.180.0.53], nodeName: test-node}
ports: [{name: dns, port: 53, protocol: UDP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: demo, name: lb-1, labels: {kubernetes.io/service-name: lb}}
addressType: IPv4
endpoints:
- {addresses: [10.180.0.7], nodeName: test-node}
- {addresses: [10.180.0.8], nodeName: test-node, conditions: {ready: false}}
ports: [{name: http, port: 80, protocol: TCP}]
---
apiVersion: v1
kind: Node
metadata:
  name: test-node
  labels: {topology.kubernetes.io/zone: zone-a}
`

func decode(t *testing.T, text string) *manifest.Objects {
	t.Helper()
	objs, err := manifest.Decode(strings.NewReader(text), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// failingNFT wraps a knftables.Fake and fails transactions on demand.
type failingNFT struct {
	*knftables.Fake
	mu   sync.Mutex
	fail error
}

func (f *failingNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	f.mu.Lock()
	err := f.fail
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.Fake.Run(ctx, tx)
}

func (f *failingNFT) setFail(err error) {
	f.mu.Lock()
	f.fail = err
	f.mu.Unlock()
}

// fakeConntrack is a hand-written conntrack.Interface.
type fakeConntrack struct {
	mu      sync.Mutex
	flows   []*netlink.ConntrackFlow
	lists   int
	deleted []*netlink.ConntrackFlow
}

func (f *fakeConntrack) ListEntries(uint8) ([]*netlink.ConntrackFlow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	return append([]*netlink.ConntrackFlow(nil), f.flows...), nil
}

func (f *fakeConntrack) DeleteEntries(_ uint8, flows []*netlink.ConntrackFlow) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, flows...)
	return len(flows), nil
}

func (f *fakeConntrack) listCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}

func udpFlow(dst string, dport uint16, replySrc string, sport uint16) *netlink.ConntrackFlow {
	fl := &netlink.ConntrackFlow{FamilyType: 2}
	fl.Forward.Protocol = 17
	fl.Forward.SrcIP, fl.Forward.SrcPort = net.ParseIP("10.180.1.1"), 40000
	fl.Forward.DstIP, fl.Forward.DstPort = net.ParseIP(dst), dport
	fl.Reverse.Protocol = 17
	fl.Reverse.SrcIP, fl.Reverse.SrcPort = net.ParseIP(replySrc), sport
	fl.Reverse.DstIP, fl.Reverse.DstPort = net.ParseIP("10.180.1.1"), 40000
	return fl
}

// fakeServiceHealth records what the proxier told it.
type fakeServiceHealth struct {
	mu        sync.Mutex
	ports     map[string]uint16
	endpoints map[string]int
}

func (f *fakeServiceHealth) SyncServices(_ context.Context, ports map[types.NamespacedName]uint16) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ports = map[string]uint16{}
	for n, p := range ports {
		f.ports[n.String()] = p
	}
	return nil
}

func (f *fakeServiceHealth) SyncEndpoints(counts map[types.NamespacedName]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.endpoints = map[string]int{}
	for n, c := range counts {
		f.endpoints[n.String()] = c
	}
}

// harness is a Proxier on a fake nftables table, a fake conntrack table
// and a fake clock. Tests call sync() to run one sync attempt directly.
type harness struct {
	t     *testing.T
	p     *Proxier
	nft   *failingNFT
	ct    *fakeConntrack
	sh    *fakeServiceHealth
	clock *testingclock.FakeClock
	evs   <-chan events.Event
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessWith(t, Config{})
}

// newHarnessWith takes Control and MinSyncPeriod (and nothing else yet)
// from extra.
func newHarnessWith(t *testing.T, extra Config) *harness {
	t.Helper()
	fake := knftables.NewFake(knftables.IPv4Family, nftables.Table)
	nft := &failingNFT{Fake: fake}
	npa, err := model.NewNodePortAddresses(v1.IPv4Protocol, []string{model.NodePortAddressesPrimary}, net.ParseIP("192.168.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	fc := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	applier, err := NewNFTablesApplier(nftables.Config{
		Family: v1.IPv4Protocol, NodeIP: net.ParseIP("192.168.0.2"), ClusterCIDR: "10.0.0.0/8",
		ServiceCIDRs: []string{"172.30.0.0/16"}, NodePortAddresses: npa, LocalAddresses: []net.IP{net.ParseIP("192.168.0.2")},
	}, nft, FakeRules(fake), nil)
	if err != nil {
		t.Fatal(err)
	}
	applier.Syncer().SetClock(fc.Now)
	h := &harness{t: t, nft: nft, ct: &fakeConntrack{}, sh: &fakeServiceHealth{}, clock: fc}
	minSync := time.Second
	if extra.MinSyncPeriod != 0 {
		minSync = extra.MinSyncPeriod
	}
	h.p, err = New(Config{
		NodeName: testNode, SyncPeriod: 30 * time.Second, MinSyncPeriod: minSync,
		Applier: applier, Conntrack: h.ct, ServiceHealth: h.sh, Clock: fc, Control: extra.Control,
	})
	if err != nil {
		t.Fatal(err)
	}
	ch, cancel := h.p.Events().Subscribe(64)
	t.Cleanup(cancel)
	h.evs = ch
	return h
}

func (h *harness) load(text string) {
	objs := decode(h.t, text)
	h.p.ReplaceAll(objs.Services, objs.EndpointSlices, objs.Node(testNode))
}

// sync runs one sync attempt and returns the events it published.
func (h *harness) sync() ([]events.Event, error) {
	err := h.p.syncProxyRules(context.Background())
	var out []events.Event
	for {
		select {
		case ev := <-h.evs:
			out = append(out, ev)
		default:
			return out, err
		}
	}
}

// syncOne runs a sync that must succeed and publish exactly one event of
// kind.
func (h *harness) syncOne(kind string) events.Event {
	h.t.Helper()
	evs, err := h.sync()
	if err != nil {
		h.t.Fatalf("sync: %v", err)
	}
	if len(evs) != 1 || evs[0].Kind != kind {
		h.t.Fatalf("events %+v, want one %s event", evs, kind)
	}
	return evs[0]
}

func (h *harness) chain(name string) *knftables.FakeChain { return h.nft.Table.Chains[name] }

var errInjected = errors.New("injected nft failure")

// serviceChain finds the chain "PREFIX-HASH-SUFFIX" (e.g. "service",
// "demo/web/tcp/http"), or "".
func (h *harness) serviceChain(prefix, suffix string) string {
	for name := range h.nft.Table.Chains {
		if strings.HasPrefix(name, prefix+"-") && strings.HasSuffix(name, "-"+suffix) {
			return name
		}
	}
	return ""
}

func (h *harness) snapshot(text string) *model.Snapshot {
	h.t.Helper()
	objs := decode(h.t, text)
	snap, err := model.Build(context.Background(), nil, model.Input{Family: v1.IPv4Protocol, Node: objs.Node(testNode), Services: objs.Services, EndpointSlices: objs.EndpointSlices})
	if err != nil {
		h.t.Fatal(err)
	}
	return snap
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	return testutil.ToFloat64(g)
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	return testutil.ToFloat64(c)
}

// nextEvent waits for the next sync event (the runner syncs in its own
// goroutine).
func (h *harness) nextEvent(t *testing.T) events.Event {
	t.Helper()
	select {
	case ev := <-h.evs:
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no sync event within 5s")
		return events.Event{}
	}
}
