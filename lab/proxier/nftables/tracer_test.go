//go:build linux

package nftables

import (
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	netutils "k8s.io/utils/net"
	"sigs.k8s.io/knftables"
)

// The packet tracer walks the rules of a knftables.Fake for one packet, the
// way the kernel would for a new connection. It understands exactly the
// rule fragments this package emits; anything else fails the test, so a new
// kind of rule cannot silently be skipped. numgen fan-out follows every
// branch, so the output lists every endpoint a packet could reach.

type tracer struct {
	t       *testing.T
	nft     *knftables.Fake
	nodeIPs map[string]bool

	matches    []string // rules that matched, for debugging
	outputs    []string // DNAT targets, or DROP / REJECT
	markMasq   bool     // the masquerade mark is set
	masquerade bool     // the packet was masqueraded
	dnat       bool     // the packet was DNATed (for "ct status dnat")
}

var (
	reIgnored         = regexp.MustCompile(` *comment "[^"]*"$|^ct state new`)
	reCtStatusDNAT    = regexp.MustCompile(`^ct status dnat`)
	reHairpin         = regexp.MustCompile(`^ip6? saddr \. ip6? daddr \. meta l4proto \. th dport @hairpin-connections`)
	reDaddrInSet      = regexp.MustCompile(`^ip6? daddr @(\S+)`)
	reDaddrDispatch   = regexp.MustCompile(`^ip6? daddr \. meta l4proto \. th dport vmap @(\S+)$`)
	rePortDispatch    = regexp.MustCompile(`^meta l4proto \. th dport vmap @(\S+)$`)
	reDaddrAnonSet    = regexp.MustCompile(`^ip6? daddr (!= )?\{([^}]*)\}`)
	reDaddr           = regexp.MustCompile(`^ip6? daddr (!= )?([0-9a-fA-F.:/]+)`)
	reDaddrLocal      = regexp.MustCompile(`^fib daddr type local`)
	reSaddrAffinity   = regexp.MustCompile(`^ip6? saddr @(affinity-\S+)`)
	reSaddrAnonSet    = regexp.MustCompile(`^ip6? saddr (!= )?\{([^}]*)\}`)
	reSaddr           = regexp.MustCompile(`^ip6? saddr (!= )?([0-9a-fA-F.:/]+)`)
	reSaddrLocal      = regexp.MustCompile(`^fib saddr type local`)
	reL4Proto         = regexp.MustCompile(`^meta l4proto (tcp|udp|sctp)`)
	reMarkMasq        = regexp.MustCompile(`^mark set mark or 0x[[:xdigit:]]+`)
	reCheckMasq       = regexp.MustCompile(`^mark and 0x[[:xdigit:]]+ != 0 mark set mark xor 0x[[:xdigit:]]+`)
	reMasquerade      = regexp.MustCompile(`^masquerade fully-random$`)
	reJump            = regexp.MustCompile(`^(jump|goto) (\S+)$`)
	reVerdict         = regexp.MustCompile(`^(drop|reject)$`)
	reUpdateAffinity  = regexp.MustCompile(`^update @affinity-\S+ \{ ip6? saddr \}`)
	reDNAT            = regexp.MustCompile(`^dnat to (\S+)$`)
	reNumgenVMap      = regexp.MustCompile(`^numgen random mod \d+ vmap \{(.*)\}$`)
	reNumgenVMapEntry = regexp.MustCompile(`\d+ : goto (\S+)`)
	reNumgenDNAT      = regexp.MustCompile(`^dnat ip6? addr \. port to numgen random mod \d+ map \{(.*)\}$`)
	reNumgenDNATEntry = regexp.MustCompile(`\d+ : (\S+) \. (\d+)`)
)

const errUnmatchedPrefix = "unmatched rule fragment"

func (tr *tracer) addrMatches(ip, ruleAddr string) bool {
	addr := netutils.ParseIPSloppy(ip)
	if addr == nil {
		tr.t.Fatalf("bad IP in test case: %s", ip)
	}
	if strings.Contains(ruleAddr, "/") {
		_, cidr, err := netutils.ParseCIDRSloppy(ruleAddr)
		if err != nil {
			tr.t.Fatalf("bad CIDR in rule: %s", ruleAddr)
		}
		return cidr.Contains(addr)
	}
	other := netutils.ParseIPSloppy(ruleAddr)
	if other == nil {
		tr.t.Fatalf("bad IP in rule: %s", ruleAddr)
	}
	return addr.Equal(other)
}

