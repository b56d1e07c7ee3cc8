//go:build linux

package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"sync"

	"sigs.k8s.io/knftables"

	"github.com/svclab/svclab/lab/proxier/model"
	"github.com/svclab/svclab/lab/proxier/nftables"
)

// RuleLister lists programmed rules, one line each.
type RuleLister func(ctx context.Context) ([]string, error)

// NFTablesApplier programs the "kube-proxy" nftables table through the
// nftables.Syncer.
type NFTablesApplier struct {
	syncer *nftables.Syncer
	nft    *runRecorder
	list   RuleLister
}

// NewNFTablesApplier returns an applier for cfg on nft (knftables.New for
// the kernel, knftables.NewFake in tests). list lists the table for rule
// diffs (NFTListRules for the kernel, FakeRules for a fake).
func NewNFTablesApplier(cfg nftables.Config, nft knftables.Interface, list RuleLister, logger *slog.Logger) (*NFTablesApplier, error) {
	rec := &runRecorder{Interface: nft}
	s, err := nftables.New(cfg, rec, logger)
	if err != nil {
		return nil, err
	}
	return &NFTablesApplier{syncer: s, nft: rec, list: list}, nil
}

// Mode is part of Applier.
func (a *NFTablesApplier) Mode() string { return "nftables" }

// Syncer returns the underlying syncer (for tests that control its clock).
func (a *NFTablesApplier) Syncer() *nftables.Syncer { return a.syncer }

// Apply is part of Applier.
func (a *NFTablesApplier) Apply(ctx context.Context, snap *model.Snapshot, full bool) (*Applied, error) {
	if full {
		a.syncer.ForceFullSync()
	}
	a.nft.reset()
	res, err := a.syncer.Sync(ctx, snap)
	out := &Applied{Full: full}
	if res != nil {
		out.Full = res.Full
		out.Rewritten = res.Changed
		// The syncer runs the stale-chain deletion as its own first
		// transaction; if that failed it logged it and went on.
		runs := a.nft.results()
		out.CleanupFailed = len(res.StaleChainsDeleted) > 0 && len(runs) > 0 && runs[0] != nil
	}
	return out, err
}

// Rules is part of Applier.
func (a *NFTablesApplier) Rules(ctx context.Context) ([]string, error) {
	if a.list == nil {
		return nil, fmt.Errorf("no rule lister")
	}
	return a.list(ctx)
}

// SetServiceCIDRs is part of Applier.
func (a *NFTablesApplier) SetServiceCIDRs(cidrs []string) { a.syncer.SetServiceCIDRs(cidrs) }

// runRecorder wraps a knftables.Interface and records the result of every
// transaction run.
type runRecorder struct {
	knftables.Interface
	mu   sync.Mutex
	errs []error
}

func (r *runRecorder) Run(ctx context.Context, tx *knftables.Transaction) error {
	err := r.Interface.Run(ctx, tx)
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
	return err
}

func (r *runRecorder) reset() {
	r.mu.Lock()
	r.errs = nil
	r.mu.Unlock()
}

func (r *runRecorder) results() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// FakeRules lists the rules and elements of a knftables.Fake in the form
// NFTListRules uses.
func FakeRules(fake *knftables.Fake) RuleLister {
	return func(context.Context) ([]string, error) {
		var out []string
		for _, line := range strings.Split(fake.Dump(), "\n") {
			fields := strings.SplitN(line, " ", 6)
			if len(fields) < 6 {
				continue
			}
			// add rule ip kube-proxy CHAIN RULE / add element ip kube-proxy SET { ELEM }
			switch fields[1] {
			case "rule":
				out = append(out, "chain "+fields[4]+": "+fields[5])
			case "element":
				elem := strings.TrimSuffix(strings.TrimPrefix(fields[5], "{ "), " }")
				out = append(out, "element "+fields[4]+": "+elem)
			}
		}
		return out, nil
	}
}

// NFTListRules lists the table with "nft list table FAMILY kube-proxy" and
// returns one line per rule ("chain NAME: RULE") and per set or map
// element ("element NAME: ELEMENT"), as nft prints them. Timeouts and
// expiry times of dynamic set elements are dropped.
func NFTListRules(family knftables.Family) RuleLister {
	return func(ctx context.Context) ([]string, error) {
		out, err := exec.CommandContext(ctx, "nft", "list", "table", string(family), nftables.Table).Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok && strings.Contains(string(ee.Stderr), "No such file") {
				return nil, nil
			}
			return nil, fmt.Errorf("nft list table: %w", err)
		}
		return ParseNFTList(string(out)), nil
	}
}

// ParseNFTList turns "nft list table" output into comparable lines.
func ParseNFTList(text string) []string {
	var out []string
	var kind, name string // current object
	var elems strings.Builder
	inElements := false
	for _, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" {
			continue
		}
		if inElements {
			elems.WriteString(" " + line)
			if strings.HasSuffix(line, "}") {
				inElements = false
				body := strings.TrimSpace(elems.String())
				body = strings.TrimSuffix(strings.TrimPrefix(body, "{"), "}")
				for _, e := range splitTopLevel(body) {
					out = append(out, "element "+name+": "+e)
				}
			}
			continue
		}
		switch {
		case strings.HasPrefix(line, "table "):
			continue
		case line == "}":
			kind, name = "", ""
			continue
		case strings.HasSuffix(line, "{") && (strings.HasPrefix(line, "chain ") || strings.HasPrefix(line, "set ") || strings.HasPrefix(line, "map ") || strings.HasPrefix(line, "counter ")):
			f := strings.Fields(line)
			kind, name = f[0], f[1]
			continue
		}
		switch kind {
		case "chain":
			if strings.HasPrefix(line, "type ") && strings.Contains(line, " hook ") {
				continue
			}
			if strings.HasPrefix(line, "comment ") {
				continue
			}
			out = append(out, "chain "+name+": "+line)
		case "set", "map":
			if strings.HasPrefix(line, "elements = {") {
				elems.Reset()
				elems.WriteString(strings.TrimPrefix(line, "elements = "))
				if strings.HasSuffix(line, "}") {
					body := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(line, "elements = "), "{"), "}")
					for _, e := range splitTopLevel(body) {
						out = append(out, "element "+name+": "+e)
					}
				} else {
					inElements = true
				}
			}
		}
	}
	return out
}

// splitTopLevel splits an element list on commas outside quotes and
// braces, trimming each element and dropping dynamic-set timeouts.
func splitTopLevel(s string) []string {
	var out []string
	depth, quoted, start := 0, false, 0
	emit := func(e string) {
		e = strings.TrimSpace(e)
		if i := strings.Index(e, " timeout "); i >= 0 && !strings.Contains(e, ":") {
			e = e[:i]
		}
		if i := strings.Index(e, " expires "); i >= 0 {
			e = e[:i]
		}
		if e != "" {
			out = append(out, e)
		}
	}
	for i, c := range s {
		switch {
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '{':
			depth++
		case c == '}':
			depth--
		case c == ',' && depth == 0:
			emit(s[start:i])
			start = i + 1
		}
	}
	emit(s[start:])
	return out
}
