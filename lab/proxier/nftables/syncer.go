//go:build linux

package nftables

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	netutils "k8s.io/utils/net"
	"sigs.k8s.io/knftables"

	"github.com/svclab/svclab/lab/proxier/model"
)

// DefaultMasqueradeBit is kube-proxy's default masqueradeBit (mark 0x4000).
const DefaultMasqueradeBit = 14

// Config is the node-level configuration of the nftables proxier.
type Config struct {
	// Family is v1.IPv4Protocol (table "ip kube-proxy") or v1.IPv6Protocol.
	Family v1.IPFamily
	// NodeIP is the node's primary IP of Family; it decides whether a
	// loadBalancerSourceRange contains the node.
	NodeIP net.IP
	// ClusterCIDR is the pod CIDR of Family used to tell pod traffic from
	// other traffic (kube-proxy's detect-local-mode ClusterCIDR). Empty
	// disables the pod-traffic rules, as upstream's no-op detector does.
	ClusterCIDR string
	// ServiceCIDRs of Family; traffic to unallocated ClusterIPs in them is
	// dropped.
	ServiceCIDRs []string
	// NodePortAddresses selects where NodePorts are served; nil means all
	// local addresses.
	NodePortAddresses *model.NodePortAddresses
	// LocalAddresses are the node's interface addresses, filtered by
	// NodePortAddresses to fill the nodeport-ips set.
	LocalAddresses []net.IP
	// MasqueradeAll masquerades all traffic to ClusterIPs.
	MasqueradeAll bool
	// MasqueradeBit selects the fwmark bit (0 means DefaultMasqueradeBit).
	MasqueradeBit int
	// MasqueradeMark overrides the text of the mark in rules. Empty means
	// what kube-proxy writes: 1<<MasqueradeBit formatted "%#08x", i.e.
	// "0x00004000" (nft lists it as 0x00004000; upstream's unit tests use
	// "0x4000").
	MasqueradeMark string
}

// validate checks cfg and fills in defaults.
func (cfg Config) validate() (Config, error) {
	if cfg.Family != v1.IPv4Protocol && cfg.Family != v1.IPv6Protocol {
		return cfg, fmt.Errorf("nftables config: unknown IP family %q", cfg.Family)
	}
	if cfg.MasqueradeBit == 0 {
		cfg.MasqueradeBit = DefaultMasqueradeBit
	}
	if cfg.MasqueradeBit < 0 || cfg.MasqueradeBit > 31 {
		return cfg, fmt.Errorf("nftables config: masquerade bit %d out of range 0..31", cfg.MasqueradeBit)
	}
	isV6 := cfg.Family == v1.IPv6Protocol
	if cfg.ClusterCIDR != "" {
		if _, _, err := netutils.ParseCIDRSloppy(cfg.ClusterCIDR); err != nil {
			return cfg, fmt.Errorf("nftables config: cluster CIDR: %w", err)
		}
		if netutils.IsIPv6CIDRString(cfg.ClusterCIDR) != isV6 {
			return cfg, fmt.Errorf("nftables config: cluster CIDR %s is not %s", cfg.ClusterCIDR, cfg.Family)
		}
	}
	for _, c := range cfg.ServiceCIDRs {
		if _, _, err := netutils.ParseCIDRSloppy(c); err != nil {
			return cfg, fmt.Errorf("nftables config: service CIDR: %w", err)
		}
		if netutils.IsIPv6CIDRString(c) != isV6 {
			return cfg, fmt.Errorf("nftables config: service CIDR %s is not %s", c, cfg.Family)
		}
	}
	if cfg.NodePortAddresses == nil {
		npa, err := model.NewNodePortAddresses(cfg.Family, nil, cfg.NodeIP)
		if err != nil {
			return cfg, err
		}
		cfg.NodePortAddresses = npa
	}
	return cfg, nil
}

// Syncer programs a model.Snapshot into the kube-proxy nftables table, the
// way kube-proxy v1.37's nftables proxier does. It remembers what it
// programmed so that later syncs can be partial. A Syncer is not safe for
// concurrent use.
type Syncer struct {
	cfg    Config
	nft    knftables.Interface
	logger *slog.Logger
	now    func() time.Time

	ipX, addrType       string
	masqueradeMark      string
	masqueradeRule      string
	matchNotLocalhost   string
	baseChainsRecreated bool
	needFullSync        bool
	staleChains         map[string]time.Time
	prev                *model.Snapshot
	clusterIPs          *elementStore
	serviceIPs          *elementStore
	firewallIPs         *elementStore
	noEndpointServices  *elementStore
	noEndpointNodePorts *elementStore
	serviceNodePorts    *elementStore
	hairpinConnections  *elementStore
	// chainNames caches the per-ServicePort chain names (a SHA-256
	// each), which every sync needs for every ServicePort.
	chainNames map[model.ServicePortName]portChains
	// ports remembers, per ServicePort, the chains, affinity sets and
	// elements the last sync ensured for it; a partial sync replays them
	// for a port that is the same *ServicePort as before instead of
	// recomputing them.
	ports map[model.ServicePortName]*portRecord
	// serviceChains and affinitySets are the per-service chains and the
	// affinity sets in the kernel after the last successful sync (nil
	// before one); partial syncs use them instead of listing the table.
	serviceChains map[string]bool
	affinitySets  map[string]bool
}

// portOp is one thing a sync ensures for a ServicePort: a chain, an
// affinity set (kept), or an element of a set or map.
type portOp struct {
	chain, affinitySet string
	store              *elementStore
	elem               *knftables.Element
	key, value         string // elem's joined key and value
}

// portRecord is what a sync ensured for one ServicePort.
type portRecord struct {
	sp  *model.ServicePort
	ops []portOp
}

