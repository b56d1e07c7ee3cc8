package iptables

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	netutils "k8s.io/utils/net"

	"github.com/svclab/svclab/lab/proxier/model"
	"github.com/svclab/svclab/lab/proxier/nfacct"
)

// Top-level chains.
const (
	kubeServicesChain         = "KUBE-SERVICES"
	kubeExternalServicesChain = "KUBE-EXTERNAL-SERVICES"
	kubeNodePortsChain        = "KUBE-NODEPORTS"
	kubePostroutingChain      = "KUBE-POSTROUTING"
	kubeMarkMasqChain         = "KUBE-MARK-MASQ"
	kubeForwardChain          = "KUBE-FORWARD"
	kubeProxyFirewallChain    = "KUBE-PROXY-FIREWALL"
	kubeProxyCanaryChain      = "KUBE-PROXY-CANARY"
	kubeletFirewallChain      = "KUBE-FIREWALL"
)

// Per-service chain prefixes.
const (
	svcChainPrefix = "KUBE-SVC-"
	svlChainPrefix = "KUBE-SVL-"
	fwChainPrefix  = "KUBE-FW-"
	extChainPrefix = "KUBE-EXT-"
	sepChainPrefix = "KUBE-SEP-"
)

// largeClusterEndpointsThreshold switches off per-endpoint comments.
const largeClusterEndpointsThreshold = 1000

// DefaultMasqueradeBit is kube-proxy's default masqueradeBit (mark 0x4000).
const DefaultMasqueradeBit = 14

// Config is the node-level configuration of the iptables proxier.
type Config struct {
	// Family is v1.IPv4Protocol (iptables) or v1.IPv6Protocol (ip6tables).
	Family v1.IPFamily
	// NodeIP is the node's primary IP; it decides whether a
	// loadBalancerSourceRange contains the node.
	NodeIP net.IP
	// ClusterCIDR is the pod CIDR used to tell pod traffic apart; empty
	// disables the pod-traffic rules.
	ClusterCIDR string
	// NodePortAddresses selects where NodePorts are served; nil means all
	// local addresses (the iptables default).
	NodePortAddresses *model.NodePortAddresses
	// LocalAddresses are the node's interface addresses, used with explicit
	// NodePortAddresses.
	LocalAddresses []net.IP
	// MasqueradeAll masquerades all traffic to ClusterIPs.
	MasqueradeAll bool
	// MasqueradeBit selects the fwmark bit (0 means DefaultMasqueradeBit).
	MasqueradeBit int
	// MasqueradeMark overrides the mark text; empty means "%#08x" of
	// 1<<MasqueradeBit as kube-proxy writes it ("0x00004000").
	MasqueradeMark string
	// LocalhostNodePorts is iptables.localhostNodePorts (kube-proxy's
	// default is true; it only applies to IPv4 and is turned off when
	// NodePortAddresses excludes loopback).
	LocalhostNodePorts bool
	// ConntrackTCPBeLiberal means nf_conntrack_tcp_be_liberal=1, which
	// drops the "ctstate INVALID" rule.
	ConntrackTCPBeLiberal bool
	// NFAcct means the kernel supports nfacct, so kube-proxy counts dropped
	// INVALID packets and accepted localhost NodePort packets.
	NFAcct bool
}

