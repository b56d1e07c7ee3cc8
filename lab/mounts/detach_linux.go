package mounts

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrLink is returned by Detach for a mount point whose path holds a
// symlink: the path no longer leads to the mount (someone replaced a
// directory on it), and following it would unmount something else.
var ErrLink = errors.New("a symlink stands on the path to the mount point")

// Detach lazily unmounts (MNT_DETACH) the mount at the absolute path mp,
// with everything mounted below it. It resolves mp component by component
// from / and follows no symlink: a link on the way is ErrLink and nothing
// is unmounted. A path that is gone or no mount point is no error.
func Detach(mp string) error {
	if !filepath.IsAbs(mp) {
		return fmt.Errorf("mount point %q is not an absolute path", mp)
	}
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	rel := strings.TrimPrefix(filepath.Clean(mp), "/")
	if rel == "" {
		return errors.New("refusing to unmount /")
	}
	// Mounts stacked on one mount point come off one by one, until the
	// path stands on no mount's root.
	for range maxStacked {
		fd, err := unix.Openat2(root, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
		switch {
		case errors.Is(err, unix.ENOENT):
			return nil
		case errors.Is(err, unix.ELOOP):
			return fmt.Errorf("unmounting %s: %w", mp, ErrLink)
		case err != nil:
			return fmt.Errorf("opening mount point %s: %w", mp, err)
		}
		// The descriptor's magic link leads to the mount it stands on,
		// and to nothing else whatever happens to the path meanwhile.
		err = unix.Unmount("/proc/self/fd/"+strconv.Itoa(fd), unix.MNT_DETACH)
		unix.Close(fd)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("unmounting %s: %w", mp, err)
		}
	}
	return fmt.Errorf("unmounting %s: more than %d mounts are stacked on it", mp, maxStacked)
}

// maxStacked bounds the mounts Detach takes off one mount point.
const maxStacked = 64

// DetachMatching detaches every mount point match accepts, deepest
// first, and reports every one that could not be.
func DetachMatching(match func(string) bool) error {
	mps, err := List(match)
	if err != nil {
		return err
	}
	var errs []error
	for _, mp := range mps {
		if err := Detach(mp); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
