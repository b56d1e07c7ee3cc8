//go:build !linux

package userns

import (
	"context"
	"errors"
)

// This file lets svclab build on systems other than Linux (macOS, where
// only the kind backend runs): user namespaces, nsfs pins and idmapped
// mounts are Linux's, so everything here reports errNoUserns. The id
// ranges (range.go) work everywhere.

var errNoUserns = errors.Join(errors.New("user namespaces need Linux"), errors.ErrUnsupported)

// Create reports errNoUserns.
func Create(pin string, r Range) error { return errNoUserns }

// NewChild reports errNoUserns.
func NewChild(ctx context.Context, parent, pin string, r Range) error { return errNoUserns }

// NewNetns reports errNoUserns.
func NewNetns(ctx context.Context, userns, name string) error { return errNoUserns }

// Remove reports errNoUserns.
func Remove(pin string) error { return errNoUserns }

// Owner reports errNoUserns.
func Owner(ns string) (uint64, error) { return 0, errNoUserns }

// Inode reports errNoUserns.
func Inode(ns string) (uint64, error) { return 0, errNoUserns }

// IDMapMount reports errNoUserns.
func IDMapMount(userns, dir, target string) error { return errNoUserns }

// IsMountPoint is false: there are no pins here.
func IsMountPoint(path string) bool { return false }

// Members is empty: no process is in a lab's user namespace here.
func Members(pin string) []int { return nil }
