//go:build linux

package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"sigs.k8s.io/knftables"
)

// ownedIPTablesChain reports whether kube-proxy's iptables mode owns
// chain (KUBE-FIREWALL is kubelet's and is left alone).
func ownedIPTablesChain(chain string) bool {
	switch chain {
	case "KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ",
		"KUBE-FORWARD", "KUBE-PROXY-FIREWALL", "KUBE-PROXY-CANARY":
		return true
	}
	for _, p := range []string{"KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-", "KUBE-SEP-"} {
		if strings.HasPrefix(chain, p) {
			return true
		}
	}
	return false
}

// CleanupIPTables removes what kube-proxy's iptables mode leaves behind
// (as iptables.CleanupLeftovers does when kube-proxy starts in nftables
// mode): the jump rules from the built-in chains and every owned chain of
// the nat, filter and mangle tables. It reports whether anything was
// removed.
func CleanupIPTables(ctx context.Context, run IPTablesRunner) (bool, error) {
	removed := false
	for _, table := range []string{"nat", "filter", "mangle"} {
		save, err := run.Save(ctx, table)
		if err != nil {
			return removed, err
		}
		var owned, deletes []string
		for _, c := range chainsOf(save) {
			if ownedIPTablesChain(c) {
				owned = append(owned, c)
			}
		}
		if len(owned) == 0 {
			continue
		}
		for _, line := range strings.Split(string(save), "\n") {
			line = stripCounters(line)
			if !strings.HasPrefix(line, "-A ") {
				continue
			}
			chain, _, _ := strings.Cut(line[3:], " ")
			fields := strings.Fields(line)
			target := ""
			if i := slices.Index(fields, "-j"); i >= 0 && i+1 < len(fields) {
				target = fields[i+1]
			}
			if !ownedIPTablesChain(chain) && ownedIPTablesChain(target) {
				deletes = append(deletes, "-D "+line[3:])
			}
		}
		var b strings.Builder
		fmt.Fprintf(&b, "*%s\n", table)
		for _, d := range deletes {
			b.WriteString(d + "\n")
		}
		for _, c := range owned {
			fmt.Fprintf(&b, ":%s - [0:0]\n", c)
		}
		for _, c := range owned {
			fmt.Fprintf(&b, "-X %s\n", c)
		}
		b.WriteString("COMMIT\n")
		if err := run.Restore(ctx, []byte(b.String())); err != nil {
			return removed, fmt.Errorf("cleanup %s table: %w", table, err)
		}
		removed = true
	}
	return removed, nil
}

// CleanupNFTables deletes the kube-proxy nftables table (left behind by
// nftables mode) if it exists, as nftables.CleanupLeftovers does when
// kube-proxy starts in iptables mode.
func CleanupNFTables(ctx context.Context, nft knftables.Interface) (bool, error) {
	tx := nft.NewTransaction()
	tx.Delete(&knftables.Table{})
	if err := nft.Run(ctx, tx); err != nil {
		if knftables.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

func logCleanup(ctx context.Context, logger *slog.Logger, what string, removed bool, err error) {
	switch {
	case err != nil:
		logger.ErrorContext(ctx, "failed to clean up leftover rules", "what", what, "err", err)
	case removed:
		logger.InfoContext(ctx, "cleaned up leftover rules of the other proxy mode", "what", what)
	}
}

// CleanupOtherMode removes the rules of the mode not in use.
func CleanupOtherMode(ctx context.Context, logger *slog.Logger, mode string, ipt IPTablesRunner, nft knftables.Interface) {
	switch mode {
	case "nftables":
		if ipt != nil {
			removed, err := CleanupIPTables(ctx, ipt)
			logCleanup(ctx, logger, "iptables", removed, err)
		}
	case "iptables", "ipvs":
		// ipvs mode is iptables-based: it removes the nftables table.
		if nft != nil {
			removed, err := CleanupNFTables(ctx, nft)
			logCleanup(ctx, logger, "nftables", removed, err)
		}
	}
}

// IPVSAvailable reports whether the kernel offers IPVS, as kube-proxy's
// ipvs mode finds out: the generic netlink family IPVS.
func IPVSAvailable() error {
	return IPVSAvailableIn(func(name string) error {
		_, err := netlink.GenlFamilyGet(name)
		return err
	})()
}

// IPVSAvailableIn is IPVSAvailable over a look-up of a generic netlink
// family by name.
func IPVSAvailableIn(genlFamily func(name string) error) func() error {
	return func() error {
		if err := genlFamily("IPVS"); err != nil {
			return errIPVSUnsupported
		}
		return nil
	}
}

// errIPVSUnsupported is kube-proxy's reason when the kernel has no IPVS:
// its IPVS library opens a generic netlink socket without error even then,
// so kube-proxy adds a dummy virtual server, lists none back and says
// "ipvs not supported" (checked with github.com/moby/ipvs v1.1.0 on a
// kernel without CONFIG_IP_VS).
var errIPVSUnsupported = errors.New("ipvs not supported")
