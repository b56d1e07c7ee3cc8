//go:build linux

package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svclab/svclab/lab/proxier/iptables"
	"github.com/svclab/svclab/lab/proxier/model"
	"github.com/svclab/svclab/lab/proxier/nfacct"
)

// fakeIPTables is a hand-written IPTablesRunner: it keeps the chains and
// rules of each table, applies restore input the way --noflush does
// (declared chains are flushed and rewritten, -X deletes, other chains are
// left alone) and can be told to fail.
type fakeIPTables struct {
	mu          sync.Mutex
	chains      map[string]map[string][]string // table → chain → rules
	restores    []string
	saves       int
	ensureRules int
	failRestore error
}

func newFakeIPTables() *fakeIPTables {
	f := &fakeIPTables{chains: map[string]map[string][]string{}}
	for _, t := range []string{"filter", "nat", "mangle"} {
		f.chains[t] = map[string][]string{}
	}
	for _, c := range []string{"INPUT", "FORWARD", "OUTPUT"} {
		f.chains["filter"][c] = nil
	}
	for _, c := range []string{"PREROUTING", "OUTPUT", "POSTROUTING"} {
		f.chains["nat"][c] = nil
	}
	return f
}

func (f *fakeIPTables) Restore(_ context.Context, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restores = append(f.restores, string(data))
	if f.failRestore != nil {
		return f.failRestore
	}
	// Parse first, apply per table at COMMIT (all or nothing per table).
	var table string
	var declared []string
	rules := map[string][]string{}
	var deletes []string
	var inserts [][2]string // chain, rule
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table, declared, rules, deletes, inserts = line[1:], nil, map[string][]string{}, nil, nil
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			declared = append(declared, name)
		case strings.HasPrefix(line, "-A "):
			chain, _, _ := strings.Cut(line[3:], " ")
			if !slices.Contains(declared, chain) {
				if _, ok := f.chains[table][chain]; !ok {
					return fmt.Errorf("line %q: chain %s does not exist", line, chain)
				}
			}
			rules[chain] = append(rules[chain], line)
		case strings.HasPrefix(line, "-I "):
			// Inserted at the top of an existing chain (at COMMIT).
			chain, rest, _ := strings.Cut(line[3:], " ")
			if _, ok := f.chains[table][chain]; !ok {
				return fmt.Errorf("line %q: chain %s does not exist", line, chain)
			}
			inserts = append(inserts, [2]string{chain, "-A " + chain + " " + rest})
		case strings.HasPrefix(line, "-D "):
			chain, rest, _ := strings.Cut(line[3:], " ")
			rule := "-A " + chain + " " + rest
			i := slices.Index(f.chains[table][chain], rule)
			if i < 0 {
				return fmt.Errorf("line %q: no such rule", line)
			}
			f.chains[table][chain] = slices.Delete(f.chains[table][chain], i, i+1)
		case strings.HasPrefix(line, "-X "):
			deletes = append(deletes, line[3:])
		case line == "COMMIT":
			for _, in := range inserts {
				f.chains[table][in[0]] = append([]string{in[1]}, f.chains[table][in[0]]...)
			}
			for _, c := range declared {
				f.chains[table][c] = rules[c]
			}
			for c, r := range rules {
				if !slices.Contains(declared, c) {
					f.chains[table][c] = append(f.chains[table][c], r...)
				}
			}
			for _, c := range deletes {
				delete(f.chains[table], c)
			}
		}
	}
	return nil
}

func (f *fakeIPTables) Save(_ context.Context, table string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.saves++
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n", table)
	names := make([]string, 0, len(f.chains[table]))
	for c := range f.chains[table] {
		names = append(names, c)
	}
	slices.Sort(names)
	for _, c := range names {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c)
	}
	for _, c := range names {
		for _, r := range f.chains[table][c] {
			b.WriteString(r + "\n")
		}
	}
	b.WriteString("COMMIT\n")
	return []byte(b.String()), nil
}

func (f *fakeIPTables) EnsureChain(_ context.Context, table, chain string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.chains[table][chain]; !ok {
		f.chains[table][chain] = nil
	}
	return nil
}

func (f *fakeIPTables) EnsureRule(_ context.Context, table, chain string, args []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ensureRules++
	rule := "-A " + chain + " " + strings.Join(args, " ")
	if !slices.Contains(f.chains[table][chain], rule) {
		f.chains[table][chain] = append([]string{rule}, f.chains[table][chain]...)
	}
	return nil
}