func (cfg Config) validate() (Config, error) {
	if cfg.Family != v1.IPv4Protocol && cfg.Family != v1.IPv6Protocol {
		return cfg, fmt.Errorf("iptables config: unknown IP family %q", cfg.Family)
	}
	if cfg.MasqueradeBit == 0 {
		cfg.MasqueradeBit = DefaultMasqueradeBit
	}
	if cfg.MasqueradeBit < 0 || cfg.MasqueradeBit > 31 {
		return cfg, fmt.Errorf("iptables config: masquerade bit %d out of range 0..31", cfg.MasqueradeBit)
	}
	if cfg.MasqueradeMark == "" {
		cfg.MasqueradeMark = fmt.Sprintf("%#08x", 1<<uint(cfg.MasqueradeBit))
	}
	if cfg.ClusterCIDR != "" {
		if _, _, err := netutils.ParseCIDRSloppy(cfg.ClusterCIDR); err != nil {
			return cfg, fmt.Errorf("iptables config: cluster CIDR: %w", err)
		}
		if netutils.IsIPv6CIDRString(cfg.ClusterCIDR) != (cfg.Family == v1.IPv6Protocol) {
			return cfg, fmt.Errorf("iptables config: cluster CIDR %s is not %s", cfg.ClusterCIDR, cfg.Family)
		}
	}
	if cfg.NodePortAddresses == nil {
		npa, err := model.NewNodePortAddresses(cfg.Family, nil, cfg.NodeIP)
		if err != nil {
			return cfg, err
		}
		cfg.NodePortAddresses = npa
	}
	// As in NewProxier: localhost NodePorts are IPv4-only and off when the
	// NodePort addresses cannot include loopback.
	if cfg.Family == v1.IPv6Protocol || !cfg.NodePortAddresses.ContainsLoopback() {
		cfg.LocalhostNodePorts = false
	}
	return cfg, nil
}

// JumpRule is a rule kube-proxy inserts (iptables -I) into a built-in chain
// to reach its own chains; these are not part of the restore input.
type JumpRule struct {
	Table, Chain string
	Args         []string
}

// String renders the rule as an iptables command line.
func (j JumpRule) String() string {
	return strings.Join(append([]string{"-t", j.Table, "-I", j.Chain}, j.Args...), " ")
}

// JumpRules lists the jump rules of a full sync, in the order kube-proxy
// ensures them (each is prepended, so the last one ends up first).
func JumpRules() []JumpRule {
	type jump struct{ table, dst, src, comment, extra string }
	jumps := []jump{
		{"filter", kubeExternalServicesChain, "INPUT", "kubernetes externally-visible service portals", "-m conntrack --ctstate NEW"},
		{"filter", kubeExternalServicesChain, "FORWARD", "kubernetes externally-visible service portals", "-m conntrack --ctstate NEW"},
		{"filter", kubeNodePortsChain, "INPUT", "kubernetes health check service ports", ""},
		{"filter", kubeServicesChain, "FORWARD", "kubernetes service portals", "-m conntrack --ctstate NEW"},
		{"filter", kubeServicesChain, "OUTPUT", "kubernetes service portals", "-m conntrack --ctstate NEW"},
		{"filter", kubeForwardChain, "FORWARD", "kubernetes forwarding rules", ""},
		{"filter", kubeProxyFirewallChain, "INPUT", "kubernetes load balancer firewall", "-m conntrack --ctstate NEW"},
		{"filter", kubeProxyFirewallChain, "OUTPUT", "kubernetes load balancer firewall", "-m conntrack --ctstate NEW"},
		{"filter", kubeProxyFirewallChain, "FORWARD", "kubernetes load balancer firewall", "-m conntrack --ctstate NEW"},
		{"nat", kubeServicesChain, "OUTPUT", "kubernetes service portals", ""},
		{"nat", kubeServicesChain, "PREROUTING", "kubernetes service portals", ""},
		{"nat", kubePostroutingChain, "POSTROUTING", "kubernetes postrouting rules", ""},
		// Duplicates of kubelet's chain.
		{"filter", kubeletFirewallChain, "INPUT", "", ""},
		{"filter", kubeletFirewallChain, "OUTPUT", "", ""},
	}
	out := make([]JumpRule, 0, len(jumps))
	for _, j := range jumps {
		var args []string
		if j.extra != "" {
			args = append(args, strings.Fields(j.extra)...)
		}
		if j.comment != "" {
			args = append(args, "-m", "comment", "--comment", strconv.Quote(j.comment))
		}
		args = append(args, "-j", j.dst)
		out = append(out, JumpRule{Table: j.table, Chain: j.src, Args: args})
	}
	return out
}

