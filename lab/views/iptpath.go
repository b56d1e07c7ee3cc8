package views

import (
	"fmt"
	"strconv"
	"strings"
)

// iptRule is one rule of iptables-save output.
type iptRule struct {
	text string
	args []string
}

// parseIPTables reads iptables-save output: table → chain → rules.
func parseIPTables(save string) map[string]map[string][]iptRule {
	out := map[string]map[string][]iptRule{}
	table := ""
	for _, line := range strings.Split(save, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table = strings.TrimPrefix(line, "*")
			out[table] = map[string][]iptRule{}
		case strings.HasPrefix(line, "-A ") && table != "":
			args := shellFields(line)
			if len(args) < 2 {
				continue
			}
			out[table][args[1]] = append(out[table][args[1]], iptRule{text: line, args: args[2:]})
		}
	}
	return out
}

// shellFields splits a line at spaces outside double quotes, removing the
// quotes.
func shellFields(s string) []string {
	var out []string
	var cur strings.Builder
	quoted, have := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, have = !quoted, true
		case r == ' ' && !quoted:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

type iptTracer struct {
	t      *tracer
	tables map[string]map[string][]iptRule
}

// tracePathIPTables follows a new connection through kube-proxy's iptables
// rules: the nat table (KUBE-SERVICES, the Service's KUBE-SVC/KUBE-EXT
// chains, an endpoint's KUBE-SEP chain and its DNAT), then the filter
// table (the REJECT of a Service without endpoints, the DROP of one
// without local endpoints).
func tracePathIPTables(save string, req PathRequest) *Path {
	t := &tracer{req: req, path: &Path{Request: req, Mode: "iptables"}}
	if t.req.Protocol == "" {
		t.req.Protocol = "tcp"
	}
	it := &iptTracer{t: t, tables: parseIPTables(save)}
	hooks := [][2]string{{"nat", "PREROUTING"}, {"filter", "FORWARD"}, {"filter", "INPUT"}}
	if req.FromNode {
		hooks = [][2]string{{"nat", "OUTPUT"}, {"filter", "OUTPUT"}}
	}
	for _, h := range hooks {
		if h[1] == "INPUT" && req.Dest != req.NodeIP {
			continue
		}
		switch it.chain(h[0]+" "+h[1], h[0], h[1], 0) {
		case "stop":
			return t.path
		case "dnat":
			// The filter table sees the endpoint's address from here on:
			// the Service's REJECT and DROP rules no longer apply.
			return t.finish()
		}
	}
	return t.finish()
}

// finish ends a trace that no rule decided.
func (t *tracer) finish() *Path {
	if t.dnatted {
		t.path.Outcome = "dnat"
		t.path.Endpoints = t.endpoints
		if len(t.endpoints) == 1 {
			t.path.Why = fmt.Sprintf("The connection is DNATed to %s.", t.endpoints[0])
		} else {
			t.path.Why = fmt.Sprintf("The connection is DNATed to one of %d endpoints, chosen at random per new connection: %s.", len(t.endpoints), strings.Join(t.endpoints, ", "))
		}
		return t.path
	}
	t.path.Outcome = "pass"
	t.path.Why = fmt.Sprintf("No kube-proxy rule takes %s:%d/%s on this node: the packet is routed to %s unchanged.", t.req.Dest, t.req.Port, t.req.Protocol, t.req.Dest)
	return t.path
}

// chain walks a chain: "stop" when the packet's fate is decided (DROP,
// REJECT), "dnat" once it is DNATed, "return" when it comes back to the
// caller.
func (it *iptTracer) chain(hook, table, chain string, depth int) string {
	if depth > 16 {
		it.t.end("drop", "The rules loop (more than 16 jumps); svclab stopped following them.")
		return "stop"
	}
	for _, r := range it.tables[table][chain] {
		target, toDest := "", ""
		random := ""
		for i := 0; i < len(r.args); i++ {
			switch r.args[i] {
			case "-j":
				if i+1 < len(r.args) {
					target = r.args[i+1]
				}
			case "--to-destination":
				if i+1 < len(r.args) {
					toDest = r.args[i+1]
				}
			case "--probability":
				if i+1 < len(r.args) {
					random = r.args[i+1]
				}
			}
		}
		ok, why := it.matches(r.args)
		if !ok {
			// Rules for other destinations are left out of the path.
			if (isKubeChain(chain) || isKubeChain(target)) && !strings.HasPrefix(why, "no match (-d ") && !strings.HasPrefix(why, "no match (! -d ") {
				it.t.step(hook, chain, r.text, why, false)
			}
			continue
		}
		if !isKubeChain(chain) && !isKubeChain(target) {
			continue // not kube-proxy's rule
		}
		switch {
		case target == "DNAT":
			it.t.dnatted = true
			it.t.endpoints = dedupe(append(it.t.endpoints, toDest))
			it.t.step(hook, chain, r.text, "DNAT to "+toDest, true)
			return "dnat"
		case target == "REJECT":
			it.t.step(hook, chain, r.text, "ICMP port unreachable: the client sees \"Connection refused\" at once", true)
			it.t.end("reject", "Rejected: "+commentOf(r.args)+".")
			return "stop"
		case target == "DROP":
			it.t.step(hook, chain, r.text, "dropped: the client waits until it times out", true)
			it.t.end("drop", "Dropped: "+commentOf(r.args)+".")
			return "stop"
		case target == "ACCEPT":
			it.t.step(hook, chain, r.text, "accepted", true)
			return "return"
		case target == "RETURN":
			it.t.step(hook, chain, r.text, "back to the calling chain", true)
			return "return"
		case target == "KUBE-MARK-MASQ" || target == "MARK":
			it.t.step(hook, chain, r.text, "marked for masquerading (SNAT to the node's address on the way out)", true)
		case random != "":
			p, _ := strconv.ParseFloat(random, 64)
			it.t.step(hook, chain, r.text, fmt.Sprintf("with probability %.2f of the connections left: %s", p, target), true)
			if it.chain(hook, table, target, depth+1) == "stop" {
				return "stop"
			}
		case target != "":
			it.t.step(hook, chain, r.text, "jump to "+target, true)
			if res := it.chain(hook, table, target, depth+1); res != "return" {
				return res
			}
		}
	}
	return "return"
}

func isKubeChain(c string) bool { return strings.HasPrefix(c, "KUBE-") }

func commentOf(args []string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--comment" {
			return args[i+1]
		}
	}
	return "a kube-proxy rule"
}

// matches evaluates a rule's matches against the traced packet, a new
// connection.
func (it *iptTracer) matches(args []string) (bool, string) {
	req := it.t.req
	neg := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		val := ""
		if i+1 < len(args) {
			val = args[i+1]
		}
		res := true
		switch a {
		case "!":
			neg = true
			continue
		case "-s", "--source":
			res = inPrefix(val, req.Source)
		case "-d", "--destination":
			res = inPrefix(val, req.Dest)
		case "-p", "--protocol":
			res = val == req.Protocol
		case "--dport":
			res = val == strconv.Itoa(req.Port)
		case "--dst-type":
			res = val == "LOCAL" && req.Dest == req.NodeIP
		case "--src-type":
			res = val == "LOCAL" && req.FromNode
		case "--ctstate":
			res = strings.Contains(val, "NEW")
		case "--mark":
			res = false // a new connection carries no mark yet
		case "-j":
			return true, ""
		default:
			continue
		}
		not := ""
		if neg {
			res, not = !res, "! "
		}
		neg = false
		if !res {
			return false, fmt.Sprintf("no match (%s%s %s)", not, a, val)
		}
		i++
	}
	return true, ""
}