func (f *fakeIPTables) ChainExists(_ context.Context, table, chain string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.chains[table][chain]
	return ok, nil
}

func (f *fakeIPTables) deleteChain(table, chain string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.chains[table], chain)
}

func iptablesConfig(t *testing.T) iptables.Config {
	npa, err := model.NewNodePortAddresses(v1.IPv4Protocol, nil, net.ParseIP("192.168.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	return iptables.Config{Family: v1.IPv4Protocol, NodeIP: net.ParseIP("192.168.0.2"), ClusterCIDR: "10.0.0.0/8", NodePortAddresses: npa, LocalhostNodePorts: true}
}

func TestIPTablesApplier(t *testing.T) {
	h := newHarness(t) // for snapshots only
	base := h.snapshot(baseObjects)
	moved := h.snapshot(strings.Replace(baseObjects, "10.180.2.1", "10.180.2.9", 1))
	webSuffix := iptables.ServiceChainSuffix(base.Ports[1].Name)
	if base.Ports[1].Name.Name != "web" {
		t.Fatalf("port order changed: %v", base.Ports[1].Name)
	}

	run := newFakeIPTables()
	a := NewIPTablesApplier(iptablesConfig(t), run, nil)

	// First sync: full, the missing jump rules added in one restore (no
	// iptables runs), every chain restored.
	applied, err := a.Apply(context.Background(), base, false)
	if err != nil {
		t.Fatal(err)
	}
	if !applied.Full || run.ensureRules != 0 || len(run.restores) != 2 || strings.Count(run.restores[0], "-I ") != len(iptables.JumpRules()) {
		t.Errorf("full=%v ensureRules=%d restores %q", applied.Full, run.ensureRules, run.restores)
	}
	if applied.RulesWritten["nat"] == 0 || applied.RulesWritten["filter"] == 0 {
		t.Errorf("rules written %v", applied.RulesWritten)
	}
	rules, err := a.Rules(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rules, func(l string) bool { return strings.HasPrefix(l, "-t nat -A KUBE-SVC-"+webSuffix) }) ||
		!slices.ContainsFunc(rules, func(l string) bool {
			return strings.HasPrefix(l, "-t nat -A PREROUTING") && strings.Contains(l, "-j KUBE-SERVICES")
		}) {
		t.Errorf("rules %v", rules)
	}

	// Partial sync: only the changed Service's chains are in the input,
	// and the applier knows the existing chains without iptables-save.
	saves := run.saves
	applied, err = a.Apply(context.Background(), moved, false)
	if err != nil {
		t.Fatal(err)
	}
	last := run.restores[len(run.restores)-1]
	if applied.Full || !slices.ContainsFunc(applied.Rewritten, func(n types.NamespacedName) bool { return n.Name == "web" }) {
		t.Errorf("applied %+v", applied)
	}
	if !strings.Contains(last, "10.180.2.9") || strings.Contains(last, "10.180.0.53") {
		t.Errorf("partial restore input:\n%s", last)
	}
	if run.ensureRules != 0 || len(run.restores) != 3 {
		t.Errorf("a partial sync re-ensured the jump rules (%d restores)", len(run.restores))
	}
	if run.saves != saves {
		t.Errorf("a partial sync ran iptables-save %d times", run.saves-saves)
	}
	// The old endpoint chain was deleted.
	rules, _ = a.Rules(context.Background())
	if slices.ContainsFunc(rules, func(l string) bool { return strings.Contains(l, "10.180.2.1:") || strings.Contains(l, "10.180.2.1/") }) {
		t.Errorf("stale endpoint rules left: %v", rules)
	}

	// A failed restore is reported and the next sync is full.
	run.failRestore = errors.New("iptables-restore: line 7 failed")
	if _, err := a.Apply(context.Background(), base, false); err == nil || !strings.Contains(err.Error(), "line 7") {
		t.Fatalf("err %v", err)
	}
	run.failRestore = nil
	applied, err = a.Apply(context.Background(), base, false)
	if err != nil || !applied.Full {
		t.Errorf("after failure: %+v %v", applied, err)
	}
}

func TestIPTablesProxierMetrics(t *testing.T) {
	run := newFakeIPTables()
	p, err := New(Config{NodeName: testNode, Applier: NewIPTablesApplier(iptablesConfig(t), run, nil)})
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, baseObjects)
	p.ReplaceAll(objs.Services, objs.EndpointSlices, objs.Node(testNode))
	if err := p.syncProxyRules(context.Background()); err != nil {
		t.Fatal(err)
	}
	m := p.Metrics()
	if got := gaugeValue(t, m.IPTablesRulesLastSync.WithLabelValues("nat", "IPv4")); got == 0 {
		t.Error("iptables_last{nat} not set")
	}
	if got := gaugeValue(t, m.IPTablesRulesTotal.WithLabelValues("nat", "IPv4")); got == 0 {
		t.Error("iptables_total{nat} not set")
	}
	run.failRestore = errors.New("boom")
	p.Sync()
	if err := p.syncProxyRules(context.Background()); err == nil {
		t.Fatal("want an error")
	}
	if got := counterValue(t, m.IPTablesRestoreFailures.WithLabelValues("IPv4")); got != 1 {
		t.Errorf("restore failures %v", got)
	}
}

func TestCanaryMonitor(t *testing.T) {
	run := newFakeIPTables()
	ctx, cancel := context.WithCancel(context.Background())
	reloads := make(chan string, 4)
	done := make(chan struct{})
	go func() {
		CanaryMonitor(ctx, discardLogger(), run, 10*time.Millisecond, func(reason string) { reloads <- reason })
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })

	waitFor(t, func() bool { ok, _ := run.ChainExists(ctx, "filter", "KUBE-PROXY-CANARY"); return ok })
	select {
	case r := <-reloads:
		t.Fatalf("reload %q without a flush", r)
	case <-time.After(50 * time.Millisecond):
	}
	for _, table := range []string{"mangle", "nat", "filter"} {
		run.deleteChain(table, "KUBE-PROXY-CANARY")
	}
	select {
	case r := <-reloads:
		if r != ReasonCanary {
			t.Errorf("reason %q", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no reload after the canary was deleted")
	}
	// The canaries are recreated.
	waitFor(t, func() bool { ok, _ := run.ChainExists(ctx, "mangle", "KUBE-PROXY-CANARY"); return ok })
}

func TestParseNFTList(t *testing.T) {
	text := `table ip kube-proxy {
	comment "rules for kube-proxy"
	set cluster-ips {
		type ipv4_addr
		comment "Active ClusterIPs"
		elements = { 10.96.0.1, 10.96.0.10 }
	}

	set affinity-X {
		type ipv4_addr
		flags dynamic,timeout
		timeout 3h
		elements = { 10.244.1.2 timeout 3h expires 2h59m58s }
	}

	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		comment "ClusterIP, ExternalIP and LoadBalancer IP traffic"
		elements = { 10.96.0.1 . tcp . 443 : goto service-2QRHZV4L-default/kubernetes/tcp/https,
			     10.96.0.10 . udp . 53 : goto service-FY5PMXPG-kube-system/kube-dns/udp/dns }
	}

	map no-endpoint-services {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 10.96.0.30 . tcp . 80 comment "demo/empty:http" : goto reject-chain }
	}

	chain nat-prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		jump services
	}

	chain services {
		ip daddr . meta l4proto . th dport vmap @service-ips
		ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports
	}
}
`
	got := ParseNFTList(text)
	want := []string{
		"element cluster-ips: 10.96.0.1",
		"element cluster-ips: 10.96.0.10",
		"element affinity-X: 10.244.1.2",
		"element service-ips: 10.96.0.1 . tcp . 443 : goto service-2QRHZV4L-default/kubernetes/tcp/https",
		"element service-ips: 10.96.0.10 . udp . 53 : goto service-FY5PMXPG-kube-system/kube-dns/udp/dns",
		`element no-endpoint-services: 10.96.0.30 . tcp . 80 comment "demo/empty:http" : goto reject-chain`,
		"chain nat-prerouting: jump services",
		"chain services: ip daddr . meta l4proto . th dport vmap @service-ips",
		"chain services: ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// fakeNFAcct is a hand-written nfacct.Interface.
type fakeNFAcct struct {
	counters map[string]bool
	fail     error
}

func (f *fakeNFAcct) Ensure(name string) error {
	if f.fail != nil {
		return f.fail
	}
	f.counters[name] = true
	return nil
}

func (f *fakeNFAcct) Get(name string) (*nfacct.Counter, error) {
	if !f.counters[name] {
		return nil, nfacct.ErrObjectNotFound
	}
	return &nfacct.Counter{Name: name}, nil
}

// TestIPTablesApplierNFAcct: the rules use nfacct counters as upstream's
// do, exactly when the counters could be created at the full sync.
func TestIPTablesApplierNFAcct(t *testing.T) {
	h := newHarness(t)
	base := h.snapshot(baseObjects)
	for _, tc := range []struct {
		name      string
		acct      *fakeNFAcct
		wantMatch bool
	}{
		{"kernel with nfacct", &fakeNFAcct{counters: map[string]bool{}}, true},
		{"kernel without nfacct", &fakeNFAcct{counters: map[string]bool{}, fail: errors.New("not supported")}, false},
		{"no nfacct runner", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := newFakeIPTables()
			a := NewIPTablesApplier(iptablesConfig(t), run, nil)
			if tc.acct != nil {
				a.NFAcct = tc.acct
			}
			if _, err := a.Apply(context.Background(), base, false); err != nil {
				t.Fatal(err)
			}
			restore := run.restores[len(run.restores)-1]
			want := "-m conntrack --ctstate INVALID -j DROP"
			if tc.wantMatch {
				want = "-m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP"
				for _, c := range nfacct.Counters {
					if !tc.acct.counters[c] {
						t.Errorf("counter %s not created", c)
					}
				}
			}
			if !strings.Contains(restore, want) {
				t.Errorf("restore input lacks %q:\n%s", want, restore)
			}
		})
	}
}

// largeSnapshot is one Service with 1001 endpoints (large-cluster mode);
// the last endpoint's address is last.
func largeSnapshot(t *testing.T, last string) *model.Snapshot {
	t.Helper()
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "big"},
		Spec: v1.ServiceSpec{ClusterIP: "172.30.0.99", Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}}}
	slice := &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "big-1", Labels: map[string]string{discovery.LabelServiceName: "big"}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr("http"), Port: ptr[int32](8080), Protocol: ptr(v1.ProtocolTCP)}}}
	for i := range 1001 {
		ip := fmt.Sprintf("10.181.%d.%d", i/250, i%250+1)
		if i == 1000 {
			ip = last
		}
		slice.Endpoints = append(slice.Endpoints, discovery.Endpoint{Addresses: []string{ip}, NodeName: ptr("node-b")})
	}
	snap, err := model.Build(context.Background(), nil, model.Input{Family: v1.IPv4Protocol, NodeName: "test-node",
		Services: []*v1.Service{svc}, EndpointSlices: []*discovery.EndpointSlice{slice}})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestIPTablesApplierLargeClusterCleanup: in large-cluster mode stale
