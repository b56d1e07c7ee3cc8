//go:build !linux

package nodetty

import "errors"

// waitExited cannot wait without reaping here: the caller reaps first.
func waitExited(int) error { return errors.ErrUnsupported }

// hangUpSession has nothing to do here: the kind backend, the one svclab
// runs outside Linux, ends what remains in the node itself (its Hangup),
// and its session on this machine is the docker command alone, which the
// hangup ends.
func hangUpSession(int) {}
