package nftables

import (
	"bytes"
	"context"
	"fmt"
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
// as knftables writes it, and a fraction of that batched. Everything else
// (listing, smaller transactions) goes to the wrapped Interface.
type Batching struct {
	knftables.Interface
	// Path is the nft binary ("nft" if empty).
	Path string
	// MinOperations is the smallest transaction rewritten (0 means
	// DefaultBatchMinOperations).
	MinOperations int
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
	if err != nil && !knftables.IsNotFound(err) {
		// Without the list every flush has to stay: it may be needed.
		return b.Interface.Run(ctx, tx)
	}
	exists := make(map[string]bool, len(existing))
	for _, c := range existing {
		exists[c] = true
	}
	path := b.Path
	if path == "" {
		path = "nft"
	}
	cmd := exec.CommandContext(ctx, path, "-f", "-")
	cmd.Stdin = strings.NewReader(BatchTransaction(text, exists))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s -f -: %w: %s", path, err, strings.TrimSpace(stderr.String()))
	}
	return nil
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
