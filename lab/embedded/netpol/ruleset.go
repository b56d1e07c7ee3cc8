package netpol

import (
	"fmt"
	"slices"
	"strings"
)

// Table is the family and name of the table the agent owns on each node,
// the name kind's kube-network-policies uses.
const (
	Family = "inet"
	Table  = "kube-network-policies"
)

// Ruleset is the desired content of the node's table.
type Ruleset struct {
	// Node is the node the ruleset is for (it goes into the table's
	// comment).
	Node string
	// Sets are the named sets and maps, sorted by name.
	Sets []Set
	// Chains are the regular chains, in the order they must be created
	// (a chain only jumps to chains before it).
	Chains []Chain
	// Base are the base chains, last.
	Base []Chain
}

// Set is a named set, or a verdict map when Type contains " : verdict".
type Set struct {
	Name    string
	Type    string
	Flags   string // "" or e.g. "interval"
	Comment string
	// Elements are sorted.
	Elements []string
}

// IsMap says whether s is a map.
func (s Set) IsMap() bool { return strings.Contains(s.Type, " : ") }

// Chain is a chain and its rules.
type Chain struct {
	Name    string
	Comment string
	// Hook is the base chain's definition ("type filter hook forward
	// priority filter; policy accept;"); empty for a regular chain.
	Hook  string
	Rules []string
}

func (c Chain) equal(o Chain) bool {
	return c.Name == o.Name && c.Comment == o.Comment && c.Hook == o.Hook && slices.Equal(c.Rules, o.Rules)
}

// quote makes s an nft string literal. What it quotes comes from the
// lab's API objects and ends up in a script host root hands to nft, so it
// keeps nothing that could end the literal or the line (a quote, a
// backslash, a newline or any other control character, which nft would
// read as the start of its own statement — an include of a host file,
// say): the API server's validation already keeps them out of the names
// quoted here, and this holds even if it did not.
func quote(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '"':
			return '\''
		case r == '\\' || r < 0x20 || r == 0x7f || r > 0x7e:
			return '?'
		}
		return r
	}, s)
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return `"` + s + `"`
}

func (s Set) keyword() string {
	if s.IsMap() {
		return "map"
	}
	return "set"
}

// header is the set's declaration without elements.
func (s Set) header() string {
	var b strings.Builder
	fmt.Fprintf(&b, "type %s;", s.Type)
	if s.Flags != "" {
		fmt.Fprintf(&b, " flags %s;", s.Flags)
	}
	if s.Comment != "" {
		fmt.Fprintf(&b, " comment %s;", quote(s.Comment))
	}
	return b.String()
}

// Render prints the ruleset as an nft script that replaces the table
// atomically (as nft -f applies it).
func Render(r *Ruleset) string {
	var b strings.Builder
	fmt.Fprintf(&b, "add table %s %s\ndelete table %s %s\n", Family, Table, Family, Table)
	b.WriteString(RenderTable(r))
	return b.String()
}

// RenderTable prints the table as nft list ruleset shows it.
func RenderTable(r *Ruleset) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table %s %s {\n", Family, Table)
	fmt.Fprintf(&b, "\tcomment %s\n", quote("NetworkPolicy enforcement on node "+r.Node+" (svclab)"))
	// Sets first (policy chains use them), then chains, then verdict maps
	// (which point at the pod chains), then the base chains (which look
	// up the maps).
	for _, s := range r.Sets {
		if !s.IsMap() {
			writeSet(&b, s)
		}
	}
	for _, c := range r.Chains {
		writeChain(&b, c)
	}
	for _, s := range r.Sets {
		if s.IsMap() {
			writeSet(&b, s)
		}
	}
	for _, c := range r.Base {
		writeChain(&b, c)
	}
	b.WriteString("}\n")
	return b.String()
}

func writeSet(b *strings.Builder, s Set) {
	fmt.Fprintf(b, "\n\t%s %s {\n\t\ttype %s\n", s.keyword(), s.Name, s.Type)
	if s.Flags != "" {
		fmt.Fprintf(b, "\t\tflags %s\n", s.Flags)
	}
	if s.Comment != "" {
		fmt.Fprintf(b, "\t\tcomment %s\n", quote(s.Comment))
	}
	if len(s.Elements) > 0 {
		fmt.Fprintf(b, "\t\telements = { %s }\n", strings.Join(s.Elements, ",\n\t\t\t     "))
	}
	b.WriteString("\t}\n")
}

func writeChain(b *strings.Builder, c Chain) {
	fmt.Fprintf(b, "\n\tchain %s {\n", c.Name)
	if c.Comment != "" {
		fmt.Fprintf(b, "\t\tcomment %s\n", quote(c.Comment))
	}
	if c.Hook != "" {
		fmt.Fprintf(b, "\t\t%s\n", c.Hook)
	}
	for _, r := range c.Rules {
		fmt.Fprintf(b, "\t\t%s\n", r)
	}
	b.WriteString("\t}\n")
}