func (tr *tracer) inAnonSet(ip, set string) bool {
	for _, a := range strings.Split(strings.ReplaceAll(set, " ", ""), ",") {
		if tr.addrMatches(ip, a) {
			return true
		}
	}
	return false
}

func (tr *tracer) setElements(name string) []*knftables.Element {
	if s := tr.nft.Table.Sets[name]; s != nil {
		return s.Elements
	}
	if m := tr.nft.Table.Maps[name]; m != nil {
		return m.Elements
	}
	return nil
}

func lookup(elements []*knftables.Element, key ...string) *knftables.Element {
	for _, e := range elements {
		if len(e.Key) == len(key) && strings.Join(e.Key, " . ") == strings.Join(key, " . ") {
			return e
		}
	}
	return nil
}

// runChain runs chain and reports whether the packet reached a terminal
// verdict (DNAT, drop, reject).
func (tr *tracer) runChain(chain, src, proto, dst, dport string) bool {
	ch := tr.nft.Table.Chains[chain]
	if ch == nil {
		tr.t.Errorf("unknown chain %q", chain)
		return true
	}
	for _, r := range ch.Rules {
		rule := reIgnored.ReplaceAllLiteralString(r.Rule, "")
	fragments:
		for rule != "" {
			rule = strings.TrimLeft(rule, " ")
			consume := func(re *regexp.Regexp) []string {
				m := re.FindStringSubmatch(rule)
				rule = strings.TrimPrefix(rule, m[0])
				return m
			}
			switch {
			case reCtStatusDNAT.MatchString(rule):
				consume(reCtStatusDNAT)
				if !tr.dnat {
					break fragments
				}
			case reHairpin.MatchString(rule):
				consume(reHairpin)
				// A DNATed packet whose source is its new destination is
				// hairpinning (the set lookup itself is not evaluated).
				if src != dst {
					break fragments
				}
			case reDaddrDispatch.MatchString(rule):
				m := consume(reDaddrDispatch)
				e := lookup(tr.setElements(m[1]), dst, proto, dport)
				if e == nil {
					break fragments
				}
				rule = e.Value[0]
			case rePortDispatch.MatchString(rule):
				m := consume(rePortDispatch)
				e := lookup(tr.setElements(m[1]), proto, dport)
				if e == nil {
					break fragments
				}
				rule = e.Value[0]
			case reDaddrInSet.MatchString(rule):
				m := consume(reDaddrInSet)
				if lookup(tr.setElements(m[1]), dst) == nil {
					break fragments
				}
			case reDaddrAnonSet.MatchString(rule):
				m := consume(reDaddrAnonSet)
				if tr.inAnonSet(dst, m[2]) == (m[1] != "") {
					break fragments
				}
			case reDaddr.MatchString(rule):
				m := consume(reDaddr)
				if tr.addrMatches(dst, m[2]) == (m[1] != "") {
					break fragments
				}
			case reDaddrLocal.MatchString(rule):
				consume(reDaddrLocal)
				if !tr.nodeIPs[dst] {
					break fragments
				}
			case reSaddrAffinity.MatchString(rule):
				// Affinity sets are filled by packets at run time; in a
				// fresh ruleset they are empty, so the lookup never hits.
				consume(reSaddrAffinity)
				break fragments
			case reSaddrAnonSet.MatchString(rule):
				m := consume(reSaddrAnonSet)
				if tr.inAnonSet(src, m[2]) == (m[1] != "") {
					break fragments
				}
			case reSaddr.MatchString(rule):
				m := consume(reSaddr)
				if tr.addrMatches(src, m[2]) == (m[1] != "") {
					break fragments
				}
			case reSaddrLocal.MatchString(rule):
				consume(reSaddrLocal)
				if !tr.nodeIPs[src] {
					break fragments
				}
			case reL4Proto.MatchString(rule):
				m := consume(reL4Proto)
				if m[1] != proto {
					break fragments
				}
			case reMarkMasq.MatchString(rule):
				consume(reMarkMasq)
				tr.matches = append(tr.matches, r.Rule)
				tr.markMasq = true
			case reCheckMasq.MatchString(rule):
				consume(reCheckMasq)
				if !tr.markMasq {
					break fragments
				}
				tr.markMasq = false
			case reMasquerade.MatchString(rule):
				consume(reMasquerade)
				tr.matches = append(tr.matches, r.Rule)
				tr.masquerade = true
			case reUpdateAffinity.MatchString(rule):
				consume(reUpdateAffinity)
			case reJump.MatchString(rule):
				m := consume(reJump)
				tr.matches = append(tr.matches, r.Rule)
				if tr.runChain(m[2], src, proto, dst, dport) {
					return true
				}
				if m[1] == "goto" {
					return false
				}
			case reVerdict.MatchString(rule):
				m := consume(reVerdict)
				tr.matches = append(tr.matches, r.Rule)
				tr.outputs = append(tr.outputs, strings.ToUpper(m[1]))
				return true
			case reDNAT.MatchString(rule):
				m := consume(reDNAT)
				tr.matches = append(tr.matches, r.Rule)
				tr.outputs = append(tr.outputs, m[1])
				return true
			case reNumgenVMap.MatchString(rule):
				m := consume(reNumgenVMap)
				tr.matches = append(tr.matches, r.Rule)
				for _, e := range reNumgenVMapEntry.FindAllStringSubmatch(m[1], -1) {
					tr.runChain(e[1], src, proto, dst, dport)
				}
				return true
			case reNumgenDNAT.MatchString(rule):
				m := consume(reNumgenDNAT)
				tr.matches = append(tr.matches, r.Rule)
				for _, e := range reNumgenDNATEntry.FindAllStringSubmatch(m[1], -1) {
					tr.outputs = append(tr.outputs, net.JoinHostPort(e[1], e[2]))
				}
				return true
			default:
				tr.t.Errorf("%s in chain %s: %q (rule %q)", errUnmatchedPrefix, chain, rule, r.Rule)
				break fragments
			}
		}
	}
	return false
}

