package daemon

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svclab/svclab/lab/proxier/iptables"
	"github.com/svclab/svclab/lab/proxier/model"
	"github.com/svclab/svclab/lab/proxier/nfacct"
)

// IPTablesRunner runs the iptables tools of one family.
type IPTablesRunner interface {
	// Restore feeds data to "iptables-restore -w 5 --noflush --counters".
	Restore(ctx context.Context, data []byte) error
	// Save returns "iptables-save -t table".
	Save(ctx context.Context, table string) ([]byte, error)
	// EnsureChain creates chain in table if it does not exist.
	EnsureChain(ctx context.Context, table, chain string) error
	// EnsureRule inserts the rule at the top of chain unless it exists.
	EnsureRule(ctx context.Context, table, chain string, args []string) error
	// ChainExists reports whether chain exists in table.
	ChainExists(ctx context.Context, table, chain string) (bool, error)
}

// ExecIPTables runs the real binaries (iptables or ip6tables, and their
// -save and -restore variants).
type ExecIPTables struct {
	Family v1.IPFamily
}

func (e ExecIPTables) bin(suffix string) string {
	if e.Family == v1.IPv6Protocol {
		return "ip6tables" + suffix
	}
	return "iptables" + suffix
}

// Restore is part of IPTablesRunner.
func (e ExecIPTables) Restore(ctx context.Context, data []byte) error {
	cmd := exec.CommandContext(ctx, e.bin("-restore"), "-w", "5", "--noflush", "--counters")
	cmd.Stdin = bytes.NewReader(data)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", e.bin("-restore"), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Save is part of IPTablesRunner.
func (e ExecIPTables) Save(ctx context.Context, table string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, e.bin("-save"), "-t", table).Output()
	if err != nil {
		return nil, fmt.Errorf("%s -t %s: %w", e.bin("-save"), table, err)
	}
	return out, nil
}

func (e ExecIPTables) run(ctx context.Context, args ...string) ([]byte, error) {
	return exec.CommandContext(ctx, e.bin(""), append([]string{"-w", "5"}, args...)...).CombinedOutput()
}