// Diff prints the nft script that turns the table from old into new in
// one transaction: new sets and chains are added, set elements added and
// deleted, changed chains flushed and refilled, and what is gone deleted
// once nothing refers to it. An empty string means nothing changed.
func Diff(old, new *Ruleset) string {
	if old == nil {
		return Render(new)
	}
	var b strings.Builder
	tbl := Family + " " + Table
	oldSets := map[string]Set{}
	for _, s := range old.Sets {
		oldSets[s.Name] = s
	}
	newSets := map[string]Set{}
	for _, s := range new.Sets {
		newSets[s.Name] = s
	}
	oldChains := map[string]Chain{}
	for _, c := range append(slices.Clone(old.Chains), old.Base...) {
		oldChains[c.Name] = c
	}
	newChains := map[string]Chain{}
	for _, c := range append(slices.Clone(new.Chains), new.Base...) {
		newChains[c.Name] = c
	}
	elems := func(s Set, verb string, es []string) {
		if len(es) > 0 {
			fmt.Fprintf(&b, "%s element %s %s { %s }\n", verb, tbl, s.Name, strings.Join(es, ", "))
		}
	}
	// 1. New sets (not maps: their elements name chains), with elements;
	// element changes of existing sets. A set whose declaration changed
	// is replaced.
	replaced := map[string]bool{}
	for _, s := range new.Sets {
		o, ok := oldSets[s.Name]
		if ok && o.header() != s.header() {
			if s.IsMap() {
				// The verdict maps never change shape; if they did,
				// everything refers to them: start afresh.
				return Render(new)
			}
			replaced[s.Name] = true
		}
		if s.IsMap() {
			continue
		}
		if !ok || replaced[s.Name] {
			continue
		}
		added, removed := elementDiff(o.Elements, s.Elements)
		elems(s, "delete", removed)
		elems(s, "add", added)
	}
	// Rules referring to a replaced set must go before it does.
	for _, c := range append(slices.Clone(old.Chains), old.Base...) {
		if n, ok := newChains[c.Name]; (ok && !n.equal(c)) || refersToAny(c, replaced) {
			fmt.Fprintf(&b, "flush chain %s %s\n", tbl, c.Name)
		}
	}
	for _, s := range old.Sets {
		if replaced[s.Name] {
			fmt.Fprintf(&b, "delete set %s %s\n", tbl, s.Name)
		}
	}
	for _, s := range new.Sets {
		if _, ok := oldSets[s.Name]; (!ok || replaced[s.Name]) && !s.IsMap() {
			fmt.Fprintf(&b, "add set %s %s { %s }\n", tbl, s.Name, s.header())
			elems(s, "add", s.Elements)
		}
	}
	// 2. New chains, empty, so that rules and map elements can refer to
	// them whatever the order.
	for _, c := range append(slices.Clone(new.Chains), new.Base...) {
		if _, ok := oldChains[c.Name]; !ok {
			spec := c.Hook
			if c.Comment != "" {
				spec = strings.TrimSpace(spec + " comment " + quote(c.Comment) + ";")
			}
			fmt.Fprintf(&b, "add chain %s %s { %s }\n", tbl, c.Name, spec)
		}
	}
	// 3. Rules of new and changed chains. (nft cannot change a chain's
	// comment in place; a changed comment alone goes with the rules.)
	for _, c := range append(slices.Clone(new.Chains), new.Base...) {
		o, ok := oldChains[c.Name]
		if ok && o.equal(c) && !refersToAny(o, replaced) {
			continue
		}
		for _, r := range c.Rules {
			fmt.Fprintf(&b, "add rule %s %s %s\n", tbl, c.Name, r)
		}
	}
	// 4. Maps: new ones whole, element changes of the others.
	for _, s := range new.Sets {
		if !s.IsMap() {
			continue
		}
		o, ok := oldSets[s.Name]
		if !ok {
			fmt.Fprintf(&b, "add map %s %s { %s }\n", tbl, s.Name, s.header())
			elems(s, "add", s.Elements)
			continue
		}
		added, removed := elementDiff(o.Elements, s.Elements)
		// A key whose verdict changed is deleted and added again.
		elems(s, "delete", keysOf(removed))
		elems(s, "add", added)
	}
	// 5. What is gone: maps, then chains (now unreferenced), then sets.
	for _, s := range old.Sets {
		if _, ok := newSets[s.Name]; !ok && s.IsMap() {
			fmt.Fprintf(&b, "delete map %s %s\n", tbl, s.Name)
		}
	}
	gone := []Chain{}
	for _, c := range append(slices.Clone(old.Chains), old.Base...) {
		if _, ok := newChains[c.Name]; !ok {
			gone = append(gone, c)
			fmt.Fprintf(&b, "flush chain %s %s\n", tbl, c.Name)
		}
	}
	// Pod chains jump to policy chains: delete in reverse creation order.
	for i := len(gone) - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "delete chain %s %s\n", tbl, gone[i].Name)
	}
	for _, s := range old.Sets {
		if _, ok := newSets[s.Name]; !ok && !s.IsMap() {
			fmt.Fprintf(&b, "delete set %s %s\n", tbl, s.Name)
		}
	}
	return b.String()
}

// refersToAny says whether a rule of c names one of the sets.
func refersToAny(c Chain, sets map[string]bool) bool {
	if len(sets) == 0 {
		return false
	}
	for _, r := range c.Rules {
		for name := range sets {
			if strings.Contains(r, "@"+name+" ") || strings.HasSuffix(r, "@"+name) {
				return true
			}
		}
	}
	return false
}

// elementDiff returns the elements only in new and those only in old.
func elementDiff(old, new []string) (added, removed []string) {
	in := map[string]bool{}
	for _, e := range old {
		in[e] = true
	}
	for _, e := range new {
		if !in[e] {
			added = append(added, e)
		}
		delete(in, e)
	}
	for _, e := range old {
		if in[e] {
			removed = append(removed, e)
		}
	}
	return added, removed
}

// keysOf strips the values of map elements ("k : v" → "k").
func keysOf(es []string) []string {
	out := make([]string, len(es))
	for i, e := range es {
		k, _, _ := strings.Cut(e, " : ")
		out[i] = k
	}
	return out
}
