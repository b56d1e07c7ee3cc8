//go:build !linux

package dockerd

import (
	"errors"
	"fmt"
	"strings"
)

// This file lets svclab build on systems other than Linux (macOS, where
// Docker Desktop or another engine runs kind's nodes in a Linux VM).
// svclab's own engine is Debian's dockerd on the host, so it runs on Linux
// only; elsewhere Ensure uses the engine that answers, or says to start one.

// unmountBeneath refuses: svclab's own engine, whose leftovers it
// unmounts, never runs here.
func unmountBeneath(dir string) error {
	return fmt.Errorf("unmounting %s: %w", dir, errors.ErrUnsupported)
}

// ownEngine says why svclab cannot run an engine of its own here, naming
// the engines it looked for.
func ownEngine(tried []Engine) error {
	var where []string
	for _, e := range tried {
		where = append(where, e.Name+" ("+e.Host+")")
	}
	return fmt.Errorf("%w: svclab looked for %s; it runs a Docker engine of its own on Linux only: install and start Docker Desktop, colima (colima start) or OrbStack, or set %s to an engine that runs", ErrDown, strings.Join(where, ", "), EnvHost)
}
