// Package mounts is svclab's one way of finding and removing the host's
// mounts of a lab: List reads /proc/self/mountinfo (its escapes undone),
// Detach unmounts one mount point without following a symlink on the
// way, and DetachMatching does both.
//
// Mount points under a lab's directories sit in trees the lab writes to
// (emptyDirs, root filesystems, node filesystems). Host root unmounting by
// path would follow whatever symlink a Pod planted in the path, and detach
// a mount of the host's or another lab's; a mountinfo line read without its
// escapes names a path a Pod chose ("a\040b" is "a b"). Detach resolves
// the path from / with openat2, refusing every symlink, and unmounts the
// mount the descriptor stands on.
package mounts
