//go:build linux

package nftables

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"

	"sigs.k8s.io/knftables"
)

// DefaultBatchMinOperations is the size from which Batching rewrites a
// transaction; smaller ones gain nothing measurable.
const DefaultBatchMinOperations = 1000

// Batching wraps the knftables.Interface of the kernel and pipes large
// transactions into "nft -f -" in a form nft applies much faster, with the
// same result (the same single atomic transaction, the same ruleset):
//
//   - every "add element" and "delete element" is moved to the end, after
//     all chains exist, and the commands of one set or map are merged
//     into one (in their order), instead of one command per element;
//   - "flush chain" is dropped for chains that did not exist before the
//     transaction, since nothing was added to them before the flush.
//
// nft 1.0's cost per command grows with the size of the ruleset, so a
// first sync of 10,000 Services (100,000 commands) takes tens of seconds
// as knftables writes it, and a fraction of that batched. Into a table that
// does not exist yet (a node's first sync), the per-service chains are
// built in steps first (SplitFreshTransaction). Everything else (listing,
// smaller transactions) goes to the wrapped Interface.
type Batching struct {
	knftables.Interface
	// Path is the nft binary ("nft" if empty).
	Path string
	// MinOperations is the smallest transaction rewritten (0 means
	// DefaultBatchMinOperations).
	MinOperations int
	// ChunkRules is the size of the steps of a first sync into a new
	// table (0 means DefaultChunkRules); see SplitFreshTransaction.
	ChunkRules int
	// Logger reports a first sync that could not be applied in steps
	// (nil: not reported).
	Logger *slog.Logger
	// Steps is how many nft transactions the last rewritten Run ran (for
	// tests and logs).
	Steps int
}

// Run is part of knftables.Interface.
func (b *Batching) Run(ctx context.Context, tx *knftables.Transaction) error {
	min := b.MinOperations
	if min <= 0 {
		min = DefaultBatchMinOperations
	}
	if tx.NumOperations() < min {
		return b.Interface.Run(ctx, tx)
	}
	text := tx.String()
	if strings.Contains(text, "# ERROR: ") {
		// An invalid operation: let knftables report it.
		return b.Interface.Run(ctx, tx)
	}
	existing, err := b.Interface.List(ctx, "chain")
	fresh := isNoTable(err)
	if err == nil && len(existing) == 0 {
		// The netlink lister lists the chains of every table and reports
		// none for a missing table; listing its sets tells.
		_, serr := b.Interface.List(ctx, "sets")
		fresh = isNoTable(serr)
	}
	if err != nil && !fresh {
		// Without the list every flush has to stay: it may be needed.
		return b.Interface.Run(ctx, tx)
	}
	exists := make(map[string]bool, len(existing))
	for _, c := range existing {
		exists[c] = true
	}
	batched := BatchTransaction(text, exists)
	if fresh {
		// No table yet (a fresh node): build the service chains first,
		// unhooked, in steps.
		chunks, final := SplitFreshTransaction(batched, b.chunkRules())
		if len(chunks) > 1 {
			err := b.runChunks(ctx, chunks, final)
			if err == nil {
				return nil
			}
			if b.Logger != nil {
				b.Logger.ErrorContext(ctx, "building the new table in steps failed; applying it as one transaction", "err", err)
			}
			// Back to where we started (no table), then the plain way,
			// which reports any error in the transaction itself.
			if err := b.nft(ctx, "delete table "+tableOf(batched)+"\n"); err != nil {
				return err
			}
		}
	}
	b.Steps = 0
	return b.nft(ctx, batched)
}

// DefaultChunkRules is how many service-chain rules with an anonymous set
// or map one step of a fresh table's first sync holds (see
// SplitFreshTransaction).
const DefaultChunkRules = 500

func (b *Batching) chunkRules() int {
	if b.ChunkRules > 0 {
		return b.ChunkRules
	}
	return DefaultChunkRules
}

// runChunks runs the service-chain steps and then the final transaction.
func (b *Batching) runChunks(ctx context.Context, chunks []string, final string) error {
	b.Steps = 0
	for _, c := range chunks {
		if err := b.nft(ctx, c); err != nil {
			return err
		}
	}
	return b.nft(ctx, final)
}

