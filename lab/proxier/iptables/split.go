package iptables

import (
	"maps"
	"slices"
	"strings"
)

// DefaultStepLines is how many lines of restore input PrepareRestore puts
// in one transaction of new chains: about 1,000 chains of a typical
// Service set.
const DefaultStepLines = 4000

// PrepareRestore rewrites restore (iptables-restore --noflush input as
// Render writes it) into input that iptables-nft restores faster and that
// leaves exactly the same rules. It returns the input and its number of
// transactions ("*TABLE … COMMIT" blocks) in the table that has most.
//
// Why: iptables-nft 1.8's restore keeps the name of every chain a
// transaction mentions in a sorted linked list, which it walks from the
// start for every chain declaration and for every rule (its chain and its
// jump target). A transaction's time grows with the square of its chains:
// 1,000 Services × 10 endpoints (11,000 chains) take 2.5 s, 10,000
// Services (112,000 chains) 199 s, for upstream kube-proxy too.
//
// Two rewrites:
//
//   - New chains in transactions of their own. Chains that do not exist
//     yet (exists reports false; exists nil: all exist) are moved, with
//     all their rules, into transactions of about stepLines lines that
//     come first, when a table has at least 2×stepLines lines of them (a
//     node's first sync). Nothing on the node jumps to them before the
//     last transaction, so until then they are unreachable and packets see
//     only the rules the node had. A chain comes after every new chain it
//     jumps to (a Service's endpoint chains before its service chain), so
//     each transaction only jumps to chains that exist by then. The last
//     transaction holds the chains that existed (KUBE-SERVICES and the
//     other targets of the built-in chains' jump rules, whose rules make
//     the new chains reachable, all at once) and the deletions of stale
//     chains. If a transaction fails, those before it stay applied: their
//     chains are unreachable, and the input restored in one transaction
//     rewrites them. 10,000 Services take about 10 s this way.
//   - Declarations and rules (grouped by chain) in descending order of
//     chain name, in every transaction. A name is looked up past the names
//     inserted before it that sort lower: declared in descending order,
//     each new name is the lowest so far; and KUBE-NODEPORTS' rules, which
//     insert a KUBE-EXT-… name each, come after KUBE-SERVICES' instead of
//     before. A partial sync of 10,000 Services (2,500 NodePorts) is
//     restored in 1.8 s instead of 2.8 s. The order of each chain's rules
//     is kept; neither the order of declarations nor that between chains'
//     rules changes what is restored.
//
// With stepLines ≤ 0 restore is returned as it is, in one transaction per
// table, as upstream writes it.
func PrepareRestore(restore string, exists func(table, chain string) bool, stepLines int) (string, int) {
	if stepLines <= 0 {
		return restore, 1
	}
	var b strings.Builder
	most := 1
	for _, t := range parseRestore(restore) {
		var order []string
		if exists != nil {
			var lines int
			if order, lines = t.newChainsInOrder(exists); lines < 2*stepLines {
				order = nil
			}
		}
		pre, n := t.writeSteps(&b, order, stepLines)
		t.write(&b, pre)
		most = max(most, n+1)
	}
	return b.String(), most
}

// SplitRestore rewrites restore into transactions of about stepLines
// lines each, for a node whose netlink socket cannot take restore in one:
// iptables-nft sends a transaction in one message, and in a user
// namespace (svclab's nodes) it cannot raise its socket's buffer past
// net.core.wmem_default (SO_SNDBUFFORCE wants CAP_NET_ADMIN of the
// host's), so a transaction of some 500 rules fails with "Message too
// long". Every declared chain, with all its rules, goes into a
// transaction after the chains it jumps to; the deletions of stale chains
// come last. Each transaction jumps only to chains that exist by then, and
// the end state is the same as restore's in one transaction; in between, a
// Service's chains may be partly rewritten (a packet meets either its old
// or its new rules, per chain).
func SplitRestore(restore string, stepLines int) string {
	var b strings.Builder
	for _, t := range parseRestore(restore) {
		order, _ := t.newChainsInOrder(func(string, string) bool { return false })
		pre, _ := t.writeSteps(&b, order, max(1, stepLines))
		t.write(&b, pre)
	}
	return b.String()
}

// writeSteps writes the chains of order, with their rules, in
// transactions of about stepLines lines, and returns the chains written
// and the number of transactions.
func (t *restoreTable) writeSteps(b *strings.Builder, order []string, stepLines int) (map[string]bool, int) {
	pre := map[string]bool{}
	n := 0
	for len(order) > 0 {
		lines, i := 0, 0
		for ; i < len(order) && (lines == 0 || lines+1+len(t.rules[order[i]]) <= stepLines); i++ {
			lines += 1 + len(t.rules[order[i]])
		}
		step := &restoreTable{name: t.name, chains: order[:i], decl: t.decl, rules: map[string][]string{}}
		for _, c := range order[:i] {
			step.rules[c] = t.rules[c]
			pre[c] = true
		}
		step.write(b, nil)
		order = order[i:]
		n++
	}
	return pre, n
}