// CanaryChains are the empty chains kube-proxy creates in each table to
// notice when someone flushes iptables.
func CanaryChains() []string {
	return []string{"mangle " + kubeProxyCanaryChain, "nat " + kubeProxyCanaryChain, "filter " + kubeProxyCanaryChain}
}

// portProtoHash is the shared 16-character suffix of a ServicePort's chains.
func portProtoHash(servicePortName, protocol string) string {
	hash := sha256.Sum256([]byte(servicePortName + protocol))
	return base32.StdEncoding.EncodeToString(hash[:])[:16]
}

// ServiceChainSuffix returns the hash suffix of the KUBE-SVC/SVL/EXT/FW
// chains of a ServicePort.
func ServiceChainSuffix(name model.ServicePortName) string {
	return portProtoHash(name.String(), strings.ToLower(string(name.Protocol)))
}

// EndpointChain returns the KUBE-SEP chain of an endpoint of a ServicePort.
func EndpointChain(name model.ServicePortName, ep model.Endpoint) string {
	hash := sha256.Sum256([]byte(name.String() + strings.ToLower(string(name.Protocol)) + ep.String()))
	return sepChainPrefix + base32.StdEncoding.EncodeToString(hash[:])[:16]
}

// NameCache remembers chain names across renders (each is a SHA-256), as
// upstream keeps them in its service and endpoint infos. The zero value is
// ready; a NameCache is not safe for concurrent use.
type NameCache struct {
	suffixes map[model.ServicePortName]string
	seps     map[sepKey]string
	// reachable are the endpoint chains of each ServicePort's reachable
	// endpoints (an unchanged port is the same *ServicePort, see
	// model.Builder); used holds those of the render in progress, which
	// replace them when it ends.
	reachable, used map[*model.ServicePort][]string
}

// begin and end bracket a render.
func (c *NameCache) begin() {
	if c != nil {
		c.used = make(map[*model.ServicePort][]string, len(c.reachable))
	}
}

func (c *NameCache) end() {
	if c != nil {
		c.reachable, c.used = c.used, nil
	}
}

// reachableChains returns the endpoint chains of eps, the reachable
// endpoints of sp.
func (c *NameCache) reachableChains(sp *model.ServicePort, eps []model.Endpoint) []string {
	if c != nil {
		if chains, ok := c.reachable[sp]; ok {
			c.used[sp] = chains
			return chains
		}
	}
	chains := make([]string, len(eps))
	for i, ep := range eps {
		chains[i] = c.endpointChain(sp.Name, ep)
	}
	if c != nil {
		c.used[sp] = chains
	}
	return chains
}

type sepKey struct {
	name model.ServicePortName
	ep   string
}

// Reset forgets every name (a full sync does, so that removed Services'
// names go).
func (c *NameCache) Reset() {
	if c != nil {
		c.suffixes, c.seps, c.reachable = nil, nil, nil
	}
}

func (c *NameCache) suffix(name model.ServicePortName) string {
	if c == nil {
		return ServiceChainSuffix(name)
	}
	if s, ok := c.suffixes[name]; ok {
		return s
	}
	if c.suffixes == nil {
		c.suffixes = map[model.ServicePortName]string{}
	}
	s := ServiceChainSuffix(name)
	c.suffixes[name] = s
	return s
}

func (c *NameCache) endpointChain(name model.ServicePortName, ep model.Endpoint) string {
	if c == nil {
		return EndpointChain(name, ep)
	}
	k := sepKey{name, ep.String()}
	if s, ok := c.seps[k]; ok {
		return s
	}
	if c.seps == nil {
		c.seps = map[sepKey]string{}
	}
	s := EndpointChain(name, ep)
	c.seps[k] = s
	return s
}

func isServiceChainName(chain string) bool {
	for _, p := range []string{svcChainPrefix, svlChainPrefix, sepChainPrefix, fwChainPrefix, extChainPrefix} {
		if strings.HasPrefix(chain, p) {
			return true
		}
	}
	return false
}

