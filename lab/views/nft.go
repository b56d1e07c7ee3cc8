package views

import (
	"net/netip"
	"regexp"
	"sort"
	"strings"
)

// nftRuleset is `nft list table ip kube-proxy` read into chains, sets and
// maps.
type nftRuleset struct {
	Chains map[string][]string     // chain → rules (without the hook header lines)
	Hooks  map[string]string       // chain → "type nat hook output priority -100; policy accept;"
	Sets   map[string][]string     // set → elements
	Maps   map[string][]nftElement // map → elements
	order  []string                // chains in listing order
}

type nftElement struct {
	Key, Verdict, Comment string
}

var nftCommentRE = regexp.MustCompile(`\s*comment "([^"]*)"`)

// parseNFT reads the listing of one table.
func parseNFT(dump string) *nftRuleset {
	rs := &nftRuleset{Chains: map[string][]string{}, Hooks: map[string]string{}, Sets: map[string][]string{}, Maps: map[string][]nftElement{}}
	var kind, name string
	var elems strings.Builder
	inElems := false
	flushElems := func() {
		body := strings.TrimSpace(elems.String())
		elems.Reset()
		inElems = false
		body = strings.TrimSuffix(strings.TrimPrefix(body, "{"), "}")
		for _, e := range splitTop(body) {
			e = strings.Join(strings.Fields(e), " ")
			if e == "" {
				continue
			}
			if kind == "set" {
				rs.Sets[name] = append(rs.Sets[name], e)
				continue
			}
			el := nftElement{}
			if m := nftCommentRE.FindStringSubmatch(e); m != nil {
				el.Comment = m[1]
				e = nftCommentRE.ReplaceAllString(e, "")
			}
			k, v, _ := strings.Cut(e, " : ")
			el.Key, el.Verdict = strings.TrimSpace(k), strings.TrimSpace(v)
			rs.Maps[name] = append(rs.Maps[name], el)
		}
	}
	for _, line := range strings.Split(dump, "\n") {
		t := strings.TrimSpace(line)
		if inElems {
			elems.WriteString(" " + t)
			if strings.HasSuffix(t, "}") {
				flushElems()
			}
			continue
		}
		switch {
		case t == "" || strings.HasPrefix(t, "table "):
			continue
		case strings.HasSuffix(t, "{") && (strings.HasPrefix(t, "chain ") || strings.HasPrefix(t, "set ") || strings.HasPrefix(t, "map ")):
			kind, name, _ = strings.Cut(strings.TrimSuffix(t, " {"), " ")
			switch kind {
			case "chain":
				rs.Chains[name] = rs.Chains[name][:0:0]
				rs.order = append(rs.order, name)
			case "set":
				rs.Sets[name] = []string{}
			case "map":
				rs.Maps[name] = []nftElement{}
			}
		case t == "}":
			kind, name = "", ""
		case kind == "chain":
			if strings.HasPrefix(t, "type ") {
				rs.Hooks[name] = t
			} else if !strings.HasPrefix(t, "comment ") {
				rs.Chains[name] = append(rs.Chains[name], t)
			}
		case (kind == "set" || kind == "map") && strings.HasPrefix(t, "elements = "):
			elems.WriteString(strings.TrimPrefix(t, "elements = "))
			inElems = true
			if strings.HasSuffix(t, "}") {
				flushElems()
			}
		}
	}
	return rs
}

// splitTop splits s at commas outside braces.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// chainService returns "ns/name" for kube-proxy's per-Service chains
// (service-HASH-ns/name/tcp/port, external-…, endpoint-…, firewall-…).
func chainService(chain string) (svc string, ok bool) {
	for _, p := range []string{"service-", "external-", "endpoint-", "firewall-"} {
		if rest, found := strings.CutPrefix(chain, p); found {
			_, rest, _ = strings.Cut(rest, "-") // the hash
			parts := strings.Split(rest, "/")
			if len(parts) >= 2 {
				return parts[0] + "/" + parts[1], true
			}
		}
	}
	return "", false
}

// nftGroups groups the rules that concern each of services ("ns/name"):
// the elements of kube-proxy's maps and sets that point at the Service's
// chains or carry its comment or addresses, then the Service's chains.
func nftGroups(rs *nftRuleset, services []ServiceInfo) []RuleGroup {
	var out []RuleGroup
	for _, svc := range services {
		g := RuleGroup{Service: svc.ID()}
		ips := map[string]bool{}
		for _, ip := range svc.IPs {
			ips[ip] = true
		}
		mapNames := sortedKeys(rs.Maps)
		for _, m := range mapNames {
			for _, e := range rs.Maps[m] {
				target, _ := chainService(strings.TrimPrefix(strings.TrimPrefix(e.Verdict, "goto "), "jump "))
				commentSvc, _, _ := strings.Cut(e.Comment, ":")
				if target == g.Service || commentSvc == g.Service {
					txt := e.Key
					if e.Comment != "" {
						txt += ` comment "` + e.Comment + `"`
					}
					g.Lines = append(g.Lines, RuleLine{Where: "map " + m, Text: txt + " : " + e.Verdict})
				}
			}
		}
		for _, s := range sortedKeys(rs.Sets) {
			for _, e := range rs.Sets[s] {
				if ips[strings.Fields(e)[0]] && s == "cluster-ips" {
					g.Lines = append(g.Lines, RuleLine{Where: "set " + s, Text: e})
				}
			}
		}
		// The Service's chains: service-, external-, firewall-, endpoint-.
		rank := map[string]int{"firewall-": 0, "external-": 1, "service-": 2, "endpoint-": 3}
		var chains []string
		for _, c := range rs.order {
			if s, ok := chainService(c); ok && s == g.Service {
				chains = append(chains, c)
			}
		}
		sort.SliceStable(chains, func(i, j int) bool { return rank[prefixOf(chains[i])] < rank[prefixOf(chains[j])] })
		for _, c := range chains {
			if len(rs.Chains[c]) == 0 {
				g.Lines = append(g.Lines, RuleLine{Where: "chain " + c, Text: "(empty)"})
			}
			for _, r := range rs.Chains[c] {
				g.Lines = append(g.Lines, RuleLine{Where: "chain " + c, Text: r})
			}
		}
		g.Summary = nftSummary(rs, svc)
		out = append(out, g)
	}
	return out
}

