package dockerd

import "github.com/svclab/svclab/lab/mounts"

// unmountDetached detaches the mount at path (umount -l), following no
// symlink on the way.
func unmountDetached(path string) error { return mounts.Detach(path) }

// ownEngine says why svclab cannot run an engine of its own here: nil,
// it can on Linux.
func ownEngine([]Engine) error { return nil }