// probability is 1/n formatted as kube-proxy does.
func probability(n int) string { return fmt.Sprintf("%0.10f", 1.0/float64(n)) }

// table accumulates the chains and rules of one iptables table.
type table struct {
	name    string
	chains  []string
	known   map[string]bool
	rules   map[string][]string
	deletes []string
}

func newTable(name string) *table {
	return &table{name: name, known: map[string]bool{}, rules: map[string][]string{}}
}

func (t *table) chain(name string) {
	if !t.known[name] {
		t.known[name] = true
		t.chains = append(t.chains, name)
	}
}

// rule appends "-A chain args..." (args are joined with spaces, as
// kube-proxy's LineBuffer does).
func (t *table) rule(chain string, args ...string) {
	t.rules[chain] = append(t.rules[chain], strings.Join(append([]string{"-A", chain}, args...), " "))
}

// chainLess orders chains as iptables-save output is compared upstream:
// KUBE-NODEPORTS, KUBE-SERVICES, other KUBE-* chains, then the rest, each
// group alphabetically.
func chainLess(a, b string) int {
	rank := func(c string) int {
		switch {
		case c == kubeNodePortsChain:
			return 0
		case c == kubeServicesChain:
			return 1
		case strings.HasPrefix(c, "KUBE-"):
			return 2
		}
		return 3
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra - rb
	}
	return strings.Compare(a, b)
}

func (t *table) write(b *strings.Builder) {
	fmt.Fprintf(b, "*%s\n", t.name)
	chains := slices.Clone(t.chains)
	slices.SortFunc(chains, chainLess)
	for _, c := range chains {
		fmt.Fprintf(b, ":%s - [0:0]\n", c)
	}
	for _, c := range chains {
		for _, r := range t.rules[c] {
			b.WriteString(r + "\n")
		}
	}
	for _, c := range t.deletes {
		fmt.Fprintf(b, "-X %s\n", c)
	}
	b.WriteString("COMMIT\n")
}

// Options select a partial sync.
type Options struct {
	// Changed lists the Services whose chains must be rewritten; nil means a
	// full sync (every chain). With a partial sync the chains of other
	// Services are left out of the input, which iptables-restore --noflush
	// leaves untouched.
	Changed map[types.NamespacedName]bool
	// ExistingNATChains are the chains currently in the nat table (from
	// iptables-save); unused per-service chains among them are deleted.
	ExistingNATChains []string
	// Names, if set, caches chain names from one render to the next.
	Names *NameCache
}

// Result is the output of Render.
type Result struct {
	// Restore is the iptables-restore input (to be applied with --noflush
	// --counters).
	Restore string
	// LargeClusterMode is true above 1000 endpoints (comments are dropped
	// from endpoint rules).
	LargeClusterMode bool
	// DeletedChains are the stale service chains the input deletes.
	DeletedChains []string
	// ServiceChains are the per-service nat chains the rules use once the
	// input is applied (those of unchanged Services included): with
	// DeletedChains gone, the service chains the nat table then holds.
	ServiceChains map[string]bool
}

// Render produces the iptables-restore input kube-proxy v1.37 writes for
// snap (filter and nat tables). logger may be nil.
func Render(ctx context.Context, logger *slog.Logger, cfg Config, snap *model.Snapshot, opts Options) (*Result, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if snap.Family != cfg.Family {
		return nil, fmt.Errorf("iptables render: snapshot family %s does not match config family %s", snap.Family, cfg.Family)
	}
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	r := &renderer{cfg: cfg, snap: snap, opts: opts, filter: newTable("filter"), nat: newTable("nat"), activeNAT: map[string]bool{}}
	opts.Names.begin()
	defer opts.Names.end()
	res := r.render()
	logger.DebugContext(ctx, "rendered iptables rules", "ports", len(snap.Ports), "largeClusterMode", res.LargeClusterMode, "deletedChains", len(res.DeletedChains))
	return res, nil
}

type renderer struct {
	cfg         Config
	snap        *model.Snapshot
	opts        Options
	filter, nat *table
	activeNAT   map[string]bool
	largeMode   bool
}

