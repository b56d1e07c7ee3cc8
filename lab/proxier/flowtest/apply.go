package flowtest

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/proxier/iptables"
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

// NFAcct counters kube-proxy's iptables proxier creates when the kernel
// supports nfacct, and then counts packets with.
var NFAcctCounters = []string{"ct_state_invalid_dropped_pkts", "localhost_nps_accepted_pkts"}

// EnsureNFAcct creates nfacct objects in ns (as kube-proxy's nfacct.Ensure
// does, over netlink), leaving existing ones alone. An error means the
// kernel does not support nfacct, which makes kube-proxy leave the nfacct
// matches out of its rules.
func EnsureNFAcct(ns Netns, names ...string) error {
	return ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		if err != nil {
			return fmt.Errorf("nfacct: netlink socket: %w", err)
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			return fmt.Errorf("nfacct: bind: %w", err)
		}
		for i, name := range names {
			if err := nfacctNew(fd, uint32(i+1), name); err != nil {
				return fmt.Errorf("nfacct: create %s: %w", name, err)
			}
		}
		return nil
	})
}

// nfacctNew sends NFNL_MSG_ACCT_NEW for name and waits for the ack.
func nfacctNew(fd int, seq uint32, name string) error {
	const (
		nfnlSubsysAcct = 7
		nfnlMsgAcctNew = 0
		nfacctName     = 1
	)
	attr := append([]byte(name), 0)
	attrLen := unix.SizeofNlAttr + len(attr)
	payload := make([]byte, 4+nlaAlign(attrLen)) // nfgenmsg, then the attribute
	payload[0] = unix.AF_UNSPEC
	binary.NativeEndian.PutUint16(payload[4:], uint16(attrLen))
	binary.NativeEndian.PutUint16(payload[6:], nfacctName)
	copy(payload[8:], attr)
	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(payload))
	binary.NativeEndian.PutUint32(msg[0:], uint32(unix.SizeofNlMsghdr+len(payload)))
	binary.NativeEndian.PutUint16(msg[4:], nfnlSubsysAcct<<8|nfnlMsgAcctNew)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_CREATE|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:], seq)
	msg = append(msg, payload...)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return err
	}
	if n < unix.SizeofNlMsghdr+4 || binary.NativeEndian.Uint16(buf[4:]) != unix.NLMSG_ERROR {
		return fmt.Errorf("unexpected netlink reply (%d bytes)", n)
	}
	switch errno := -int32(binary.NativeEndian.Uint32(buf[unix.SizeofNlMsghdr:])); errno {
	case 0:
		return nil
	case int32(unix.EBUSY): // exists already
		return nil
	default:
		return unix.Errno(errno)
	}
}

func nlaAlign(n int) int { return (n + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1) }
