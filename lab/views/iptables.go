package views

import (
	"regexp"
	"strings"
)

var iptJumpRE = regexp.MustCompile(`-j (KUBE-(?:SVC|SVL|EXT|FW|SEP)-\w+)`)

// iptablesGroups groups iptables-save lines per Service: the lines whose
// comment names the Service, and the lines of the KUBE-SVC/EXT/FW/SEP
// chains they lead to.
func iptablesGroups(save string, services []ServiceInfo) []RuleGroup {
	lines := strings.Split(save, "\n")
	var out []RuleGroup
	for _, svc := range services {
		g := RuleGroup{Service: svc.ID()}
		chains := map[string]bool{}
		table := ""
		var picked []RuleLine
		for _, l := range lines {
			if strings.HasPrefix(l, "*") {
				table = strings.TrimPrefix(l, "*")
			}
			if strings.Contains(l, `--comment "`+svc.ID()+`:`) || strings.Contains(l, `--comment `+svc.ID()+`:`) || strings.Contains(l, `--comment "`+svc.ID()+` `) {
				picked = append(picked, RuleLine{Where: table, Text: l})
				for _, m := range iptJumpRE.FindAllStringSubmatch(l, -1) {
					chains[m[1]] = true
				}
			}
		}
		// Follow the chains the Service's lines jump to.
		for changed := true; changed; {
			changed = false
			for _, l := range lines {
				f := strings.Fields(l)
				if len(f) > 1 && f[0] == "-A" && chains[f[1]] {
					for _, m := range iptJumpRE.FindAllStringSubmatch(l, -1) {
						if !chains[m[1]] {
							chains[m[1]], changed = true, true
						}
					}
				}
			}
		}
		have := map[string]bool{}
		for _, p := range picked {
			have[p.Text] = true
		}
		table = ""
		for _, l := range lines {
			if strings.HasPrefix(l, "*") {
				table = strings.TrimPrefix(l, "*")
			}
			f := strings.Fields(l)
			if len(f) > 1 && f[0] == "-A" && chains[f[1]] && !have[l] {
				picked = append(picked, RuleLine{Where: table, Text: l})
			}
		}
		g.Lines = picked
		g.Summary = iptablesSummary(picked)
		out = append(out, g)
	}
	return out
}

func iptablesSummary(lines []RuleLine) string {
	seps := 0
	for _, l := range lines {
		if strings.Contains(l.Text, "-j REJECT") {
			return "rejected (no endpoints)"
		}
		if strings.Contains(l.Text, "-j DROP") && strings.Contains(l.Text, "no local endpoints") {
			return "dropped on this node (no local endpoints)"
		}
		if strings.Contains(l.Text, "-j DNAT") {
			seps++
		}
	}
	if seps > 0 {
		return "load-balanced to " + plural(seps, "endpoint")
	}
	return "no rules for this Service"
}

// diffLines marks lines of now that were not in before as added and
// appends before's lines that are gone as removed.
func diffLines(before, now []RuleLine) []RuleLine {
	count := map[string]int{}
	for _, l := range before {
		count[l.Where+"\x00"+l.Text]++
	}
	out := make([]RuleLine, 0, len(now))
	for _, l := range now {
		k := l.Where + "\x00" + l.Text
		l.Change = ""
		if count[k] > 0 {
			count[k]--
		} else {
			l.Change = "added"
		}
		out = append(out, l)
	}
	for _, l := range before {
		k := l.Where + "\x00" + l.Text
		if count[k] > 0 {
			count[k]--
			l.Change = "removed"
			out = append(out, l)
		}
	}
	return out
}
