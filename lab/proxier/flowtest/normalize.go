package flowtest

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

var (
	nftCounter = regexp.MustCompile(`counter packets \d+ bytes \d+`)
	nftExpires = regexp.MustCompile(` expires \S+`)
	spaces     = regexp.MustCompile(`\s+`)
)

// NormalizeNFTables puts an "nft list table" listing into a canonical form
// so that two listings of the same table compare equal however the table
// was built:
//
//   - counters lose their values and set elements their "expires";
//   - statements that span lines (long element lists) are joined;
//   - the elements of each set and map are sorted (the kernel lists hashed
//     elements in arbitrary order);
//   - sets, maps and chains are sorted by name (the kernel lists them in
//     creation order).
//
// The order of rules inside a chain is kept: it matters.
func NormalizeNFTables(listing string) (string, error) {
	stmts, err := nftStatements(listing)
	if err != nil {
		return "", err
	}
	if len(stmts) < 2 || !strings.HasPrefix(stmts[0], "table ") || !strings.HasSuffix(stmts[0], "{") || stmts[len(stmts)-1] != "}" {
		return "", fmt.Errorf("not an nft table listing: %.80q", listing)
	}
	var header []string
	var objects [][]string
	var cur []string
	for _, s := range stmts[1 : len(stmts)-1] {
		switch {
		case cur == nil && strings.HasSuffix(s, "{"):
			cur = []string{s}
		case cur == nil:
			header = append(header, s)
		case s == "}":
			objects = append(objects, cur)
			cur = nil
		default:
			cur = append(cur, s)
		}
	}
	if cur != nil {
		return "", fmt.Errorf("unterminated object %q", cur[0])
	}
	slices.SortFunc(objects, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	var b strings.Builder
	b.WriteString(stmts[0] + "\n")
	for _, h := range header {
		b.WriteString("\t" + h + "\n")
	}
	for _, o := range objects {
		b.WriteString("\t" + o[0] + "\n")
		for _, s := range o[1:] {
			b.WriteString("\t\t" + s + "\n")
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String(), nil
}

// nftStatements splits a listing into statements: lines, with lines that
// leave a "{" open joined to the following ones until it is closed (so
// "chain x {" stays alone but "elements = { a,\n b }" becomes one).
func nftStatements(listing string) ([]string, error) {
	var out []string
	var pending string
	for _, line := range strings.Split(listing, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if pending != "" {
			line = pending + " " + line
			pending = ""
		}
		if depth := braceDepth(line); depth > 0 && !isBlockOpener(line) {
			pending = line
			continue
		}
		out = append(out, normalizeStatement(line))
	}
	if pending != "" {
		return nil, fmt.Errorf("unbalanced braces in %.80q", pending)
	}
	return out, nil
}

// isBlockOpener reports whether line opens a table, set, map, chain or
// flowtable block.
func isBlockOpener(line string) bool {
	if !strings.HasSuffix(line, "{") || braceDepth(line) != 1 {
		return false
	}
	for _, kw := range []string{"table ", "set ", "map ", "chain ", "flowtable ", "counter ", "quota ", "ct ", "limit ", "secmark ", "synproxy "} {
		if strings.HasPrefix(line, kw) {
			return true
		}
	}
	return false
}

// braceDepth counts unclosed "{" outside quotes.
func braceDepth(s string) int {
	depth, quoted := 0, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case quoted:
		case r == '{':
			depth++
		case r == '}':
			depth--
		}
	}
	return depth
}

func normalizeStatement(s string) string {
	s = nftCounter.ReplaceAllString(s, "counter")
	s = nftExpires.ReplaceAllString(s, "")
	s = collapseSpaces(s)
	if rest, ok := strings.CutPrefix(s, "elements = {"); ok {
		body := strings.TrimSpace(strings.TrimSuffix(rest, "}"))
		items := splitTopLevel(body, ',')
		for i := range items {
			items[i] = strings.TrimSpace(items[i])
		}
		slices.Sort(items)
		s = "elements = { " + strings.Join(items, ", ") + " }"
	}
	return s
}

// collapseSpaces replaces runs of white space outside quotes by one space.
func collapseSpaces(s string) string {
	parts := strings.Split(s, `"`)
	for i := 0; i < len(parts); i += 2 {
		parts[i] = spaces.ReplaceAllString(parts[i], " ")
	}
	return strings.Join(parts, `"`)
}

// splitTopLevel splits s at sep outside quotes and braces.
func splitTopLevel(s string, sep rune) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	for i, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case quoted:
		case r == '{':
			depth++
		case r == '}':
			depth--
		case r == sep && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// serviceOrderedChains are the chains where kube-proxy's iptables proxier
// writes the rules of each Service port in turn, iterating over a Go map:
// the order of the ports is random from one sync to the next.
var serviceOrderedChains = map[string]bool{
	"KUBE-SERVICES":          true,
	"KUBE-NODEPORTS":         true,
	"KUBE-EXTERNAL-SERVICES": true,
	"KUBE-PROXY-FIREWALL":    true,
}

var iptComment = regexp.MustCompile(`--comment ("(?:[^"\\]|\\.)*"|\S+)`)

// servicePortKey is the Service port a rule belongs to: its comment up to
// the first space ("ns/name:port"), or "" for rules without a comment.
func servicePortKey(rule string) string {
	m := iptComment.FindStringSubmatch(rule)
	if m == nil {
		return ""
	}
	c := strings.Trim(m[1], `"`)
	key, _, _ := strings.Cut(c, " ")
	return key
}

// NormalizeIPTablesSave puts iptables-save output into a canonical form:
//
//   - comments (the "Generated by" lines) are dropped and chain counters
//     zeroed;
//   - each table lists its chains sorted by name with each chain's rules
//     right after its declaration (iptables-nft lists chains in creation
//     order, which differs between a fresh restore and kube-proxy's
//     sequence of commands);
//   - in serviceOrderedChains, rules are stably sorted by Service port,
//     keeping the "must be the last rule" rules last (sorted among
//     themselves: with nodePortAddresses there is one per node IP, in
//     random order), like upstream's own tests do (sortIPTablesRules): the
//     relative order of one port's rules is kept, and so is every other
//     chain's order.
func NormalizeIPTablesSave(save string) (string, error) {
	type chain struct {
		decl  string
		rules []string
	}
	tables := map[string]map[string]*chain{}
	var table map[string]*chain
	var tableName string
	for n, line := range strings.Split(save, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			tableName = line[1:]
			table = map[string]*chain{}
			tables[tableName] = table
		case line == "COMMIT":
			table = nil
		case table == nil:
			return "", fmt.Errorf("line %d: %q outside a table", n+1, line)
		case strings.HasPrefix(line, ":"):
			f := strings.Fields(line[1:])
			if len(f) < 2 {
				return "", fmt.Errorf("line %d: bad chain declaration %q", n+1, line)
			}
			table[f[0]] = &chain{decl: ":" + f[0] + " " + f[1]}
		case strings.HasPrefix(line, "-A "):
			f := strings.Fields(line)
			c, ok := table[f[1]]
			if !ok {
				return "", fmt.Errorf("line %d: rule for undeclared chain %q", n+1, f[1])
			}
			c.rules = append(c.rules, line)
		default:
			return "", fmt.Errorf("line %d: unexpected %q", n+1, line)
		}
	}
	for _, t := range tables {
		for name, c := range t {
			if serviceOrderedChains[name] {
				slices.SortStableFunc(c.rules, func(a, b string) int {
					aLast, bLast := strings.Contains(a, "must be the last rule"), strings.Contains(b, "must be the last rule")
					switch {
					case aLast && bLast:
						// One per node IP, in Go map order upstream
						// (NodePortAddresses.GetNodeIPs).
						return strings.Compare(a, b)
					case aLast:
						return 1
					case bLast:
						return -1
					}
					return strings.Compare(servicePortKey(a), servicePortKey(b))
				})
			}
		}
	}
	var b strings.Builder
	for _, tn := range sortedKeys(tables) {
		b.WriteString("*" + tn + "\n")
		t := tables[tn]
		for _, cn := range sortedKeys(t) {
			b.WriteString(t[cn].decl + "\n")
			for _, r := range t[cn].rules {
				b.WriteString(r + "\n")
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.String(), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Diff returns a unified diff from a (named aName) to b, or "" if equal.
func Diff(aName, a, bName, b string) string {
	if a == b {
		return ""
	}
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(a), B: difflib.SplitLines(b),
		FromFile: aName, ToFile: bName, Context: 2,
	})
	if err != nil {
		return fmt.Sprintf("diff failed: %v", err)
	}
	return d
}
