package views

import (
	"fmt"
	"regexp"
	"strings"
)

// PathRequest asks for the path of a new connection through a node's rules.
type PathRequest struct {
	Node string `json:"node"`
	// Source is the sending address: a Pod IP (the packet arrives from the
	// Pod's veth) or the node's own IP (sent by a process on the node).
	Source     string `json:"source"`
	FromNode   bool   `json:"fromNode"`
	SourceName string `json:"sourceName,omitempty"`
	Dest       string `json:"dest"`
	Protocol   string `json:"protocol"`
	Port       int    `json:"port"`
	// NodeIP is the address of the node the path is traced on (set by
	// Feed.Path).
	NodeIP string `json:"nodeIP,omitempty"`
}

// Path is a packet's way through kube-proxy's rules on one node.
type Path struct {
	Request PathRequest `json:"request"`
	Mode    string      `json:"mode"`
	Steps   []PathStep  `json:"steps"`
	// Outcome is "dnat" (to Endpoints), "reject", "drop" or "pass" (no
	// Service rule took the packet).
	Outcome   string   `json:"outcome"`
	Endpoints []string `json:"endpoints,omitempty"`
	Why       string   `json:"why"`
}

// PathStep is one rule or map lookup the packet meets.
type PathStep struct {
	Hook  string `json:"hook,omitempty"`
	Chain string `json:"chain"`
	Rule  string `json:"rule"`
	Note  string `json:"note"`
	// Matched is false for rules the packet passes without matching.
	Matched bool `json:"matched"`
}

type tracer struct {
	rs        *nftRuleset
	req       PathRequest
	path      *Path
	depth     int
	dnatted   bool
	endpoints []string
}

var (
	vmapLookupRE = regexp.MustCompile(`^(ip daddr @(\S+) )?(ip daddr \. )?meta l4proto \. th dport vmap @(\S+)$`)
	daddrSetRE   = regexp.MustCompile(`^ip daddr @(\S+) (reject|drop)`)
	daddrCIDRRE  = regexp.MustCompile(`^ip daddr (\d+\.\d+\.\d+\.\d+/\d+) (drop|reject)`)
	masqMarkRE   = regexp.MustCompile(`^ip daddr @(\S+) ip saddr != (\S+) meta mark set`)
	saddrGotoRE  = regexp.MustCompile(`^ip saddr (\S+) (goto|jump) (\S+)`)
	fibLocalRE   = regexp.MustCompile(`^fib saddr type local (.*)$`)
	numgenVmapRE = regexp.MustCompile(`numgen random mod (\d+) vmap \{ (.*) \}`)
)

// tracePath follows a new connection through an nftables ruleset of
// kube-proxy: the filter hooks before DNAT (firewall-check), the nat hook
// (services, the Service's chains, DNAT), then the filter hooks after it
// (the no-endpoint checks).
func tracePath(rs *nftRuleset, req PathRequest) *Path {
	t := &tracer{rs: rs, req: req, path: &Path{Request: req, Mode: "nftables"}}
	if req.Protocol == "" {
		t.req.Protocol = "tcp"
	}
	var hooks []string
	if req.FromNode {
		hooks = []string{"filter-output-pre-dnat", "nat-output", "filter-output"}
	} else {
		hooks = []string{"filter-prerouting-pre-dnat", "nat-prerouting", "filter-forward"}
	}
	for _, h := range hooks {
		if _, ok := rs.Chains[h]; !ok {
			continue
		}
		if t.chain(h, h) {
			return t.path
		}
	}
	return t.finish()
}

func (t *tracer) step(hook, chain, rule, note string, matched bool) {
	t.path.Steps = append(t.path.Steps, PathStep{Hook: hook, Chain: chain, Rule: rule, Note: note, Matched: matched})
}

func (t *tracer) end(outcome, why string) bool {
	t.path.Outcome, t.path.Why = outcome, why
	return true
}