// chains are deleted at most once per StaleChainCleanupPeriod, as
// upstream does, but found without iptables-save.
func TestIPTablesApplierLargeClusterCleanup(t *testing.T) {
	ctx := context.Background()
	run := newFakeIPTables()
	a := NewIPTablesApplier(iptablesConfig(t), run, nil)
	a.StaleChainCleanupPeriod = time.Hour
	first, second, third := largeSnapshot(t, "10.182.0.1"), largeSnapshot(t, "10.182.0.2"), largeSnapshot(t, "10.182.0.3")
	sep := func(snap *model.Snapshot, ip string) string {
		return iptables.EndpointChain(snap.Ports[0].Name, model.Endpoint{IP: ip, Port: 8080})
	}
	has := func(chain string) bool {
		run.mu.Lock()
		defer run.mu.Unlock()
		_, ok := run.chains["nat"][chain]
		return ok
	}
	applied, err := a.Apply(ctx, first, false)
	if err != nil {
		t.Fatal(err)
	}
	if !applied.LargeClusterMode {
		t.Fatal("1001 endpoints: not in large-cluster mode")
	}
	saves := run.saves
	// Within the period: the replaced endpoint's chain stays.
	if _, err := a.Apply(ctx, second, false); err != nil {
		t.Fatal(err)
	}
	if !has(sep(first, "10.182.0.1")) || !has(sep(second, "10.182.0.2")) {
		t.Fatal("within the cleanup period: the stale chain was deleted or the new one not created")
	}
	// The period is over: both stale chains go, found without iptables-save.
	a.lastCleanup = time.Now().Add(-2 * time.Hour)
	if _, err := a.Apply(ctx, third, false); err != nil {
		t.Fatal(err)
	}
	if has(sep(first, "10.182.0.1")) || has(sep(second, "10.182.0.2")) || !has(sep(third, "10.182.0.3")) {
		t.Error("after the cleanup period: stale chains left or the new one missing")
	}
	if run.saves != saves {
		t.Errorf("partial syncs ran iptables-save %d times", run.saves-saves)
	}
}