// syncState is what writeServices accumulates.
type syncState struct {
	tx                 *knftables.Transaction
	activeChains       map[string]bool
	activeAffinitySets map[string]bool
}

func (st *syncState) do(op *portOp, skip bool) {
	switch {
	case op.store != nil:
		op.store.ensure(st.tx, op.elem, op.key, op.value)
	case op.chain != "":
		ensureChain(st.tx, op.chain, st.activeChains, skip)
	default:
		st.activeAffinitySets[op.affinitySet] = true
	}
}

// portRecorder does and records the ops of one ServicePort.
type portRecorder struct {
	st   *syncState
	skip bool
	rec  *portRecord
}

func (r *portRecorder) chain(name string) {
	r.rec.ops = append(r.rec.ops, portOp{chain: name})
	r.st.do(&r.rec.ops[len(r.rec.ops)-1], r.skip)
}

func (r *portRecorder) affinitySet(name string) {
	r.rec.ops = append(r.rec.ops, portOp{affinitySet: name})
	r.st.do(&r.rec.ops[len(r.rec.ops)-1], r.skip)
}

func (r *portRecorder) elem(store *elementStore, e *knftables.Element) {
	r.rec.ops = append(r.rec.ops, portOp{store: store, elem: e, key: joinElem(e.Key), value: joinElem(e.Value)})
	r.st.do(&r.rec.ops[len(r.rec.ops)-1], r.skip)
}

// chainsFor is chainsFor, cached; names of Services that are gone are
// dropped by the next full sync.
func (s *Syncer) chainsFor(name model.ServicePortName) portChains {
	if c, ok := s.chainNames[name]; ok {
		return c
	}
	c := chainsFor(name)
	s.chainNames[name] = c
	return c
}

// New returns a Syncer for the table "kube-proxy" behind nft, which must be
// an Interface for cfg.Family and that table (knftables.New or
// knftables.NewFake). logger may be nil.
func New(cfg Config, nft knftables.Interface, logger *slog.Logger) (*Syncer, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Syncer{
		cfg:                 cfg,
		nft:                 nft,
		logger:              logger.With("component", "nftables", "family", string(cfg.Family)),
		now:                 time.Now,
		ipX:                 "ip",
		addrType:            "ipv4_addr",
		matchNotLocalhost:   "ip daddr != 127.0.0.0/8",
		needFullSync:        true,
		staleChains:         map[string]time.Time{},
		chainNames:          map[model.ServicePortName]portChains{},
		ports:               map[model.ServicePortName]*portRecord{},
		clusterIPs:          newElementStore("set", clusterIPsSet),
		serviceIPs:          newElementStore("map", serviceIPsMap),
		firewallIPs:         newElementStore("map", firewallIPsMap),
		noEndpointServices:  newElementStore("map", noEndpointServicesMap),
		noEndpointNodePorts: newElementStore("map", noEndpointNodePortsMap),
		serviceNodePorts:    newElementStore("map", serviceNodePortsMap),
		hairpinConnections:  newElementStore("set", hairpinConnectionsSet),
	}
	if cfg.Family == v1.IPv6Protocol {
		s.ipX, s.addrType, s.matchNotLocalhost = "ip6", "ipv6_addr", "ip6 daddr != ::1"
	}
	s.masqueradeMark = cfg.MasqueradeMark
	if s.masqueradeMark == "" {
		s.masqueradeMark = fmt.Sprintf("%#08x", 1<<uint(cfg.MasqueradeBit))
	}
	s.masqueradeRule = "mark set mark or " + s.masqueradeMark
	return s, nil
}

// SetClock replaces time.Now (used to age stale chains); for tests.
func (s *Syncer) SetClock(now func() time.Time) { s.now = now }

// ForceFullSync makes the next Sync a full one (as after a topology change).
func (s *Syncer) ForceFullSync() { s.needFullSync = true }

// stores lists the element stores in a fixed order.
func (s *Syncer) stores() []*elementStore {
	return []*elementStore{s.clusterIPs, s.serviceIPs, s.firewallIPs, s.noEndpointServices, s.noEndpointNodePorts, s.serviceNodePorts, s.hairpinConnections}
}

// SyncResult describes what a Sync did.
type SyncResult struct {
	// Full is true for a full sync.
	Full bool
	// Changed lists the Services whose chains were rewritten by a partial
	// sync (nil for a full sync).
	Changed []types.NamespacedName
	// StaleChainsDeleted are the stale chains deleted before the sync.
	StaleChainsDeleted []string
	// StaleChainsFlushed are the chains this sync found unused and flushed;
	// a later sync deletes them.
	StaleChainsFlushed []string
	// Transaction is the main transaction that was run.
	Transaction *knftables.Transaction
}