func (r *renderer) isV6() bool { return r.cfg.Family == v1.IPv6Protocol }

// commentArgs returns the comment match, or nothing in large cluster mode.
func (r *renderer) commentArgs(comment string) []string {
	if r.largeMode {
		return nil
	}
	return []string{"-m", "comment", "--comment", comment}
}

func quote(s string) string { return `"` + s + `"` }

func (r *renderer) render() *Result {
	cfg := r.cfg
	mark := cfg.MasqueradeMark
	filter, nat := r.filter, r.nat

	for _, c := range []string{kubeServicesChain, kubeExternalServicesChain, kubeForwardChain, kubeNodePortsChain, kubeProxyFirewallChain} {
		filter.chain(c)
	}
	for _, c := range []string{kubeServicesChain, kubeNodePortsChain, kubePostroutingChain, kubeMarkMasqChain} {
		nat.chain(c)
	}

	nat.rule(kubePostroutingChain, "-m", "mark", "!", "--mark", mark+"/"+mark, "-j", "RETURN")
	// Clear the mark so a re-traversal (e.g. IPsec) does not masquerade again.
	nat.rule(kubePostroutingChain, "-j", "MARK", "--xor-mark", mark)
	nat.rule(kubePostroutingChain, "-m", "comment", "--comment", quote("kubernetes service traffic requiring SNAT"), "-j", "MASQUERADE", "--random-fully")
	nat.rule(kubeMarkMasqChain, "-j", "MARK", "--or-mark", mark)

	if !r.isV6() && cfg.LocalhostNodePorts {
		// Block martian localnet packets (route_localnet=1 is set for
		// localhost NodePorts), as kubelet's copy of this chain does.
		filter.chain(kubeletFirewallChain)
		filter.rule(kubeletFirewallChain, "-m", "comment", "--comment", quote("block incoming localnet connections"),
			"-d", "127.0.0.0/8", "!", "-s", "127.0.0.0/8", "-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT", "-j", "DROP")
	}

	total := 0
	for _, sp := range r.snap.Ports {
		total += len(sp.Endpoints)
	}
	r.largeMode = total > largeClusterEndpointsThreshold

	for _, sp := range r.snap.Ports {
		r.writeServicePort(sp)
	}

	res := &Result{LargeClusterMode: r.largeMode, ServiceChains: r.activeNAT}
	existing := slices.Clone(r.opts.ExistingNATChains)
	slices.Sort(existing)
	for _, c := range slices.Compact(existing) {
		if isServiceChainName(c) && !r.activeNAT[c] {
			nat.chain(c)
			nat.deletes = append(nat.deletes, c)
			res.DeletedChains = append(res.DeletedChains, c)
		}
	}

	// The NodePort jump must be the last rule of nat KUBE-SERVICES.
	lastComment := quote("kubernetes service nodeports; NOTE: this must be the last rule in this chain")
	if cfg.NodePortAddresses.MatchAll() {
		dest := []string{"-m", "addrtype", "--dst-type", "LOCAL"}
		if r.isV6() {
			dest = append(dest, "!", "-d", "::1/128")
		} else if !cfg.LocalhostNodePorts {
			dest = append(dest, "!", "-d", "127.0.0.0/8")
		}
		nat.rule(kubeServicesChain, append(append([]string{"-m", "comment", "--comment", lastComment}, dest...), "-j", kubeNodePortsChain)...)
	} else {
		for _, ip := range cfg.NodePortAddresses.NodeIPs(cfg.LocalAddresses) {
			if ip.IsLoopback() && (r.isV6() || !cfg.LocalhostNodePorts) {
				continue
			}
			nat.rule(kubeServicesChain, "-m", "comment", "--comment", lastComment, "-d", ip.String(), "-j", kubeNodePortsChain)
		}
	}

	if !cfg.ConntrackTCPBeLiberal {
		// Drop INVALID packets so they are not forwarded un-NATed.
		args := []string{"-m", "conntrack", "--ctstate", "INVALID"}
		if cfg.NFAcct {
			args = append(args, "-m", "nfacct", "--nfacct-name", nfacct.CTStateInvalidDropped)
		}
		filter.rule(kubeForwardChain, append(args, "-j", "DROP")...)
	}
	filter.rule(kubeForwardChain, "-m", "comment", "--comment", quote("kubernetes forwarding rules"), "-m", "mark", "--mark", mark+"/"+mark, "-j", "ACCEPT")
	filter.rule(kubeForwardChain, "-m", "comment", "--comment", quote("kubernetes forwarding conntrack rule"), "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")

	var b strings.Builder
	filter.write(&b)
	nat.write(&b)
	res.Restore = b.String()
	return res
}