// nft pipes text into "nft -f -" (one atomic transaction).
func (b *Batching) nft(ctx context.Context, text string) error {
	b.Steps++
	path := b.Path
	if path == "" {
		path = "nft"
	}
	cmd := exec.CommandContext(ctx, path, "-f", "-")
	cmd.Stdin = strings.NewReader(text)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s -f -: %w: %s", path, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// tableOf is "FAMILY TABLE" of a transaction's first line
// ("add table FAMILY TABLE ...").
func tableOf(text string) string {
	line, _, _ := strings.Cut(text, "\n")
	f := strings.Fields(line)
	if len(f) < 4 {
		return ""
	}
	return f[2] + " " + f[3]
}

// SplitFreshTransaction splits the (batched) transaction of a first sync
// into a table that does not exist yet into steps that nft and the kernel
// apply much faster than the single transaction, with the same result.
//
// The kernel's cost for each anonymous set (every "numgen ... map { ... }"
// rule has one) grows with the number of commands before it in the same
// transaction, so one transaction of 10,000 Services spends most of its
// time there. The per-service chains, their rules and the affinity sets
// are therefore created first, in transactions of about perChunk rules
// with a "{ ... }" (an anonymous set or map) each, while
// nothing jumps to them: the first step also creates the static chains,
// sets and maps (empty, in their order, so that "nft list" lists every
// object in the same order as after the single transaction), and no base
// chain has a rule and no map an element yet. The final transaction then
// adds all other rules and all elements at once, and only it makes the
// Services reachable.
//
// It returns no chunks if the transaction does not start by adding the
// table, or is small enough for one step.
func SplitFreshTransaction(text string, perChunk int) (chunks []string, final string) {
	first, _, _ := strings.Cut(text, "\n")
	if !strings.HasPrefix(first, "add table ") {
		return nil, text
	}
	head := first + "\n"
	var prologue, out, chunk strings.Builder
	out.Grow(len(text) / 4)
	rules, lastWasRule, seenService := 0, false, false
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" {
			continue
		}
		svc, isRule, isDef := serviceLine(line)
		if !svc {
			if !seenService && isDefinition(line) {
				prologue.WriteString(line)
				prologue.WriteByte('\n')
			} else {
				out.WriteString(line)
				out.WriteByte('\n')
			}
			continue
		}
		seenService = true
		// Cut between Services: before a definition that follows a rule.
		if isDef && lastWasRule && rules >= perChunk {
			chunks = append(chunks, chunk.String())
			chunk.Reset()
			rules = 0
		}
		if chunk.Len() == 0 {
			if len(chunks) == 0 {
				chunk.WriteString(prologue.String())
			} else {
				chunk.WriteString(head)
			}
		}
		chunk.WriteString(line)
		chunk.WriteByte('\n')
		// Rules with an anonymous set or map ("{ ... }") are the
		// expensive ones.
		if isRule && strings.Contains(line, "{") {
			rules++
		}
		lastWasRule = isRule
	}
	if chunk.Len() > 0 {
		chunks = append(chunks, chunk.String())
	}
	if len(chunks) < 2 {
		return nil, text
	}
	return chunks, out.String()
}

// isDefinition tells whether line adds or deletes the table, a chain, set,
// map or other object (not a rule or element, and not a flush).
func isDefinition(line string) bool {
	verb, rest, _ := strings.Cut(line, " ")
	kind, _, _ := strings.Cut(rest, " ")
	return (verb == "add" || verb == "delete") && kind != "rule" && kind != "element"
}

// serviceLine tells whether line creates a per-service chain, a rule in
// one, or an affinity set (isDef for the chain and the set).
func serviceLine(line string) (svc, isRule, isDef bool) {
	// add chain|rule|set FAMILY TABLE NAME ...
	rest, ok := strings.CutPrefix(line, "add ")
	if !ok {
		return false, false, false
	}
	kind, rest, _ := strings.Cut(rest, " ")
	_, rest, _ = strings.Cut(rest, " ") // family
	_, rest, _ = strings.Cut(rest, " ") // table
	name, _, _ := strings.Cut(rest, " ")
	switch kind {
	case "chain":
		return isServiceChainName(name), false, true
	case "rule":
		return isServiceChainName(name), true, false
	case "set":
		return isAffinitySetName(name), false, true
	}
	return false, false, false
}

// BatchTransaction rewrites the text of a knftables transaction as
// Batching describes; existing are the chains of the table before it.
func BatchTransaction(text string, existing map[string]bool) string {
	type container struct {
		verb, prefix string // "add"/"delete", "element FAMILY TABLE NAME"
	}
	var out strings.Builder
	out.Grow(len(text))
	var order []container
	elems := map[container][]string{}
	// Element commands of one container keep their order, adds and
	// deletes included: runs of one verb are merged, so that a delete
	// followed by an add of the same key (a changed value) stays in that
	// order.
	var lastOf = map[string]string{} // prefix -> verb of its last run
	runs := map[string]int{}
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" {
			continue
		}
		verb, rest, _ := strings.Cut(line, " ")
		if (verb == "add" || verb == "delete") && strings.HasPrefix(rest, "element ") {
			if open := strings.Index(rest, " { "); open > 0 && strings.HasSuffix(rest, " }") {
				prefix := rest[:open]
				if lastOf[prefix] != verb {
					runs[prefix]++
					lastOf[prefix] = verb
				}
				c := container{verb: verb, prefix: fmt.Sprintf("%s#%d", prefix, runs[prefix])}
				if _, seen := elems[c]; !seen {
					order = append(order, c)
				}
				elems[c] = append(elems[c], rest[open+3:len(rest)-2])
				continue
			}
		}
		if verb == "flush" && strings.HasPrefix(rest, "chain ") {
			// flush chain FAMILY TABLE NAME
			if f := strings.Fields(rest); len(f) == 4 && !existing[f[3]] {
				continue
			}
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	for _, c := range order {
		prefix, _, _ := strings.Cut(c.prefix, "#")
		out.WriteString(c.verb)
		out.WriteByte(' ')
		out.WriteString(prefix)
		out.WriteString(" { ")
		for i, e := range elems[c] {
			if i > 0 {
				out.WriteString(", ")
			}
			out.WriteString(e)
		}
		out.WriteString(" }\n")
	}
	return out.String()
}
