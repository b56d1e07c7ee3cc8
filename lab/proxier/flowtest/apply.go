package flowtest

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/vishvananda/netns"

	"github.com/svclab/svclab/lab/proxier/iptables"
	"github.com/svclab/svclab/lab/proxier/nfacct"
)

// ApplyNFTables loads an "nft -f" input (the renderer's ruleset) into ns.
func ApplyNFTables(ctx context.Context, ns Netns, ruleset string) error {
	if _, err := ns.Exec(ctx, []byte(ruleset), "nft", "-f", "-"); err != nil {
		return fmt.Errorf("load nftables ruleset: %w", err)
	}
	return nil
}

// ApplyIPTables programs ns the way kube-proxy's iptables proxier does on
// a fresh node: the canary chains, then for each jump rule "-N" its target
// chain and "-I" (prepend) the rule into the built-in chain, in
// iptables.JumpRules order, then "iptables-restore --noflush --counters"
// with the renderer's input.
func ApplyIPTables(ctx context.Context, ns Netns, restore string) error {
	for _, c := range iptables.CanaryChains() {
		table, chain, _ := strings.Cut(c, " ")
		if err := ensureChain(ctx, ns, table, chain); err != nil {
			return err
		}
	}
	for _, j := range iptables.JumpRules() {
		args := make([]string, len(j.Args))
		for i, a := range j.Args {
			// JumpRule.Args quote comments for display; kube-proxy passes
			// them to iptables unquoted.
			if u, err := strconv.Unquote(a); err == nil && strings.HasPrefix(a, `"`) {
				a = u
			}
			args[i] = a
		}
		target := args[len(args)-1]
		if err := ensureChain(ctx, ns, j.Table, target); err != nil {
			return err
		}
		check := append([]string{"-w", "-t", j.Table, "-C", j.Chain}, args...)
		if _, err := ns.Exec(ctx, nil, "iptables", check...); err == nil {
			continue
		}
		insert := append([]string{"-w", "-t", j.Table, "-I", j.Chain}, args...)
		if _, err := ns.Exec(ctx, nil, "iptables", insert...); err != nil {
			return fmt.Errorf("insert jump rule: %w", err)
		}
	}
	if _, err := ns.Exec(ctx, []byte(restore), "iptables-restore", "-w", "--noflush", "--counters"); err != nil {
		return fmt.Errorf("iptables-restore: %w", err)
	}
	return nil
}

func ensureChain(ctx context.Context, ns Netns, table, chain string) error {
	if _, err := ns.Exec(ctx, nil, "iptables", "-w", "-t", table, "-S", chain); err == nil {
		return nil
	}
	if _, err := ns.Exec(ctx, nil, "iptables", "-w", "-t", table, "-N", chain); err != nil {
		return fmt.Errorf("create chain: %w", err)
	}
	return nil
}

// ListNFTables returns "nft list table ip kube-proxy" in ns.
func ListNFTables(ctx context.Context, ns Netns) (string, error) {
	out, err := ns.Exec(ctx, nil, "nft", "list", "table", "ip", "kube-proxy")
	return string(out), err
}

// IPTablesSave returns "iptables-save" in ns.
func IPTablesSave(ctx context.Context, ns Netns) (string, error) {
	out, err := ns.Exec(ctx, nil, "iptables-save")
	return string(out), err
}

// EnsureNFAcct creates nfacct objects in ns as kube-proxy's iptables
// proxier does (nfacct.Netlink.Ensure), leaving existing ones alone. An
// error means the kernel does not support nfacct, which makes kube-proxy
// leave the nfacct matches out of its rules.
func EnsureNFAcct(ns Netns, names ...string) error {
	h, err := netns.GetFromPath(ns.Path())
	if err != nil {
		return fmt.Errorf("nfacct: open namespace %s: %w", ns.Name, err)
	}
	defer h.Close()
	n, err := nfacct.NewAt(h)
	if err != nil {
		return err
	}
	defer n.Close()
	for _, name := range names {
		if err := n.Ensure(name); err != nil {
			return fmt.Errorf("nfacct: create %s: %w", name, err)
		}
	}
	return nil
}