// restoreTable is one table's part of restore input.
type restoreTable struct {
	name   string
	chains []string            // declared, in input order
	decl   map[string]string   // chain → its ":CHAIN ..." line
	rules  map[string][]string // chain → its "-A" lines, declared or not
	// other are the lines that are neither declarations nor "-A" rules
	// ("-X CHAIN", "-I ..."), kept in order after the rules.
	other []string
}

// parseRestore reads restore input (comments dropped).
func parseRestore(restore string) []*restoreTable {
	var out []*restoreTable
	var t *restoreTable
	for line := range strings.SplitSeq(restore, "\n") {
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			t = &restoreTable{name: line[1:], decl: map[string]string{}, rules: map[string][]string{}}
			out = append(out, t)
		case t == nil:
		case line == "COMMIT":
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			if _, ok := t.decl[name]; !ok {
				t.chains = append(t.chains, name)
			}
			t.decl[name] = line
		case strings.HasPrefix(line, "-A "):
			chain, _, _ := strings.Cut(line[3:], " ")
			t.rules[chain] = append(t.rules[chain], line)
		default:
			t.other = append(t.other, line)
		}
	}
	return out
}

// newChainsInOrder returns the declared chains that do not exist, each
// after the new chains it jumps to, and how many lines they take
// (declarations and rules).
func (t *restoreTable) newChainsInOrder(exists func(table, chain string) bool) ([]string, int) {
	isNew := map[string]bool{}
	for _, c := range t.chains {
		if !exists(t.name, c) {
			isNew[c] = true
		}
	}
	targets := func(c string) []string {
		var out []string
		for _, r := range t.rules[c] {
			if j := jumpTarget(r); isNew[j] && j != c {
				out = append(out, j)
			}
		}
		return out
	}
	// Depth first from the chains no new chain jumps to (KUBE-NODEPORTS,
	// KUBE-FW-…, KUBE-EXT-…, service chains), so that a Service's chains
	// end up next to each other; post-order puts jump targets first.
	jumpedTo := map[string]bool{}
	for c := range isNew {
		for _, j := range targets(c) {
			jumpedTo[j] = true
		}
	}
	var roots []string
	for _, c := range t.chains {
		if isNew[c] && !jumpedTo[c] {
			roots = append(roots, c)
		}
	}
	for _, c := range t.chains {
		if isNew[c] && jumpedTo[c] {
			roots = append(roots, c) // only reached here in a cycle
		}
	}
	type frame struct {
		chain string
		next  []string
	}
	var order []string
	lines := 0
	seen := map[string]bool{}
	for _, root := range roots {
		if seen[root] {
			continue
		}
		seen[root] = true
		stack := []frame{{root, targets(root)}}
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if len(top.next) == 0 {
				order = append(order, top.chain)
				lines += 1 + len(t.rules[top.chain])
				stack = stack[:len(stack)-1]
				continue
			}
			j := top.next[0]
			top.next = top.next[1:]
			if !seen[j] {
				seen[j] = true
				stack = append(stack, frame{j, targets(j)})
			}
		}
	}
	return order, lines
}

// write writes the table without the chains in skip (their declarations
// and rules): the declarations, then each chain's rules, both in
// descending order of chain name, then the other lines.
func (t *restoreTable) write(b *strings.Builder, skip map[string]bool) {
	descending := func(x, y string) int { return strings.Compare(y, x) }
	b.WriteString("*" + t.name + "\n")
	for _, c := range slices.SortedFunc(slices.Values(t.chains), descending) {
		if !skip[c] {
			b.WriteString(t.decl[c] + "\n")
		}
	}
	for _, c := range slices.SortedFunc(maps.Keys(t.rules), descending) {
		if !skip[c] {
			for _, r := range t.rules[c] {
				b.WriteString(r + "\n")
			}
		}
	}
	for _, l := range t.other {
		b.WriteString(l + "\n")
	}
	b.WriteString("COMMIT\n")
}

// jumpTarget returns the target of a rule's "-j" or "-g" (outside quoted
// comments), or "".
func jumpTarget(rule string) string {
	inQuote := false
	fields := strings.FieldsFunc(rule, func(r rune) bool {
		if r == '"' {
			inQuote = !inQuote
		}
		return r == ' ' && !inQuote
	})
	for i := 0; i+1 < len(fields); i++ {
		switch fields[i] {
		case "-j", "--jump", "-g", "--goto":
			return fields[i+1]
		}
	}
	return ""
}