// failSplit fails the first restore that has more transactions than
// the filter and nat tables'.
type failSplit struct {
	*fakeIPTables
	failed bool
}

func (f *failSplit) Restore(ctx context.Context, data []byte) error {
	if !f.failed && strings.Count(string(data), "COMMIT\n") > 2 {
		f.failed = true
		return errors.New("iptables-restore: line 1234 failed")
	}
	return f.fakeIPTables.Restore(ctx, data)
}

// When restoring the new chains in transactions of their own fails, the
// sync restores everything in one transaction, with the same result.
func TestIPTablesApplierSplitFallback(t *testing.T) {
	ctx := context.Background()
	snap := newHarness(t).snapshot(manyServices(60))
	want := newFakeIPTables()
	if _, err := NewIPTablesApplier(iptablesConfig(t), want, nil).Apply(ctx, snap, true); err != nil {
		t.Fatal(err)
	}
	run := &failSplit{fakeIPTables: newFakeIPTables()}
	a := NewIPTablesApplier(iptablesConfig(t), run, nil)
	a.StepLines = 50
	if _, err := a.Apply(ctx, snap, true); err != nil {
		t.Fatalf("the sync failed: %v", err)
	}
	if !run.failed {
		t.Fatal("the new chains were not restored in transactions of their own")
	}
	if last := run.restores[len(run.restores)-1]; strings.Count(last, "COMMIT\n") != 2 {
		t.Errorf("after the failure, the last restore has %d transactions, want 2", strings.Count(last, "COMMIT\n"))
	}
	for _, table := range []string{"filter", "nat"} {
		w, _ := want.Save(ctx, table)
		g, _ := run.Save(ctx, table)
		if string(w) != string(g) {
			t.Errorf("%s table differs from one restored in one transaction:\n%s", table, cmp.Diff(string(w), string(g)))
		}
	}
}

