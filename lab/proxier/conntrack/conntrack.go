package conntrack

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// maxAttemptsEINTR is how often a dump interrupted by concurrent changes
// is retried (proxyutil.MaxAttemptsEINTR).
const maxAttemptsEINTR = 5

// Interface lists and deletes conntrack flows of one address family
// (unix.AF_INET or unix.AF_INET6).
type Interface interface {
	ListEntries(family uint8) ([]*netlink.ConntrackFlow, error)
	DeleteEntries(family uint8, flows []*netlink.ConntrackFlow) (int, error)
}

// NetlinkHandle is the part of *netlink.Handle the reconciler uses.
type NetlinkHandle interface {
	ConntrackTableList(netlink.ConntrackTableType, netlink.InetFamily) ([]*netlink.ConntrackFlow, error)
	ConntrackDeleteFilters(netlink.ConntrackTableType, netlink.InetFamily, ...netlink.CustomConntrackFilter) (uint, error)
}

// Netlink implements Interface over a netlink handle.
type Netlink struct {
	handle NetlinkHandle
}

// New returns the conntracker of the current network namespace.
func New() *Netlink { return NewWithHandle(&netlink.Handle{}) }

// NewWithHandle returns a conntracker using h (tests pass a fake).
func NewWithHandle(h NetlinkHandle) *Netlink { return &Netlink{handle: h} }

// retryEINTR runs fn until it does not fail with EINTR (a dump that was
// interrupted by concurrent changes), at most maxAttemptsEINTR times.
func retryEINTR(fn func() error) error {
	var err error
	for range maxAttemptsEINTR {
		if err = fn(); err == nil || !errors.Is(err, unix.EINTR) {
			return err
		}
	}
	return err
}

// ListEntries dumps the conntrack table of family.
func (n *Netlink) ListEntries(family uint8) ([]*netlink.ConntrackFlow, error) {
	var entries []*netlink.ConntrackFlow
	err := retryEINTR(func() error {
		var err error
		entries, err = n.handle.ConntrackTableList(table, netlink.InetFamily(family))
		return err
	})
	return entries, err
}

// DeleteEntries deletes exactly the given flows (matched on both tuples).
func (n *Netlink) DeleteEntries(family uint8, flows []*netlink.ConntrackFlow) (int, error) {
	if len(flows) == 0 {
		return 0, nil
	}
	filter := deleteFilter(flows)
	var total uint
	err := retryEINTR(func() error {
		count, err := n.handle.ConntrackDeleteFilters(table, netlink.InetFamily(family), filter)
		total += count
		return err
	})
	if err != nil {
		return int(total), fmt.Errorf("error deleting conntrack entries: %w", err)
	}
	return int(total), nil
}
