//go:build !linux

package nfacct

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netns"
)

// This file lets svclab build on systems other than Linux (macOS, where
// only the kind backend runs): nfacct is a Linux netfilter subsystem, so
// there Netlink reports ErrNotSupported, as on a kernel without nfacct,
// and kube-proxy's iptables proxier leaves its counters out.

var errNoNetlink = fmt.Errorf("%w: nfacct needs Linux: %w", ErrNotSupported, errors.ErrUnsupported)

// Netlink is Interface on a netlink socket; there is none on this system.
type Netlink struct{}

// New reports ErrNotSupported: there is no netlink on this system.
func New() (*Netlink, error) { return nil, errNoNetlink }

// NewAt reports ErrNotSupported: there is no netlink on this system.
func NewAt(netns.NsHandle) (*Netlink, error) { return nil, errNoNetlink }

// Close does nothing.
func (n *Netlink) Close() {}

// Ensure is part of Interface.
func (n *Netlink) Ensure(string) error { return errNoNetlink }

// Get is part of Interface.
func (n *Netlink) Get(string) (*Counter, error) { return nil, errNoNetlink }