// EnsureChain is part of IPTablesRunner.
func (e ExecIPTables) EnsureChain(ctx context.Context, table, chain string) error {
	out, err := e.run(ctx, "-t", table, "-N", chain)
	if err != nil && !strings.Contains(string(out), "exists") {
		return fmt.Errorf("%s -t %s -N %s: %w: %s", e.bin(""), table, chain, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// EnsureRule is part of IPTablesRunner.
func (e ExecIPTables) EnsureRule(ctx context.Context, table, chain string, args []string) error {
	if _, err := e.run(ctx, append([]string{"-t", table, "-C", chain}, args...)...); err == nil {
		return nil
	}
	out, err := e.run(ctx, append([]string{"-t", table, "-I", chain}, args...)...)
	if err != nil {
		return fmt.Errorf("%s -t %s -I %s: %w: %s", e.bin(""), table, chain, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ChainExists is part of IPTablesRunner.
func (e ExecIPTables) ChainExists(ctx context.Context, table, chain string) (bool, error) {
	out, err := e.run(ctx, "-t", table, "-S", chain, "1")
	if err == nil {
		return true, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return false, nil
	}
	return false, fmt.Errorf("%s -t %s -S %s: %w: %s", e.bin(""), table, chain, err, out)
}

// IPTablesApplier programs the filter and nat tables with iptables-restore.
type IPTablesApplier struct {
	// StaleChainCleanupPeriod is kube-proxy's syncPeriod: in large-cluster
	// mode stale chains are looked for (with iptables-save, which takes
	// seconds on big rulesets) at most this often, as upstream. Zero looks
	// on every sync.
	StaleChainCleanupPeriod time.Duration

	// NFAcct, if set, is asked at every full sync for kube-proxy's nfacct
	// counters; the rules count packets with them ("-m nfacct") only if
	// every one of them exists, as upstream's do where the kernel
	// supports nfacct.
	NFAcct nfacct.Interface

	// StepLines is the size of the transactions in which a full sync
	// restores many new chains (iptables.PrepareRestore); zero restores
	// the input as rendered, in one transaction, as upstream does.
	StepLines int

	cfg    iptables.Config
	run    IPTablesRunner
	logger *slog.Logger
	prev   *model.Snapshot
	// serviceChains are the per-service nat chains after the last
	// successful sync (nil: unknown).
	serviceChains map[string]bool
	names         iptables.NameCache
	needFull      bool
	largeCluster  bool
	lastCleanup   time.Time
}

// NewIPTablesApplier returns an applier for cfg.
func NewIPTablesApplier(cfg iptables.Config, run IPTablesRunner, logger *slog.Logger) *IPTablesApplier {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &IPTablesApplier{cfg: cfg, run: run, logger: logger.With("component", "iptables"), needFull: true, StepLines: iptables.DefaultStepLines}
}

// Mode is part of Applier.
func (a *IPTablesApplier) Mode() string { return "iptables" }

// SetServiceCIDRs is part of Applier (iptables mode has no
// cluster-ips-check).
func (a *IPTablesApplier) SetServiceCIDRs([]string) {}

// Apply is part of Applier. A full sync first ensures the jump rules from
// the built-in chains (they are not part of the restore input); both kinds
// of sync then restore the filter and nat tables with --noflush, which
// replaces only the chains named in the input. A partial sync leaves the
// chains of unchanged Services out.
func (a *IPTablesApplier) Apply(ctx context.Context, snap *model.Snapshot, full bool) (*Applied, error) {
	full = full || a.needFull || a.prev == nil
	out := &Applied{Full: full}
	fail := func(err error) (*Applied, error) {
		a.needFull = true
		a.serviceChains = nil
		return out, err
	}
	// Stale chains are looked for at every sync, in large-cluster mode at
	// most once per StaleChainCleanupPeriod, as upstream does. Only this
	// proxier writes service chains, so after a full sync it knows which
	// exist without an iptables-save (which takes as long as the restore
	// on a large node); upstream saves the nat table every time.
	cleanup := !a.largeCluster || time.Since(a.lastCleanup) > a.StaleChainCleanupPeriod
	var saved map[string]*savedTable
	if full {
		saved = a.saveTables(ctx, cleanup)
		if err := a.ensureJumps(ctx, saved); err != nil {
			return fail(err)
		}
		if a.NFAcct != nil {
			a.cfg.NFAcct = true
			for _, name := range nfacct.Counters {
				if err := a.NFAcct.Ensure(name); err != nil {
					a.cfg.NFAcct = false
					a.logger.ErrorContext(ctx, "Failed to create nfacct counter; the corresponding metric will not be updated", "counter", name, "err", err)
				}
			}
		}
	}
	opts := iptables.Options{Names: &a.names}
	if full {
		a.names.Reset()
	} else {
		opts.Changed = model.ChangedServices(a.prev, snap)
		for n := range opts.Changed {
			out.Rewritten = append(out.Rewritten, n)
		}
		slices.SortFunc(out.Rewritten, func(x, y types.NamespacedName) int { return strings.Compare(x.String(), y.String()) })
	}
	switch {
	case !cleanup:
	case !full && a.serviceChains != nil:
		opts.ExistingNATChains = slices.Collect(maps.Keys(a.serviceChains))
	case saved["nat"] != nil:
		opts.ExistingNATChains = slices.Collect(maps.Keys(saved["nat"].chains))
	default:
		if nat, err := a.run.Save(ctx, "nat"); err == nil {
			opts.ExistingNATChains = chainsOf(nat)
		} else {
			cleanup = false
			a.logger.ErrorContext(ctx, "failed to execute iptables-save: stale chains will not be deleted", "err", err)
		}
	}
	res, err := iptables.Render(ctx, a.logger, a.cfg, snap, opts)
	if err != nil {
		return fail(err)
	}
	if cleanup {
		// Where upstream takes the time: after the rules, before the restore.
		a.lastCleanup = time.Now()
	}
	out.RulesWritten = countRules(res.Restore)
	out.LargeClusterMode = res.LargeClusterMode
	start := time.Now()
	// The input is rearranged for iptables-nft's restore: rules ordered
	// by chain, and in a full sync many new chains (a node's first sync)
	// in transactions of their own first; see iptables.PrepareRestore.
	var exists func(table, chain string) bool
	if full {
		exists = func(table, chain string) bool { return saved[table] == nil || saved[table].hasChain(chain) }
	}
	input, transactions := iptables.PrepareRestore(res.Restore, exists, a.StepLines)
	err = a.run.Restore(ctx, []byte(input))
	if err != nil && transactions > 1 && !tooLong(err) {
		a.logger.ErrorContext(ctx, "restoring the new chains in transactions of their own failed; restoring all rules in one", "err", err)
		err = a.run.Restore(ctx, []byte(res.Restore))
	}
	if err != nil && tooLong(err) {
		// A transaction larger than the node's netlink socket takes (see
		// iptables.SplitRestore): chain by chain, in small ones.
		a.logger.WarnContext(ctx, "the rules are more than one iptables-restore transaction can carry on this node; restoring them chain by chain", "lines", strings.Count(res.Restore, "\n"), "transactionLines", splitStepLines)
		err = a.run.Restore(ctx, []byte(iptables.SplitRestore(res.Restore, splitStepLines)))
	}
	if err != nil {
		return fail(fmt.Errorf("failed to execute iptables-restore: %w", err))
	}
	a.logger.DebugContext(ctx, "restored iptables rules", "full", full, "took", time.Since(start), "transactions", transactions, "deletedChains", len(res.DeletedChains))
	a.prev = snap
	a.needFull = false
	a.largeCluster = res.LargeClusterMode
	switch {
	case cleanup:
		a.serviceChains = res.ServiceChains
	case a.serviceChains != nil:
		// Chains no longer in use stay until the next cleanup. (Without a
		// complete list, the next cleanup runs iptables-save.)
		maps.Copy(a.serviceChains, res.ServiceChains)
	}
	return out, nil
}

// splitStepLines is the size of the transactions of a restore split
// because one transaction was too large: about 60 KiB of netlink
// messages, well within the 208 KiB a socket gets by default.
const splitStepLines = 150

// tooLong tells a restore that failed because a transaction did not fit
// in the netlink socket's buffer (EMSGSIZE).
func tooLong(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Message too long")
}

// ensureJumps makes sure of the jump rules from the built-in chains, which
// are not part of the restore input. Upstream checks each with "iptables
// -N" and "iptables -C" (28 runs of iptables at every full sync); here the
// saved tables answer those questions at once, and what is missing is
// added in one iptables-restore (--noflush: chains are declared only when
// missing, rules inserted at the top as "iptables -I" does). A table that
// was not saved, or whose restore fails, is checked rule by rule with
// iptables as upstream does.
func (a *IPTablesApplier) ensureJumps(ctx context.Context, saved map[string]*savedTable) error {
	type batch struct{ chains, rules []string }
	batches := map[string]*batch{}
	var tables []string
	var slow []iptables.JumpRule
	for _, j := range iptables.JumpRules() {
		t := saved[j.Table]
		if t == nil {
			slow = append(slow, j)
			continue
		}
		b := batches[j.Table]
		if b == nil {
			b = &batch{}
			batches[j.Table] = b
			tables = append(tables, j.Table)
		}
		if dst := j.Args[len(j.Args)-1]; !t.hasChain(dst) {
			t.chains[dst] = true
			b.chains = append(b.chains, ":"+dst+" - [0:0]")
		}
		if !t.hasRule(j.Chain, j.Args) {
			b.rules = append(b.rules, "-I "+j.Chain+" "+strings.Join(j.Args, " "))
		}
	}
	var in strings.Builder
	for _, table := range tables {
		b := batches[table]
		if len(b.chains)+len(b.rules) == 0 {
			continue
		}
		fmt.Fprintf(&in, "*%s\n", table)
		for _, l := range append(b.chains, b.rules...) {
			in.WriteString(l + "\n")
		}
		in.WriteString("COMMIT\n")
	}
	if in.Len() > 0 {
		if err := a.run.Restore(ctx, []byte(in.String())); err != nil {
			a.logger.ErrorContext(ctx, "adding the jump rules in one iptables-restore failed; checking them one by one", "err", err)
			for _, j := range iptables.JumpRules() {
				if batches[j.Table] != nil {
					slow = append(slow, j)
				}
			}
		}
	}
	for _, j := range slow {
		if err := a.run.EnsureChain(ctx, j.Table, j.Args[len(j.Args)-1]); err != nil {
			return fmt.Errorf("failed to ensure chain exists: %w", err)
		}
		// The comment is quoted for iptables-restore; the iptables command
		// line takes it unquoted.
		args := make([]string, len(j.Args))
		for i, arg := range j.Args {
			args[i] = strings.Trim(arg, `"`)
		}
		if err := a.run.EnsureRule(ctx, j.Table, j.Chain, args); err != nil {
			return fmt.Errorf("failed to ensure chain jumps: %w", err)
		}
	}
	return nil
}

// savedTable is what iptables-save printed of one table: its chains and
// its rules ("-A CHAIN ...").
type savedTable struct {
	chains map[string]bool
	rules  map[string]bool
}

// saveTables saves the filter table, and the nat table when stale chains
// are to be looked for (it is saved for that anyway) or the node is not in
// large-cluster mode (where saving nat takes as long as restoring it). A
// table that could not be saved is missing (nil): its jump rules are
// checked with iptables instead.
func (a *IPTablesApplier) saveTables(ctx context.Context, cleanup bool) map[string]*savedTable {
	tables := []string{"filter"}
	if cleanup || !a.largeCluster {
		tables = append(tables, "nat")
	}
	out := map[string]*savedTable{}
	for _, table := range tables {
		data, err := a.run.Save(ctx, table)
		if err != nil {
			a.logger.ErrorContext(ctx, "failed to execute iptables-save", "table", table, "err", err)
			continue
		}
		out[table] = parseSave(data)
	}
	return out
}

func parseSave(save []byte) *savedTable {
	t := &savedTable{chains: map[string]bool{}, rules: map[string]bool{}}
	sc := bufio.NewScanner(bytes.NewReader(save))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, ":"):
			if name, _, ok := strings.Cut(line[1:], " "); ok {
				t.chains[name] = true
			}
		case strings.HasPrefix(line, "-A "), strings.HasPrefix(line, "["):
			t.rules[stripCounters(line)] = true
		}
	}
	return t
}

// hasChain reports whether the saved table has chain (false when the
// table was not saved).
func (t *savedTable) hasChain(chain string) bool { return t != nil && t.chains[chain] }

// hasRule reports whether the saved table has the rule, written as
// iptables-save writes it (false when the table was not saved).
func (t *savedTable) hasRule(chain string, args []string) bool {
	return t != nil && t.rules["-A "+chain+" "+strings.Join(args, " ")]
}

// chainsOf returns the chain names declared in iptables-save output,
// sorted.
func chainsOf(save []byte) []string { return slices.Sorted(maps.Keys(parseSave(save).chains)) }

// countRules counts the "-A" lines per table of restore input.
func countRules(restore string) map[string]int {
	out := map[string]int{}
	table := ""
	for _, line := range strings.Split(restore, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
			out[table] += 0
		case strings.HasPrefix(line, "-A "):
			out[table]++
		}
	}
	return out
}

// Rules is part of Applier: the kube-proxy rules of the filter and nat
// tables, as "-t TABLE -A CHAIN ..." lines without counters (rules in
// built-in chains only if they jump to a KUBE- chain).
func (a *IPTablesApplier) Rules(ctx context.Context) ([]string, error) {
	var out []string
	for _, table := range []string{"filter", "nat"} {
		save, err := a.run.Save(ctx, table)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(save), "\n") {
			line = stripCounters(line)
			if !strings.HasPrefix(line, "-A ") {
				continue
			}
			chain, _, _ := strings.Cut(line[3:], " ")
			if !strings.HasPrefix(chain, "KUBE-") && !strings.Contains(line, "-j KUBE-") {
				continue
			}
			out = append(out, "-t "+table+" "+line)
		}
	}
	return out, nil
}

// stripCounters removes a leading "[packets:bytes] " (iptables-save -c).
func stripCounters(line string) string {
	if strings.HasPrefix(line, "[") {
		if _, rest, ok := strings.Cut(line, "] "); ok {
			return rest
		}
	}
	return line
}

// CanaryMonitor is kube-proxy's iptables.Monitor: it creates the empty
// KUBE-PROXY-CANARY chain in mangle, nat and filter and checks every
// interval that it still exists in mangle; when it is gone (someone
// flushed iptables) it waits briefly for the other tables to be flushed
// too, calls reload (which forces a full sync) and starts over. It returns
// when ctx is done.
func CanaryMonitor(ctx context.Context, logger *slog.Logger, run IPTablesRunner, interval time.Duration, reload func(reason string)) {
	tables := []string{"mangle", "nat", "filter"}
	const canary = "KUBE-PROXY-CANARY"
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for {
		// Create the canaries (retrying every interval).
		for {
			ok := true
			for _, table := range tables {
				if err := run.EnsureChain(ctx, table, canary); err != nil {
					logger.ErrorContext(ctx, "could not set up iptables canary", "table", table, "chain", canary, "err", err)
					ok = false
					break
				}
			}
			if ok {
				break
			}
			if !wait(interval) {
				return
			}
		}
		// Poll the first table.
		for {
			if !wait(interval) {
				return
			}
			exists, err := run.ChainExists(ctx, tables[0], canary)
			if err != nil {
				logger.ErrorContext(ctx, "could not check for iptables canary", "table", tables[0], "err", err)
				continue
			}
			if !exists {
				break
			}
		}
		logger.InfoContext(ctx, "iptables canary deleted", "table", tables[0], "chain", canary)
		// Give whoever is flushing a moment to finish the other tables.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			gone := true
			for _, table := range tables[1:] {
				if exists, err := run.ChainExists(ctx, table, canary); exists || err != nil {
					gone = false
				}
			}
			if gone || !wait(200*time.Millisecond) {
				break
			}
		}
		if ctx.Err() != nil {
			return
		}
		logger.InfoContext(ctx, "reloading after iptables flush")
		reload("canary")
	}
}