// tracePacket follows a new connection through the hooks in the order the
// kernel runs them for a packet arriving from the network: the pre-DNAT
// filter, nat prerouting (the first DNAT target becomes the destination),
// filter forward, filter input, nat postrouting. It returns the matched
// rules, the output ("ip:port, ..." or DROP/REJECT, "" if untouched) and
// whether the packet is masqueraded.
func tracePacket(t *testing.T, nft *knftables.Fake, src, proto, dst, dport string, nodeIPs []string) ([]string, string, bool) {
	t.Helper()
	tr := &tracer{t: t, nft: nft, nodeIPs: map[string]bool{}}
	for _, ip := range nodeIPs {
		tr.nodeIPs[ip] = true
	}
	if tr.runChain(filterPreroutingPreDNATChain, src, proto, dst, dport) {
		return tr.matches, strings.Join(tr.outputs, ", "), tr.markMasq
	}
	tr.runChain(natPreroutingChain, src, proto, dst, dport)
	if len(tr.outputs) > 0 {
		host, _, err := net.SplitHostPort(tr.outputs[0])
		if err != nil {
			t.Fatalf("bad DNAT target %q: %v", tr.outputs[0], err)
		}
		dst = host
		tr.dnat = true
	}
	if tr.runChain(filterForwardChain, src, proto, dst, dport) {
		return tr.matches, strings.Join(tr.outputs, ", "), tr.markMasq
	}
	tr.runChain(filterInputChain, src, proto, dst, dport)
	// The output-hook chains mirror the prerouting ones and are skipped.
	tr.runChain(natPostroutingChain, src, proto, dst, dport)
	return tr.matches, strings.Join(tr.outputs, ", "), tr.masquerade
}

type packetFlow struct {
	name     string
	sourceIP string
	protocol v1.Protocol
	destIP   string
	destPort int
	output   string
	masq     bool
}

func runPacketFlows(t *testing.T, nft *knftables.Fake, nodeIPs []string, flows []packetFlow) {
	t.Helper()
	for _, f := range flows {
		t.Run(f.name, func(t *testing.T) {
			proto := strings.ToLower(string(f.protocol))
			if proto == "" {
				proto = "tcp"
			}
			matches, output, masq := tracePacket(t, nft, f.sourceIP, proto, f.destIP, fmt.Sprint(f.destPort), nodeIPs)
			if output != f.output || masq != f.masq {
				t.Errorf("packet %s -> %s:%d: got output %q masq %v, want %q masq %v\nmatched:\n%s",
					f.sourceIP, f.destIP, f.destPort, output, masq, f.output, f.masq, strings.Join(matches, "\n"))
			}
		})
	}
}