func prefixOf(chain string) string {
	p, _, _ := strings.Cut(chain, "-")
	return p + "-"
}

// nftSummary says in a few words what the node does with the Service's
// ClusterIP ports.
func nftSummary(rs *nftRuleset, svc ServiceInfo) string {
	var parts []string
	for _, p := range svc.Ports {
		key := svc.ClusterIP + " . " + p.Protocol + " . " + itoa(p.Port)
		verdict := "no rule for ClusterIP " + svc.ClusterIP + " on this node (its proxier has not written one)"
		if other := staleAddress(rs, svc); other != "" {
			verdict = "no rule for ClusterIP " + svc.ClusterIP + " on this node: its rules are still for " + other + ", an address the Service no longer has (the proxier has not caught up)"
		}
		if e, ok := findElement(rs.Maps["no-endpoint-services"], key); ok {
			verdict = "in no-endpoint-services: " + e.Verdict
			if strings.Contains(e.Verdict, "reject") {
				verdict = "rejected (no endpoints)"
			} else if e.Verdict == "drop" {
				verdict = "dropped (no endpoints)"
			}
		} else if e, ok := findElement(rs.Maps["service-ips"], key); ok {
			chain := strings.TrimPrefix(e.Verdict, "goto ")
			n := len(dnatTargets(rs, chain, map[string]bool{}))
			verdict = "load-balanced to " + plural(n, "endpoint")
		}
		parts = append(parts, p.Protocol+"/"+itoa(p.Port)+": "+verdict)
	}
	return strings.Join(parts, "; ")
}

// staleAddress is the address of an element of kube-proxy's maps that
// belongs to svc (by its chain or comment) under another key than key:
// the Service's old ClusterIP, still in the rules of a proxier that has
// not synced since the Service changed ("" when there is none).
func staleAddress(rs *nftRuleset, svc ServiceInfo) string {
	for _, m := range []string{"service-ips", "no-endpoint-services"} {
		for _, e := range rs.Maps[m] {
			owner, _ := chainService(strings.TrimPrefix(strings.TrimPrefix(e.Verdict, "goto "), "jump "))
			byComment := strings.HasPrefix(e.Comment, svc.ID()+":") || e.Comment == svc.ID()
			addr, _, _ := strings.Cut(e.Key, " . ")
			if addr != svc.ClusterIP && (owner == svc.ID() || byComment) {
				return addr
			}
		}
	}
	return ""
}

func findElement(es []nftElement, key string) (nftElement, bool) {
	for _, e := range es {
		if e.Key == key {
			return e, true
		}
	}
	return nftElement{}, false
}

var (
	dnatToRE   = regexp.MustCompile(`dnat (?:ip )?to (\d+\.\d+\.\d+\.\d+:\d+)`)
	dnatMapRE  = regexp.MustCompile(`dnat (?:ip )?(?:addr \. port )?to numgen random mod (\d+) map \{ (.*) \}`)
	vmapGotoRE = regexp.MustCompile(`(?:goto|jump) ([^\s,}]+)`)
)

// dnatTargets follows chain to the addresses it DNATs to.
func dnatTargets(rs *nftRuleset, chain string, seen map[string]bool) []string {
	if seen[chain] {
		return nil
	}
	seen[chain] = true
	var out []string
	for _, r := range rs.Chains[chain] {
		if m := dnatMapRE.FindStringSubmatch(r); m != nil {
			for _, e := range strings.Split(m[2], ",") {
				_, v, _ := strings.Cut(e, " : ")
				out = append(out, strings.ReplaceAll(strings.TrimSpace(v), " . ", ":"))
			}
			continue
		}
		if m := dnatToRE.FindStringSubmatch(r); m != nil {
			out = append(out, m[1])
			continue
		}
		if strings.Contains(r, "numgen") || strings.HasPrefix(r, "goto ") {
			for _, m := range vmapGotoRE.FindAllStringSubmatch(r, -1) {
				out = append(out, dnatTargets(rs, m[1], seen)...)
			}
		}
	}
	return dedupe(out)
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func inPrefix(cidr, ip string) bool {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		a, err2 := netip.ParseAddr(cidr)
		return err2 == nil && a.String() == ip
	}
	a, err := netip.ParseAddr(ip)
	return err == nil && p.Contains(a)
}