// smallSocket fails, as iptables-nft on a node in a user namespace does
// ("sendmsg() failed: Message too long"), any restore with a transaction
// of more than max lines.
type smallSocket struct {
	*fakeIPTables
	max, refused int
}

func (f *smallSocket) Restore(ctx context.Context, data []byte) error {
	lines := 0
	for _, l := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			lines = 0
		case l != "" && l != "COMMIT":
			if lines++; lines > f.max {
				f.refused++
				return errors.New("iptables-restore: exit status 1: sendmsg() failed: Message too long\niptables-restore: line 478 failed: Message too long.")
			}
		}
	}
	return f.fakeIPTables.Restore(ctx, data)
}

// When a transaction is more than the node's netlink socket carries, the
// sync restores the rules chain by chain in small transactions, full and
// partial syncs alike, with the same result as one transaction.
func TestIPTablesApplierMessageTooLong(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	first, second := h.snapshot(manyServices(60)), h.snapshot(manyServices(80))
	want := newFakeIPTables()
	wa := NewIPTablesApplier(iptablesConfig(t), want, nil)
	run := &smallSocket{fakeIPTables: newFakeIPTables(), max: 200}
	a := NewIPTablesApplier(iptablesConfig(t), run, nil)
	for i, step := range []struct {
		snap *model.Snapshot
		full bool
	}{{first, true}, {second, false}} {
		if _, err := wa.Apply(ctx, step.snap, step.full); err != nil {
			t.Fatal(err)
		}
		refused := run.refused
		if _, err := a.Apply(ctx, step.snap, step.full); err != nil {
			t.Fatalf("sync %d failed: %v", i, err)
		}
		if run.refused == refused {
			t.Fatalf("sync %d: no transaction was too long; the test shows nothing", i)
		}
		for _, table := range []string{"filter", "nat"} {
			w, _ := want.Save(ctx, table)
			g, _ := run.Save(ctx, table)
			if string(w) != string(g) {
				t.Errorf("sync %d: %s table differs from one restored in one transaction:\n%s", i, table, cmp.Diff(string(w), string(g)))
			}
		}
	}
}