// Sync programs snap. The first sync, and the first after a failure or
// ForceFullSync, is full: it (re)creates the static objects, rewrites every
// service chain and reconciles every set and map against the kernel. Later
// syncs are partial: they rewrite only the chains of Services that changed
// since the previous snapshot, and add or delete only the map elements
// that changed. Chains that are no longer used are flushed and deleted by a
// sync at least one second later.
func (s *Syncer) Sync(ctx context.Context, snap *model.Snapshot) (*SyncResult, error) {
	if snap.Family != s.cfg.Family {
		return nil, fmt.Errorf("nftables sync: snapshot family %s does not match proxier family %s", snap.Family, s.cfg.Family)
	}
	start := s.now()
	// A change of node (topology labels) affects every Service's endpoint
	// selection, so it forces a full sync, as OnTopologyChange does.
	if s.prev != nil && (s.prev.NodeName != snap.NodeName || !maps.Equal(s.prev.TopologyLabels, snap.TopologyLabels)) {
		s.needFullSync = true
	}
	res := &SyncResult{Full: s.needFullSync}

	deleted, err := s.deleteStaleChains(ctx, start)
	res.StaleChainsDeleted = deleted
	if err != nil {
		s.logger.ErrorContext(ctx, "unable to delete stale chains; will retry later", "err", err)
		res.Full = true
	}

	var changed map[types.NamespacedName]bool
	if !res.Full {
		changed = model.ChangedServices(s.prev, snap)
		for n := range changed {
			res.Changed = append(res.Changed, n)
		}
		slices.SortFunc(res.Changed, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	}

	tx := s.nft.NewTransaction()
	res.Transaction = tx
	var sets []string
	if res.Full {
		clear(s.chainNames)
		clear(s.ports)
		var exists bool
		var err error
		if sets, exists, err = s.listSets(ctx); err != nil {
			s.logger.ErrorContext(ctx, "failed to list existing sets", "err", err)
		}
		s.setup(ctx, tx, exists)
	}
	st := &syncState{tx: tx, activeChains: map[string]bool{}, activeAffinitySets: map[string]bool{}}
	var chains, affinitySets map[string]bool
	res.StaleChainsFlushed, chains, affinitySets = s.writeServices(ctx, st, snap, res.Full, sets, changed, start)

	s.logger.DebugContext(ctx, "running nftables transaction", "full", res.Full, "ports", len(snap.Ports), "operations", tx.NumOperations())
	if err := s.nft.Run(ctx, tx); err != nil {
		// The element stores and stale chains no longer describe the
		// kernel; a full sync re-reads them.
		s.needFullSync = true
		clear(s.staleChains)
		s.serviceChains, s.affinitySets = nil, nil
		return res, fmt.Errorf("nftables sync: %w", err)
	}
	s.needFullSync = false
	s.prev = snap
	s.serviceChains, s.affinitySets = chains, affinitySets
	return res, nil
}

// deleteStaleChains deletes, in their own transaction, the chains that were
// flushed at least one second ago (kernels before 6.2 need the delay after a
// map element referring to a chain is removed).
func (s *Syncer) deleteStaleChains(ctx context.Context, now time.Time) ([]string, error) {
	oneSecondAgo := now.Add(-time.Second)
	var names []string
	for chain, flushed := range s.staleChains {
		if flushed.Before(oneSecondAgo) {
			names = append(names, chain)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	slices.Sort(names)
	tx := s.nft.NewTransaction()
	for _, chain := range names {
		tx.Delete(&knftables.Chain{Name: chain})
		delete(s.staleChains, chain)
	}
	s.logger.InfoContext(ctx, "deleting stale nftables chains", "chains", len(names))
	if err := s.nft.Run(ctx, tx); err != nil {
		s.serviceChains, s.affinitySets = nil, nil
		return names, fmt.Errorf("delete stale chains: %w", err)
	}
	for _, chain := range names {
		delete(s.serviceChains, chain)
	}
	return names, nil
}

type jumpChain struct{ dst, src, extra string }

var baseChains = []struct {
	name     string
	typ      knftables.BaseChainType
	hook     knftables.BaseChainHook
	priority knftables.BaseChainPriority
}{
	{filterPreroutingPreDNATChain, knftables.FilterType, knftables.PreroutingHook, knftables.DNATPriority + "-10"},
	{filterOutputPreDNATChain, knftables.FilterType, knftables.OutputHook, knftables.DNATPriority + "-10"},
	{filterInputChain, knftables.FilterType, knftables.InputHook, knftables.FilterPriority},
	{filterForwardChain, knftables.FilterType, knftables.ForwardHook, knftables.FilterPriority},
	{filterOutputChain, knftables.FilterType, knftables.OutputHook, knftables.FilterPriority},
	{natPreroutingChain, knftables.NATType, knftables.PreroutingHook, knftables.DNATPriority},
	{natOutputChain, knftables.NATType, knftables.OutputHook, knftables.DNATPriority},
	{natPostroutingChain, knftables.NATType, knftables.PostroutingHook, knftables.SNATPriority},
}

// jumpChains are the regular chains the base chains jump to, in upstream's
// order. (The endpoint checks are not in the pre-DNAT chains because
// "reject" needs the input, forward or output hook on kernels before 5.9.)
var jumpChains = []jumpChain{
	{nodePortEndpointsCheckChain, filterInputChain, "ct state new"},
	{serviceEndpointsCheckChain, filterInputChain, "ct state new"},
	{serviceEndpointsCheckChain, filterForwardChain, "ct state new"},
	{serviceEndpointsCheckChain, filterOutputChain, "ct state new"},
	{firewallCheckChain, filterPreroutingPreDNATChain, "ct state new"},
	{firewallCheckChain, filterOutputPreDNATChain, "ct state new"},
	{servicesChain, natOutputChain, ""},
	{servicesChain, natPreroutingChain, ""},
	{masqueradingChain, natPostroutingChain, ""},
	{clusterIPsCheckChain, filterForwardChain, "ct state new"},
	{clusterIPsCheckChain, filterOutputChain, "ct state new"},
}

// ensureChain adds and flushes chain once per transaction; with skip it
// only records the chain as in use.
func ensureChain(tx *knftables.Transaction, chain string, created map[string]bool, skip bool) {
	if created[chain] {
		return
	}
	created[chain] = true
	if skip {
		return
	}
	tx.Add(&knftables.Chain{Name: chain})
	tx.Flush(&knftables.Chain{Name: chain})
}

func ptrTo[T any](v T) *T { return &v }

// setup writes the static part of the ruleset (the full-sync prologue) and
// reloads the element stores from the kernel.
func (s *Syncer) setup(ctx context.Context, tx *knftables.Transaction, tableExists bool) {
	ipX, addr := s.ipX, s.addrType
	tx.Add(&knftables.Table{Comment: ptrTo("rules for kube-proxy")})

	// Once per process, add and delete the base chains so that changed
	// properties (e.g. priorities from an older version) are recreated.
	if !s.baseChainsRecreated {
		for _, bc := range baseChains {
			tx.Add(&knftables.Chain{Name: bc.name})
			tx.Delete(&knftables.Chain{Name: bc.name})
		}
		s.baseChainsRecreated = true
	}
	for _, bc := range baseChains {
		c := &knftables.Chain{Name: bc.name, Type: ptrTo(bc.typ), Hook: ptrTo(bc.hook), Priority: ptrTo(bc.priority)}
		tx.Add(c)
		tx.Flush(c)
	}

	created := map[string]bool{}
	for _, j := range jumpChains {
		ensureChain(tx, j.dst, created, false)
		tx.Add(&knftables.Rule{Chain: j.src, Rule: knftables.Concat(j.extra, "jump", j.dst)})
	}
	for _, c := range []string{servicesChain, clusterIPsCheckChain, masqueradingChain} {
		ensureChain(tx, c, created, false)
	}

	tx.Add(&knftables.Set{
		Name:    hairpinConnectionsSet,
		Type:    addr + " . " + addr + " . inet_proto . inet_service",
		Comment: ptrTo("service hairpin connections"),
	})
	tx.Add(&knftables.Rule{
		Chain: masqueradingChain,
		Rule:  knftables.Concat("mark", "and", s.masqueradeMark, "!=", "0", "mark", "set", "mark", "xor", s.masqueradeMark, "masquerade fully-random"),
	})
	tx.Add(&knftables.Rule{
		Chain: masqueradingChain,
		Rule: knftables.Concat("ct status dnat",
			ipX, "saddr", ".", ipX, "daddr", ".", "meta l4proto", ".", "th dport", "@", hairpinConnectionsSet,
			"masquerade fully-random"),
	})

	tx.Add(&knftables.Set{Name: clusterIPsSet, Type: addr, Comment: ptrTo("Active ClusterIPs")})
	tx.Add(&knftables.Rule{
		Chain:   clusterIPsCheckChain,
		Rule:    knftables.Concat(ipX, "daddr", "@", clusterIPsSet, "reject"),
		Comment: ptrTo("Reject traffic to invalid ports of ClusterIPs"),
	})
	if len(s.cfg.ServiceCIDRs) > 0 {
		tx.Add(&knftables.Rule{
			Chain:   clusterIPsCheckChain,
			Rule:    knftables.Concat(ipX, "daddr", "{", strings.Join(s.cfg.ServiceCIDRs, ","), "}", "drop"),
			Comment: ptrTo("Drop traffic to unallocated ClusterIPs"),
		})
	}

	// nodeport-ips exists only when NodePorts are limited to some addresses.
	// ("add" before "delete" so that the delete cannot fail.)
	tx.Add(&knftables.Set{Name: nodePortIPsSet, Type: addr, Comment: ptrTo("IPs that accept NodePort traffic")})
	npa := s.cfg.NodePortAddresses
	if npa.MatchAll() {
		tx.Delete(&knftables.Set{Name: nodePortIPsSet})
	} else {
		tx.Flush(&knftables.Set{Name: nodePortIPsSet})
		for _, ip := range npa.NodeIPs(s.cfg.LocalAddresses) {
			if ip.IsLoopback() {
				continue
			}
			tx.Add(&knftables.Element{Set: nodePortIPsSet, Key: []string{ip.String()}})
		}
	}

	tx.Add(&knftables.Map{
		Name:    noEndpointServicesMap,
		Type:    addr + " . inet_proto . inet_service : verdict",
		Comment: ptrTo("vmap to drop or reject packets to services with no endpoints"),
	})
	tx.Add(&knftables.Map{
		Name:    noEndpointNodePortsMap,
		Type:    "inet_proto . inet_service : verdict",
		Comment: ptrTo("vmap to drop or reject packets to service nodeports with no endpoints"),
	})
	tx.Add(&knftables.Chain{Name: rejectChain, Comment: ptrTo("helper for @no-endpoint-services / @no-endpoint-nodeports")})
	tx.Flush(&knftables.Chain{Name: rejectChain})
	tx.Add(&knftables.Rule{Chain: rejectChain, Rule: "reject"})
	tx.Add(&knftables.Rule{
		Chain: serviceEndpointsCheckChain,
		Rule:  knftables.Concat(ipX, "daddr", ".", "meta l4proto", ".", "th dport", "vmap", "@", noEndpointServicesMap),
	})
	if npa.MatchAll() {
		tx.Add(&knftables.Rule{
			Chain: nodePortEndpointsCheckChain,
			Rule:  knftables.Concat(s.matchNotLocalhost, "meta l4proto . th dport", "vmap", "@", noEndpointNodePortsMap),
		})
	} else {
		tx.Add(&knftables.Rule{
			Chain: nodePortEndpointsCheckChain,
			Rule:  knftables.Concat(ipX, "daddr", "@", nodePortIPsSet, "meta l4proto . th dport", "vmap", "@", noEndpointNodePortsMap),
		})
	}

	// Localhost NodePort objects (alpha gate, not implemented): make sure
	// leftovers are gone, in dependency order.
	tx.Add(&knftables.Map{
		Name:    localhostNodePortRejectMap,
		Type:    "inet_proto . inet_service : verdict",
		Comment: ptrTo("localhost NodePorts rejected by kube-proxy"),
	})
	tx.Delete(&knftables.Map{Name: localhostNodePortRejectMap})
	for _, proto := range []string{"tcp", "udp", "sctp"} {
		chain := &knftables.Chain{Name: "localhost-nodeport-reject-" + proto}
		tx.Add(chain)
		tx.Delete(chain)
		// Two objects: knftables.Fake sets Handle on the Counter it adds,
		// and a shared one would turn the delete into "delete counter ...
		// handle N" (without a newline) in the rendered transaction.
		counterName := "localhost-nodeport-rejected-" + proto
		tx.Add(&knftables.Counter{Name: counterName})
		tx.Delete(&knftables.Counter{Name: counterName})
	}

	tx.Add(&knftables.Map{
		Name:    firewallIPsMap,
		Type:    addr + " . inet_proto . inet_service : verdict",
		Comment: ptrTo("destinations that are subject to LoadBalancerSourceRanges"),
	})
	ensureChain(tx, firewallCheckChain, created, false)
	tx.Add(&knftables.Rule{
		Chain: firewallCheckChain,
		Rule:  knftables.Concat(ipX, "daddr", ".", "meta l4proto", ".", "th dport", "vmap", "@", firewallIPsMap),
	})

	tx.Add(&knftables.Map{
		Name:    serviceIPsMap,
		Type:    addr + " . inet_proto . inet_service : verdict",
		Comment: ptrTo("ClusterIP, ExternalIP and LoadBalancer IP traffic"),
	})
	tx.Add(&knftables.Map{
		Name:    serviceNodePortsMap,
		Type:    "inet_proto . inet_service : verdict",
		Comment: ptrTo("NodePort traffic"),
	})

	switch {
	case s.cfg.MasqueradeAll:
		tx.Add(&knftables.Rule{
			Chain:   servicesChain,
			Rule:    knftables.Concat(ipX, "daddr", "@", clusterIPsSet, s.masqueradeRule),
			Comment: ptrTo("masquerade all clusterIP traffic"),
		})
	case s.cfg.ClusterCIDR != "":
		// Off-cluster traffic to a ClusterIP (e.g. via a static route to
		// the service range) may bounce off-node, so masquerade it.
		tx.Add(&knftables.Rule{
			Chain:   servicesChain,
			Rule:    knftables.Concat(ipX, "daddr", "@", clusterIPsSet, ipX, "saddr", "!=", s.cfg.ClusterCIDR, s.masqueradeRule),
			Comment: ptrTo("masquerade clusterIP traffic from outside cluster"),
		})
	}
	tx.Add(&knftables.Rule{
		Chain: servicesChain,
		Rule:  knftables.Concat(ipX, "daddr", ".", "meta l4proto", ".", "th dport", "vmap", "@", serviceIPsMap),
	})
	if npa.MatchAll() {
		tx.Add(&knftables.Rule{
			Chain: servicesChain,
			Rule:  knftables.Concat("fib daddr type local", s.matchNotLocalhost, "meta l4proto . th dport", "vmap", "@", serviceNodePortsMap),
		})
	} else {
		tx.Add(&knftables.Rule{
			Chain: servicesChain,
			Rule:  knftables.Concat(ipX, "daddr @nodeport-ips", "meta l4proto . th dport", "vmap", "@", serviceNodePortsMap),
		})
	}

	// Read the sets and maps back from the kernel (an nft command each,
	// so at once), unless there is no table yet, as on a fresh node.
	stores := s.stores()
	if !tableExists {
		for _, st := range stores {
			st.reset()
		}
		return
	}
	lists := make([][]*knftables.Element, len(stores))
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i, st := range stores {
		wg.Go(func() { lists[i], errs[i] = s.nft.ListElements(ctx, st.kind, st.name) })
	}
	wg.Wait()
	for i, st := range stores {
		if err := st.load(tx, lists[i], errs[i]); err != nil {
			s.logger.ErrorContext(ctx, "failed to list nftables elements; flushing", "err", err)
		}
	}
}

// listSets lists the table's sets; exists is false if there is no table.
func (s *Syncer) listSets(ctx context.Context) (sets []string, exists bool, err error) {
	sets, err = s.nft.List(ctx, "sets")
	if isNoTable(err) {
		return nil, false, nil
	}
	return sets, true, err
}

// isNoTable tells whether a listing failed because the table does not
// exist. (The netlink lister reports that as ENOENT, in text.)
func isNoTable(err error) bool {
	return err != nil && (knftables.IsNotFound(err) || errors.Is(err, syscall.ENOENT) || strings.HasSuffix(err.Error(), syscall.ENOENT.Error()))
}

// writeServices writes the per-ServicePort part of the transaction and the
// cleanup of stale chains, affinity sets and elements.
// It returns the chains it flushed as stale, and the per-service chains and
// affinity sets the kernel will have if the transaction succeeds.
func (s *Syncer) writeServices(ctx context.Context, st *syncState, snap *model.Snapshot, full bool, listedSets []string, changed map[types.NamespacedName]bool, start time.Time) (flushed []string, chains, sets map[string]bool) {
	existingChains, existingSets := s.existingServiceObjects(ctx, full, listedSets)

	ports := make(map[model.ServicePortName]*portRecord, len(snap.Ports))
	for _, sp := range snap.Ports {
		name := sp.Name
		skip := !full && !changed[name.NamespacedName]
		if prev := s.ports[name]; skip && prev != nil && prev.sp == sp {
			// Unchanged: ensure the same things as last time.
			for i := range prev.ops {
				st.do(&prev.ops[i], true)
			}
			ports[name] = prev
			continue
		}
		rec := &portRecorder{st: st, skip: skip, rec: &portRecord{sp: sp}}
		ports[name] = rec.rec
		p := s.planPort(snap, sp)
		s.writePortElements(rec, &p)
		// Everything else only concerns the service's own chains and
		// affinity sets, which a partial sync leaves alone for unchanged
		// services.
		if !skip {
			s.writePortChains(st.tx, &p)
		}
	}
	s.ports = ports

	flushed = s.writeCleanup(st, existingChains, existingSets, start)
	return flushed, existingChains, existingSets
}

// existingServiceObjects returns the per-service chains and the affinity
// sets the table holds before this sync. listedSets are the sets a full
// sync has already listed. The maps returned are the Syncer's own, or new
// ones; writeCleanup turns them into the state after the sync.
func (s *Syncer) existingServiceObjects(ctx context.Context, full bool, listedSets []string) (chains, sets map[string]bool) {
	// A full sync lists what the table holds; a partial one knows it
	// from the previous syncs (upstream lists every time, which costs
	// more than the rest of a partial sync of a large cluster).
	chains, sets = s.serviceChains, s.affinitySets
	if !full && chains != nil && sets != nil {
		return chains, sets
	}
	chains, sets = map[string]bool{}, map[string]bool{}
	list, err := s.nft.List(ctx, "chain")
	if err != nil && !knftables.IsNotFound(err) {
		s.logger.ErrorContext(ctx, "failed to list existing chains", "err", err)
	}
	for _, c := range list {
		if isServiceChainName(c) {
			chains[c] = true
		}
	}
	if !full {
		if listedSets, _, err = s.listSets(ctx); err != nil {
			s.logger.ErrorContext(ctx, "failed to list existing sets", "err", err)
		}
	}
	for _, set := range listedSets {
		if isAffinitySetName(set) {
			sets[set] = true
		}
	}
	return chains, sets
}

// portPlan is what a sync decides for one ServicePort before writing
// anything: its endpoints, which of its chains it uses, and where its
// internal (ClusterIP) and external (external IPs, load-balancer VIPs,
// NodePort) traffic goes. writePortElements and writePortChains share it.
type portPlan struct {
	sp       *model.ServicePort
	names    portChains
	cat      model.Categorized
	protocol string
	affinity bool

	// internalChain and externalPolicyChain are the policy chains
	// (cluster or local) of internal and external traffic; hasInternal
	// and hasExternal tell whether that policy has endpoints.
	internalChain, externalPolicyChain string
	hasInternal, hasExternal           bool
	// internalVerdict and externalVerdict are the no-endpoint verdicts:
	// "goto reject-chain" if the Service has no endpoints at all, "drop"
	// if only the policy has none, empty if the policy has endpoints.
	internalVerdict, externalVerdict string

	usesClusterChain, usesLocalChain     bool
	usesExternalChain, usesFirewallChain bool
}

// planPort computes the portPlan of sp.
func (s *Syncer) planPort(snap *model.Snapshot, sp *model.ServicePort) portPlan {
	names := s.chainsFor(sp.Name)
	cat := snap.Categorize(sp)
	p := portPlan{
		sp:       sp,
		names:    names,
		cat:      cat,
		protocol: sp.ProtocolLower(),
		affinity: sp.SessionAffinityClientIP,

		usesClusterChain: len(cat.Cluster) > 0 && sp.UsesClusterEndpoints(),
		usesLocalChain:   len(cat.Local) > 0 && sp.UsesLocalEndpoints(),
		// The external chain is needed whenever there are endpoints at
		// all: it short-circuits pod and node traffic even if no local
		// endpoint exists.
		usesExternalChain: cat.HasAnyEndpoints && sp.ExternallyAccessible(),
		usesFirewallChain: len(sp.LoadBalancerVIPs) > 0 && len(sp.LoadBalancerSourceRanges) > 0,
	}

	p.internalChain, p.hasInternal = names.cluster, cat.HasAnyEndpoints
	if sp.InternalPolicyLocal {
		p.internalChain = names.local
		if len(cat.Local) == 0 {
			p.hasInternal = false
		}
	}
	p.externalPolicyChain, p.hasExternal = names.cluster, cat.HasAnyEndpoints
	if sp.ExternalPolicyLocal {
		p.externalPolicyChain = names.local
		if len(cat.Local) == 0 {
			p.hasExternal = false
		}
	}

	if !cat.HasAnyEndpoints {
		p.internalVerdict = "goto " + rejectChain
		p.externalVerdict = "goto " + rejectChain
	} else {
		if !p.hasInternal {
			p.internalVerdict = "drop"
		}
		if !p.hasExternal {
			p.externalVerdict = "drop"
		}
	}
	return p
}

// writePortElements ensures, through rec, the chains and affinity sets of
// the ServicePort of p, and its elements of the shared sets and maps:
// hairpin connections, cluster IPs, service IPs (ClusterIP, external IPs,
// load-balancer VIPs), firewall IPs, NodePorts and the no-endpoint
// verdicts. For a Service a partial sync leaves alone, rec only marks the
// port's chains as in use instead of adding and flushing them.
func (s *Syncer) writePortElements(rec *portRecorder, p *portPlan) {
	sp, names, cat := p.sp, &p.names, &p.cat
	name := sp.Name
	protocol := p.protocol
	port := strconv.Itoa(sp.Port)
	comment := truncateComment(name.String())

	for _, ep := range cat.AllReachable {
		// Endpoint names (a SHA-256 each) only exist with affinity.
		if p.affinity {
			epChain, affSet := endpointNames(name, ep)
			rec.chain(epChain)
			rec.affinitySet(affSet)
		}
		if ep.Local {
			rec.elem(s.hairpinConnections, &knftables.Element{
				Set: hairpinConnectionsSet,
				Key: []string{ep.IP, ep.IP, protocol, strconv.Itoa(ep.Port)},
			})
		}
	}

	if p.usesClusterChain {
		rec.chain(names.cluster)
	}
	if p.usesLocalChain {
		rec.chain(names.local)
	}
	if p.usesExternalChain {
		rec.chain(names.external)
	}

	rec.elem(s.clusterIPs, &knftables.Element{Set: clusterIPsSet, Key: []string{sp.ClusterIP.String()}})
	if p.hasInternal {
		rec.elem(s.serviceIPs, &knftables.Element{
			Map:   serviceIPsMap,
			Key:   []string{sp.ClusterIP.String(), protocol, port},
			Value: []string{"goto " + p.internalChain},
		})
	} else {
		rec.elem(s.noEndpointServices, &knftables.Element{
			Map:     noEndpointServicesMap,
			Key:     []string{sp.ClusterIP.String(), protocol, port},
			Value:   []string{p.internalVerdict},
			Comment: &comment,
		})
	}

	for _, ip := range sp.ExternalIPs {
		if cat.HasAnyEndpoints {
			rec.elem(s.serviceIPs, &knftables.Element{
				Map:   serviceIPsMap,
				Key:   []string{ip.String(), protocol, port},
				Value: []string{"goto " + names.external},
			})
		}
		if !p.hasExternal {
			rec.elem(s.noEndpointServices, &knftables.Element{
				Map:     noEndpointServicesMap,
				Key:     []string{ip.String(), protocol, port},
				Value:   []string{p.externalVerdict},
				Comment: &comment,
			})
		}
	}

	if p.usesFirewallChain {
		rec.chain(names.firewall)
	}
	for _, ip := range sp.LoadBalancerVIPs {
		if cat.HasAnyEndpoints {
			rec.elem(s.serviceIPs, &knftables.Element{
				Map:   serviceIPsMap,
				Key:   []string{ip.String(), protocol, port},
				Value: []string{"goto " + names.external},
			})
		}
		if p.usesFirewallChain {
			rec.elem(s.firewallIPs, &knftables.Element{
				Map:   firewallIPsMap,
				Key:   []string{ip.String(), protocol, port},
				Value: []string{"goto " + names.firewall},
			})
		}
	}
	if !p.hasExternal {
		for _, ip := range sp.LoadBalancerVIPs {
			rec.elem(s.noEndpointServices, &knftables.Element{
				Map:     noEndpointServicesMap,
				Key:     []string{ip.String(), protocol, port},
				Value:   []string{p.externalVerdict},
				Comment: &comment,
			})
		}
	}

	if sp.NodePort != 0 {
		nodePort := strconv.Itoa(sp.NodePort)
		// NodePorts are never subject to loadBalancerSourceRanges.
		if cat.HasAnyEndpoints {
			rec.elem(s.serviceNodePorts, &knftables.Element{
				Map:   serviceNodePortsMap,
				Key:   []string{protocol, nodePort},
				Value: []string{"goto " + names.external},
			})
		}
		if !p.hasExternal {
			rec.elem(s.noEndpointNodePorts, &knftables.Element{
				Map:     noEndpointNodePortsMap,
				Key:     []string{protocol, nodePort},
				Value:   []string{p.externalVerdict},
				Comment: &comment,
			})
		}
	}
}

// writePortChains writes the contents of the chains of the ServicePort of
// p (which writePortElements added and flushed): the external chain, the
// firewall chain, the affinity sets, and the DNATs of the policy chains or,
// with affinity, their jumps to the endpoint chains and those chains.
func (s *Syncer) writePortChains(tx *knftables.Transaction, p *portPlan) {
	ipX := s.ipX
	sp, names, cat := p.sp, &p.names, &p.cat

	if p.usesExternalChain {
		if !sp.ExternalPolicyLocal {
			// Cluster endpoints may be on another node: masquerade.
			tx.Add(&knftables.Rule{Chain: names.external, Rule: s.masqueradeRule, Comment: ptrTo("masquerade")})
		} else {
			// Pod and node traffic to an external destination is
			// subject to neither traffic policy: it behaves as if it
			// went out to the load balancer and came back.
			if s.cfg.ClusterCIDR != "" {
				tx.Add(&knftables.Rule{
					Chain:   names.external,
					Rule:    knftables.Concat(ipX, "saddr", s.cfg.ClusterCIDR, "goto", names.cluster),
					Comment: ptrTo("short-circuit pod traffic"),
				})
			}
			tx.Add(&knftables.Rule{
				Chain:   names.external,
				Rule:    knftables.Concat("fib", "saddr", "type", "local", s.masqueradeRule),
				Comment: ptrTo("masquerade local traffic"),
			})
			tx.Add(&knftables.Rule{
				Chain:   names.external,
				Rule:    knftables.Concat("fib", "saddr", "type", "local", "goto", names.cluster),
				Comment: ptrTo("short-circuit local traffic"),
			})
		}
		if p.hasExternal {
			tx.Add(&knftables.Rule{Chain: names.external, Rule: knftables.Concat("goto", p.externalPolicyChain)})
		}
	}

	if p.usesFirewallChain {
		s.writeFirewall(tx, sp, names.firewall)
	}

	if p.affinity {
		for _, ep := range cat.AllReachable {
			_, affSet := endpointNames(sp.Name, ep)
			tx.Add(&knftables.Set{
				Name:    affSet,
				Type:    s.addrType,
				Flags:   []knftables.SetFlag{knftables.DynamicFlag, knftables.TimeoutFlag},
				Timeout: ptrTo(time.Duration(sp.StickyMaxAgeSeconds) * time.Second),
			})
		}
	}

	if !p.affinity {
		if p.usesClusterChain {
			s.writeDNATs(tx, sp, names.cluster, cat.Cluster)
		}
		if p.usesLocalChain {
			s.writeDNATs(tx, sp, names.local, cat.Local)
		}
		return
	}
	if p.usesClusterChain {
		s.writeEndpointJumps(tx, sp, names.cluster, cat.Cluster)
	}
	if p.usesLocalChain {
		s.writeEndpointJumps(tx, sp, names.local, cat.Local)
	}
	for _, ep := range cat.AllReachable {
		epChain, affSet := endpointNames(sp.Name, ep)
		tx.Add(&knftables.Rule{
			Chain: epChain,
			Rule:  knftables.Concat("update", "@", affSet, "{", ipX, "saddr", "}"),
		})
		tx.Add(&knftables.Rule{
			Chain: epChain,
			Rule:  knftables.Concat("meta l4proto", p.protocol, "dnat to", ep.String()),
		})
	}
}

// writeFirewall writes the rule of sp's firewall chain: drop what does not
// come from its loadBalancerSourceRanges.
func (s *Syncer) writeFirewall(tx *knftables.Transaction, sp *model.ServicePort, chain string) {
	var sources []string
	allowFromNode := false
	for _, cidr := range sp.LoadBalancerSourceRanges {
		if len(sources) > 0 {
			sources = append(sources, ",")
		}
		sources = append(sources, cidr.String())
		if s.cfg.NodeIP != nil && cidr.Contains(s.cfg.NodeIP) {
			allowFromNode = true
		}
	}
	// A VIP-style LB address is often local, so the node's own
	// requests loop back with the VIP as source: allow them.
	if allowFromNode {
		for _, ip := range sp.LoadBalancerVIPs {
			sources = append(sources, ",", ip.String())
		}
	}
	tx.Add(&knftables.Rule{
		Chain: chain,
		Rule:  knftables.Concat(s.ipX, "saddr", "!=", "{", sources, "}", "drop"),
	})
}

// writeCleanup writes the cleanup at the end of the transaction: it
// flushes the chains of existingChains that this sync did not use (a later
// sync deletes them), deletes the affinity sets of existingSets that it did
// not use and the elements that nothing ensured. It updates existingChains
// and existingSets to what the kernel will hold if the transaction
// succeeds, and returns the flushed chains.
func (s *Syncer) writeCleanup(st *syncState, existingChains, existingSets map[string]bool, start time.Time) (flushed []string) {
	tx := st.tx
	// Chains that are no longer used cannot be deleted right away (see
	// deleteStaleChains); flush them now and delete them later.
	// (existingChains and existingSets become the new state: they are
	// the Syncer's own only until the transaction fails, which drops them.)
	for chain := range existingChains {
		if !st.activeChains[chain] {
			flushed = append(flushed, chain)
		}
	}
	slices.Sort(flushed)
	for _, chain := range flushed {
		tx.Flush(&knftables.Chain{Name: chain})
		s.staleChains[chain] = start
	}
	for chain := range st.activeChains {
		existingChains[chain] = true
		if len(s.staleChains) > 0 {
			delete(s.staleChains, chain)
		}
	}
	// Stale affinity sets can go at once.
	var staleSets []string
	for set := range existingSets {
		if !st.activeAffinitySets[set] {
			staleSets = append(staleSets, set)
		}
	}
	slices.Sort(staleSets)
	for _, set := range staleSets {
		tx.Delete(&knftables.Set{Name: set})
		delete(existingSets, set)
	}
	for set := range st.activeAffinitySets {
		existingSets[set] = true
	}
	for _, store := range s.stores() {
		store.cleanup(tx)
	}
	return flushed
}

// writeDNATs writes the DNAT rule of a policy chain without affinity: a
// plain "dnat to" for one endpoint, a numgen map for several.
func (s *Syncer) writeDNATs(tx *knftables.Transaction, sp *model.ServicePort, chain string, eps []model.Endpoint) {
	protocol := sp.ProtocolLower()
	if len(eps) == 1 {
		tx.Add(&knftables.Rule{
			Chain: chain,
			Rule:  knftables.Concat("meta l4proto", protocol, "dnat to", hostPort(eps[0].IP, eps[0].Port)),
		})
		return
	}
	var elements []string
	for i, ep := range eps {
		elements = append(elements, strconv.Itoa(i), ":", ep.IP, ".", strconv.Itoa(ep.Port))
		if i != len(eps)-1 {
			elements = append(elements, ",")
		}
	}
	tx.Add(&knftables.Rule{
		Chain: chain,
		Rule: knftables.Concat("meta l4proto", protocol, "dnat", s.ipX, "addr . port to",
			"numgen random mod", len(eps), "map", "{", elements, "}"),
	})
}

// writeEndpointJumps writes the affinity lookups and the numgen vmap of a
// policy chain with ClientIP affinity.
func (s *Syncer) writeEndpointJumps(tx *knftables.Transaction, sp *model.ServicePort, chain string, eps []model.Endpoint) {
	var elements []string
	for i, ep := range eps {
		epChain, affSet := endpointNames(sp.Name, ep)
		tx.Add(&knftables.Rule{
			Chain: chain,
			Rule:  knftables.Concat(s.ipX, "saddr", "@", affSet, "goto", epChain),
		})
		elements = append(elements, strconv.Itoa(i), ":", "goto", epChain)
		if i != len(eps)-1 {
			elements = append(elements, ",")
		}
	}
	tx.Add(&knftables.Rule{
		Chain: chain,
		Rule:  knftables.Concat("numgen random mod", len(eps), "vmap", "{", elements, "}"),
	})
}
