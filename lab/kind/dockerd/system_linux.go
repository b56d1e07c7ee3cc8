package dockerd

import "golang.org/x/sys/unix"

// unmountDetached detaches the mount at path (umount -l).
func unmountDetached(path string) error { return unix.Unmount(path, unix.MNT_DETACH) }

// ownEngine says why svclab cannot run an engine of its own here: nil,
// it can on Linux.
func ownEngine([]Engine) error { return nil }
