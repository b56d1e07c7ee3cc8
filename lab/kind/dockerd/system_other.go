//go:build !linux

package dockerd

import (
	"errors"
	"fmt"
)

// This file lets svclab build on systems other than Linux (macOS, where
// Docker Desktop or another engine runs kind's nodes in a Linux VM).
// svclab's own engine is Debian's dockerd on the host, so it runs on Linux
// only; elsewhere Ensure uses the engine that answers, or says to start one.

// unmountDetached refuses: svclab's own engine, whose leftovers it
// unmounts, never runs here.
func unmountDetached(path string) error {
	return fmt.Errorf("unmounting %s: %w", path, errors.ErrUnsupported)
}

// ownEngine says why svclab cannot run an engine of its own here.
func ownEngine() error {
	return fmt.Errorf("%w (%s), and svclab runs a Docker engine of its own on Linux only: start Docker Desktop (or another engine), or set %s to one that runs", ErrDown, DefaultSocket, EnvHost)
}
