package dockerd

import "github.com/svclab/svclab/lab/mounts"

// unmountBeneath detaches every mount at or below dir (umount -l),
// following no symlink on the way.
func unmountBeneath(dir string) error { return mounts.DetachMatching(mounts.Beneath(dir)) }

// ownEngine says why svclab cannot run an engine of its own here: nil,
// it can on Linux.
func ownEngine([]Engine) error { return nil }