// chain walks chain's rules; it returns true when the packet's fate is
// decided (rejected or dropped).
func (t *tracer) chain(hook, chain string) bool {
	t.depth++
	defer func() { t.depth-- }()
	if t.depth > 16 {
		return t.end("drop", "The rules loop (more than 16 jumps); svclab stopped following them.")
	}
	key := fmt.Sprintf("%s . %s . %d", t.req.Dest, t.req.Protocol, t.req.Port)
	for _, rule := range t.rs.Chains[chain] {
		r := nftCommentRE.ReplaceAllString(rule, "")
		switch {
		case strings.HasPrefix(r, "ct state new jump ") || strings.HasPrefix(r, "jump "):
			target := r[strings.LastIndex(r, " ")+1:]
			t.step(hook, chain, rule, "a new connection jumps to "+target, true)
			if t.chain(hook, target) {
				return true
			}
		case vmapLookupRE.MatchString(r):
			m := vmapLookupRE.FindStringSubmatch(r)
			set, mapName := m[2], m[4]
			k := key
			if m[3] == "" {
				k = fmt.Sprintf("%s . %d", t.req.Protocol, t.req.Port)
			}
			if set != "" && !t.inSet(set, t.req.Dest) {
				t.step(hook, chain, rule, fmt.Sprintf("%s is not in @%s", t.req.Dest, set), false)
				continue
			}
			if t.dnatted && strings.HasPrefix(mapName, "no-endpoint") {
				t.step(hook, chain, rule, "after DNAT the destination is an endpoint, not the Service: no match", false)
				continue
			}
			e, ok := findElement(t.rs.Maps[mapName], k)
			if !ok {
				t.step(hook, chain, rule, fmt.Sprintf("no element %q in @%s", k, mapName), false)
				continue
			}
			note := fmt.Sprintf("element %s : %s", k, e.Verdict)
			if e.Comment != "" {
				note += fmt.Sprintf(" (%s)", e.Comment)
			}
			t.step(hook, chain, rule, note, true)
			if t.verdict(hook, e.Verdict, mapName) {
				return true
			}
			if strings.HasPrefix(e.Verdict, "goto ") {
				return false
			}
		case masqMarkRE.MatchString(r):
			m := masqMarkRE.FindStringSubmatch(r)
			if t.inSet(m[1], t.req.Dest) && !inPrefix(m[2], t.req.Source) {
				t.step(hook, chain, rule, fmt.Sprintf("%s is outside %s: marked for masquerading (SNAT to the node's address on the way out)", t.req.Source, m[2]), true)
			} else {
				t.step(hook, chain, rule, "no masquerade mark: the source is inside the cluster network", false)
			}
		case daddrSetRE.MatchString(r):
			m := daddrSetRE.FindStringSubmatch(r)
			if t.dnatted || !t.inSet(m[1], t.req.Dest) {
				t.step(hook, chain, rule, "no match", false)
				continue
			}
			t.step(hook, chain, rule, fmt.Sprintf("%s is a ClusterIP, but port %d/%s is not one of its Service's ports", t.req.Dest, t.req.Port, t.req.Protocol), true)
			return t.end(m[2], fmt.Sprintf("%s: %s is a ClusterIP without port %d/%s.", pastTense(m[2]), t.req.Dest, t.req.Port, t.req.Protocol))
		case daddrCIDRRE.MatchString(r):
			m := daddrCIDRRE.FindStringSubmatch(r)
			if t.dnatted || !inPrefix(m[1], t.req.Dest) {
				t.step(hook, chain, rule, "no match", false)
				continue
			}
			t.step(hook, chain, rule, fmt.Sprintf("%s is in the Service CIDR %s but no Service has it", t.req.Dest, m[1]), true)
			return t.end(m[2], fmt.Sprintf("%s: %s is an unallocated ClusterIP.", pastTense(m[2]), t.req.Dest))
		case saddrGotoRE.MatchString(r):
			m := saddrGotoRE.FindStringSubmatch(r)
			if strings.HasPrefix(m[1], "@") || !inPrefix(m[1], t.req.Source) {
				t.step(hook, chain, rule, "no match", false)
				continue
			}
			t.step(hook, chain, rule, fmt.Sprintf("%s is in %s: %s %s", t.req.Source, m[1], m[2], m[3]), true)
			if t.chain(hook, m[3]) || m[2] == "goto" {
				return t.path.Outcome != ""
			}
		case fibLocalRE.MatchString(r):
			if !t.req.FromNode {
				t.step(hook, chain, rule, "the source is not a local address of the node: no match", false)
				continue
			}
			rest := fibLocalRE.FindStringSubmatch(r)[1]
			t.step(hook, chain, rule, "the node itself sends the packet", true)
			if strings.HasPrefix(rest, "goto ") {
				t.chain(hook, strings.Fields(rest)[1])
				return t.path.Outcome != ""
			}
		case strings.Contains(r, "mark set") && strings.Contains(rule, "masquerade"):
			t.step(hook, chain, rule, "marked for masquerading", true)
		case numgenVmapRE.MatchString(r):
			m := numgenVmapRE.FindStringSubmatch(r)
			t.step(hook, chain, rule, fmt.Sprintf("picks one of %s endpoint chains at random", m[1]), true)
			for _, el := range splitTop(m[2]) {
				if g := vmapGotoRE.FindStringSubmatch(el); g != nil {
					t.chain(hook, g[1])
				}
			}
			return false
		case dnatMapRE.MatchString(r) || dnatToRE.MatchString(r):
			eps := dnatTargets(&nftRuleset{Chains: map[string][]string{"x": {r}}}, "x", map[string]bool{})
			t.dnatted = true
			t.endpoints = dedupe(append(t.endpoints, eps...))
			t.step(hook, chain, rule, "DNAT to "+strings.Join(eps, " or "), true)
		case strings.HasPrefix(r, "goto "):
			target := strings.Fields(r)[1]
			t.step(hook, chain, rule, "goto "+target, true)
			t.chain(hook, target)
			return t.path.Outcome != ""
		case r == "reject" || r == "drop":
			t.step(hook, chain, rule, "", true)
			return t.end(r, t.whyRejected(r))
		case strings.HasPrefix(r, "ip saddr @affinity") || strings.HasPrefix(r, "update @affinity"):
			t.step(hook, chain, rule, "session affinity: a client seen before goes back to the same endpoint", false)
		default:
			t.step(hook, chain, rule, "not evaluated by svclab's tracer", false)
		}
	}
	if len(t.rs.Chains[chain]) == 0 && !strings.HasPrefix(chain, "filter-") && !strings.HasPrefix(chain, "nat-") {
		t.step(hook, chain, "(empty chain)", "the chain has no rules: the packet returns unchanged", false)
	}
	return false
}