// writeServicePort writes the rules of one ServicePort.
func (r *renderer) writeServicePort(sp *model.ServicePort) {
	cfg := r.cfg
	name := sp.Name.String()
	protocol := sp.ProtocolLower()
	port := strconv.Itoa(sp.Port)
	suffix := r.opts.Names.suffix(sp.Name)
	clusterChain, localChain := svcChainPrefix+suffix, svlChainPrefix+suffix
	extChain, fwChain := extChainPrefix+suffix, fwChainPrefix+suffix
	cat := r.snap.Categorize(sp)

	usesClusterChain := len(cat.Cluster) > 0 && sp.UsesClusterEndpoints()
	usesLocalChain := len(cat.Local) > 0 && sp.UsesLocalEndpoints()

	internalChain, hasInternal := clusterChain, cat.HasAnyEndpoints
	if sp.InternalPolicyLocal {
		internalChain = localChain
		if len(cat.Local) == 0 {
			hasInternal = false
		}
	}
	externalPolicyChain, hasExternal := clusterChain, cat.HasAnyEndpoints
	if sp.ExternalPolicyLocal {
		externalPolicyChain = localChain
		if len(cat.Local) == 0 {
			hasExternal = false
		}
	}
	usesExtChain := cat.HasAnyEndpoints && sp.ExternallyAccessible()
	lbChain := extChain
	usesFWChain := cat.HasAnyEndpoints && len(sp.LoadBalancerVIPs) > 0 && len(sp.LoadBalancerSourceRanges) > 0
	if usesFWChain {
		lbChain = fwChain
	}

	var internalTarget, internalComment, externalTarget, externalComment string
	if !cat.HasAnyEndpoints {
		internalTarget, externalTarget = "REJECT", "REJECT"
		internalComment = quote(name + " has no endpoints")
		externalComment = internalComment
	} else {
		if !hasInternal {
			internalTarget, internalComment = "DROP", quote(name+" has no local endpoints")
		}
		if !hasExternal {
			externalTarget, externalComment = "DROP", quote(name+" has no local endpoints")
		}
	}

	filter := r.filter
	nat := r.nat
	proto := []string{"-m", protocol, "-p", protocol}

	if hasInternal {
		nat.rule(kubeServicesChain, join([]string{"-m", "comment", "--comment", quote(name + " cluster IP")}, proto,
			[]string{"-d", sp.ClusterIP.String(), "--dport", port, "-j", internalChain})...)
	} else {
		filter.rule(kubeServicesChain, join([]string{"-m", "comment", "--comment", internalComment}, proto,
			[]string{"-d", sp.ClusterIP.String(), "--dport", port, "-j", internalTarget})...)
	}

	for _, ip := range sp.ExternalIPs {
		if cat.HasAnyEndpoints {
			nat.rule(kubeServicesChain, join([]string{"-m", "comment", "--comment", quote(name + " external IP")}, proto,
				[]string{"-d", ip.String(), "--dport", port, "-j", extChain})...)
		}
		if !hasExternal {
			filter.rule(kubeExternalServicesChain, join([]string{"-m", "comment", "--comment", externalComment}, proto,
				[]string{"-d", ip.String(), "--dport", port, "-j", externalTarget})...)
		}
	}

	for _, ip := range sp.LoadBalancerVIPs {
		if cat.HasAnyEndpoints {
			nat.rule(kubeServicesChain, join([]string{"-m", "comment", "--comment", quote(name + " loadbalancer IP")}, proto,
				[]string{"-d", ip.String(), "--dport", port, "-j", lbChain})...)
		}
		if usesFWChain {
			filter.rule(kubeProxyFirewallChain, join([]string{"-m", "comment", "--comment", quote(name + " traffic not accepted by " + fwChain)}, proto,
				[]string{"-d", ip.String(), "--dport", port, "-j", "DROP"})...)
		}
	}
	if !hasExternal {
		for _, ip := range sp.LoadBalancerVIPs {
			filter.rule(kubeExternalServicesChain, join([]string{"-m", "comment", "--comment", externalComment}, proto,
				[]string{"-d", ip.String(), "--dport", port, "-j", externalTarget})...)
		}
	}

	if sp.NodePort != 0 {
		nodePort := strconv.Itoa(sp.NodePort)
		if cat.HasAnyEndpoints {
			// NodePorts are not subject to loadBalancerSourceRanges.
			if cfg.LocalhostNodePorts && !r.isV6() && cfg.NFAcct {
				nat.rule(kubeNodePortsChain, join([]string{"-m", "comment", "--comment", name}, proto,
					[]string{"-d", "127.0.0.0/8", "--dport", nodePort, "-m", "nfacct", "--nfacct-name", nfacct.LocalhostNodePortsAccepted, "-j", extChain})...)
			}
			nat.rule(kubeNodePortsChain, join([]string{"-m", "comment", "--comment", name}, proto,
				[]string{"--dport", nodePort, "-j", extChain})...)
		}
		if !hasExternal {
			filter.rule(kubeExternalServicesChain, join([]string{"-m", "comment", "--comment", externalComment,
				"-m", "addrtype", "--dst-type", "LOCAL"}, proto, []string{"--dport", nodePort, "-j", externalTarget})...)
		}
	}

	if sp.HealthCheckNodePort != 0 {
		filter.rule(kubeNodePortsChain, "-m", "comment", "--comment", quote(name+" health check node port"),
			"-m", "tcp", "-p", "tcp", "--dport", strconv.Itoa(sp.HealthCheckNodePort), "-j", "ACCEPT")
	}

	// The service's own nat chains are only written when it changed (or
	// on a full sync); they are still marked active so they are not
	// deleted.
	if r.opts.Changed != nil && !r.opts.Changed[sp.Name.NamespacedName] {
		for _, c := range []struct {
			name string
			used bool
		}{{extChain, usesExtChain}, {fwChain, usesFWChain}, {clusterChain, usesClusterChain}, {localChain, usesLocalChain}} {
			if c.used {
				r.activeNAT[c.name] = true
			}
		}
		for _, sep := range r.opts.Names.reachableChains(sp, cat.AllReachable) {
			r.activeNAT[sep] = true
		}
		return
	}

	if hasInternal {
		args := join([]string{"-m", "comment", "--comment", quote(name + " cluster IP")}, proto, []string{"-d", sp.ClusterIP.String(), "--dport", port})
		switch {
		case cfg.MasqueradeAll:
			nat.rule(internalChain, append(args, "-j", kubeMarkMasqChain)...)
		case cfg.ClusterCIDR != "":
			// Off-cluster traffic to a ClusterIP may bounce off-node.
			nat.rule(internalChain, append(args, "!", "-s", cfg.ClusterCIDR, "-j", kubeMarkMasqChain)...)
		}
	}

	if usesExtChain {
		nat.chain(extChain)
		r.activeNAT[extChain] = true
		if !sp.ExternalPolicyLocal {
			nat.rule(extChain, "-m", "comment", "--comment", quote("masquerade traffic for "+name+" external destinations"), "-j", kubeMarkMasqChain)
		} else {
			// Pod and node traffic to external destinations is subject to
			// neither policy (as if it hairpinned through the LB).
			if cfg.ClusterCIDR != "" {
				nat.rule(extChain, "-m", "comment", "--comment", quote("pod traffic for "+name+" external destinations"), "-s", cfg.ClusterCIDR, "-j", clusterChain)
			}
			nat.rule(extChain, "-m", "comment", "--comment", quote("masquerade LOCAL traffic for "+name+" external destinations"), "-m", "addrtype", "--src-type", "LOCAL", "-j", kubeMarkMasqChain)
			nat.rule(extChain, "-m", "comment", "--comment", quote("route LOCAL traffic for "+name+" external destinations"), "-m", "addrtype", "--src-type", "LOCAL", "-j", clusterChain)
		}
		if hasExternal {
			nat.rule(extChain, "-j", externalPolicyChain)
		}
	}

	if usesFWChain {
		nat.chain(fwChain)
		r.activeNAT[fwChain] = true
		args := []string{"-m", "comment", "--comment", quote(name + " loadbalancer IP")}
		allowFromNode := false
		for _, cidr := range sp.LoadBalancerSourceRanges {
			nat.rule(fwChain, join(args, []string{"-s", cidr.String(), "-j", extChain})...)
			if cfg.NodeIP != nil && cidr.Contains(cfg.NodeIP) {
				allowFromNode = true
			}
		}
		// The node's own requests to a local VIP arrive with the VIP as
		// source.
		if allowFromNode {
			for _, ip := range sp.LoadBalancerVIPs {
				nat.rule(fwChain, join(args, []string{"-s", ip.String(), "-j", extChain})...)
			}
		}
		// Anything else falls through to KUBE-PROXY-FIREWALL's DROP.
		nat.rule(fwChain, "-m", "comment", "--comment", quote("other traffic to "+name+" will be dropped by KUBE-PROXY-FIREWALL"))
	}

	if usesClusterChain {
		nat.chain(clusterChain)
		r.activeNAT[clusterChain] = true
		r.writeEndpointJumps(nat, sp, clusterChain, cat.Cluster)
	}
	if usesLocalChain {
		nat.chain(localChain)
		r.activeNAT[localChain] = true
		r.writeEndpointJumps(nat, sp, localChain, cat.Local)
	}

	for i, sep := range r.opts.Names.reachableChains(sp, cat.AllReachable) {
		ep := cat.AllReachable[i]
		nat.chain(sep)
		r.activeNAT[sep] = true
		base := r.commentArgs(name)
		nat.rule(sep, join(base, []string{"-s", ep.IP, "-j", kubeMarkMasqChain})...)
		args := slices.Clone(base)
		if sp.SessionAffinityClientIP {
			args = append(args, "-m", "recent", "--name", sep, "--set")
		}
		nat.rule(sep, join(args, proto, []string{"-j", "DNAT", "--to-destination", ep.String()})...)
	}
}

// writeEndpointJumps writes the affinity checks and the statistic fan-out
// of a KUBE-SVC/KUBE-SVL chain.
func (r *renderer) writeEndpointJumps(nat *table, sp *model.ServicePort, chain string, eps []model.Endpoint) {
	name := sp.Name.String()
	if sp.SessionAffinityClientIP {
		for _, ep := range eps {
			sep := r.opts.Names.endpointChain(sp.Name, ep)
			nat.rule(chain, join(r.commentArgs(quote(name+" -> "+ep.String())),
				[]string{"-m", "recent", "--name", sep, "--rcheck", "--seconds", strconv.Itoa(sp.StickyMaxAgeSeconds), "--reap", "-j", sep})...)
		}
	}
	for i, ep := range eps {
		args := r.commentArgs(quote(name + " -> " + ep.String()))
		if i < len(eps)-1 {
			args = append(args, "-m", "statistic", "--mode", "random", "--probability", probability(len(eps)-i))
		}
		nat.rule(chain, append(args, "-j", r.opts.Names.endpointChain(sp.Name, ep))...)
	}
}

func join(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