func (t *tracer) verdict(hook, v, mapName string) bool {
	switch {
	case v == "drop":
		return t.end("drop", fmt.Sprintf("Dropped: the Service has no endpoints that may take this traffic (the element is in %s). The client waits until it times out.", mapName))
	case v == "goto reject-chain" || v == "jump reject-chain":
		t.step(hook, "reject-chain", "reject", "ICMP port unreachable: the client sees \"Connection refused\" at once", true)
		return t.end("reject", fmt.Sprintf("Rejected: the Service port has no ready endpoints, so kube-proxy put it in %s.", mapName))
	case strings.HasPrefix(v, "goto ") || strings.HasPrefix(v, "jump "):
		return t.chain(hook, strings.Fields(v)[1])
	}
	return false
}

func (t *tracer) whyRejected(v string) string {
	if v == "reject" {
		return "Rejected by the rules: the client sees \"Connection refused\"."
	}
	return "Dropped by the rules: the client waits until it times out."
}

func (t *tracer) inSet(set, ip string) bool {
	for _, e := range t.rs.Sets[set] {
		if e == ip || inPrefix(e, ip) {
			return true
		}
	}
	return false
}

func pastTense(verdict string) string {
	if verdict == "drop" {
		return "Dropped"
	}
	return "Rejected"
}
