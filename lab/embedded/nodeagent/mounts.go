//go:build linux

package nodeagent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Mounts into a container are made by the agent, on the host, before runc
// starts the container, from files it opened itself with every symlink and
// ".." confined to the tree they belong to (openat2 RESOLVE_IN_ROOT for a
// node's root filesystem and a container's, RESOLVE_BENEATH for a subPath
// inside its volume). No path a container or a Pod could have planted a
// link in is ever resolved on the host, by the agent or by runc: the
// CVE-2017-1002101 pattern (a subPath or hostPath that a symlink points at
// the host) has nothing to follow. And because the mounts exist before
// runc copies the mount table into the lab's user namespace, the kernel
// locks them there: a read-only volume stays read-only even for root in a
// privileged container (a remount fails with EPERM), and nothing under a
// mount can be uncovered.

// resolveFlags keep a lookup inside its root and off /proc's magic links;
// noLinks, for the agent's own trees (podfs.go), follows no symlink at all.
const (
	inRoot  = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS
	beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS
	noLinks = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS
)

// openDir opens a directory of the agent's own (a pod's or a node's) as an
// O_PATH descriptor, following no symlink in its last component.
func openDir(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return fd, nil
}

// openIn opens rel inside the tree of dirfd (resolve says how links and
// ".." are confined) as an O_PATH descriptor.
func openIn(dirfd int, rel string, resolve uint64) (int, error) {
	rel = cleanRel(rel)
	fd, err := unix.Openat2(dirfd, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: resolve})
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	return fd, nil
}

// cleanRel makes p relative ("." for the root itself).
func cleanRel(p string) string {
	p = strings.TrimPrefix(filepath.Clean("/"+p), "/")
	if p == "" {
		return "."
	}
	return p
}

// mkdirAllIn makes the directories of rel inside the tree of dirfd
// (confined as resolve says), each new one with mode and owned by uid:gid,
// and returns the last one, open as O_PATH.
func mkdirAllIn(dirfd int, rel string, resolve uint64, mode uint32, uid, gid int) (int, error) {
	rel = cleanRel(rel)
	if rel == "." {
		return openIn(dirfd, ".", resolve)
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		prefix := strings.Join(parts[:i+1], "/")
		fd, err := openIn(dirfd, prefix, resolve)
		if err == nil {
			if i == len(parts)-1 {
				return fd, nil
			}
			unix.Close(fd)
			continue
		}
		if !errors.Is(err, unix.ENOENT) {
			return -1, err
		}
		parent, err := openIn(dirfd, strings.Join(parts[:i], "/"), resolve)
		if err != nil {
			return -1, err
		}
		err = mkdirOwned(parent, parts[i], mode, uid, gid)
		unix.Close(parent)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, &os.PathError{Op: "mkdir", Path: prefix, Err: err}
		}
	}
	return openIn(dirfd, rel, resolve)
}

// mkdirOwned makes directory name in parent (an O_PATH descriptor) with
// mode, owned by uid:gid. Ownership and mode are set on the new directory
// through a descriptor, never by name: a link swapped in meanwhile is not
// followed.
func mkdirOwned(parent int, name string, mode uint32, uid, gid int) error {
	if err := unix.Mkdirat(parent, name, mode); err != nil {
		return err
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Fchown(fd, uid, gid); err != nil {
		return err
	}
	return unix.Fchmod(fd, mode)
}

// createFileIn makes an empty file rel inside the tree of dirfd (confined
// as resolve says; parents are made as by mkdirAllIn), owned by uid:gid,
// unless something exists there already, and returns it open as O_PATH.
func createFileIn(dirfd int, rel string, resolve uint64, mode uint32, uid, gid int) (int, error) {
	rel = cleanRel(rel)
	if fd, err := openIn(dirfd, rel, resolve); err == nil {
		return fd, nil
	}
	parent, err := mkdirAllIn(dirfd, filepath.Dir(rel), resolve, 0o755, uid, gid)
	if err != nil {
		return -1, err
	}
	defer unix.Close(parent)
	// O_PATH descriptors cannot create; reopen the parent for it.
	pfd, err := unix.Openat(parent, ".", unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	name := filepath.Base(rel)
	f, err := unix.Openat(pfd, name, unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_WRONLY|unix.O_CLOEXEC, mode)
	if err == nil {
		unix.Fchown(f, uid, gid)
		unix.Fchmod(f, mode)
		unix.Close(f)
	} else if !errors.Is(err, unix.EEXIST) {
		return -1, &os.PathError{Op: "create", Path: rel, Err: err}
	}
	return openIn(dirfd, rel, resolve)
}

// ownDir makes directory name in parent (an O_PATH descriptor), or takes
// the one there, and gives it mode and uid:gid, through a descriptor opened
// without following a link: an emptyDir volume, a container's writable
// layer, which the lab's ids own.
func ownDir(parent int, name string, mode uint32, uid, gid int) error {
	if err := unix.Mkdirat(parent, name, mode); err != nil && !errors.Is(err, unix.EEXIST) {
		return &os.PathError{Op: "mkdir", Path: name, Err: err}
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: name, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Fchown(fd, uid, gid); err != nil {
		return &os.PathError{Op: "chown", Path: name, Err: err}
	}
	return unix.Fchmod(fd, mode)
}

// openOwnFile opens rel inside the tree of dirfd (confined as resolve
// says) for writing with flags, creating it with mode, and checks that it
// is a file of its own: a regular file with no other link, so that what is
// written to it, and its owner and mode, change no file elsewhere (a hard
// link to one, a device, a FIFO that would block the agent).
func openOwnFile(dirfd int, rel string, resolve uint64, flags int, mode uint32) (*os.File, error) {
	fd, err := unix.Openat2(dirfd, rel, &unix.OpenHow{
		Flags:   uint64(flags | unix.O_WRONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC),
		Mode:    uint64(mode),
		Resolve: resolve,
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: rel, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 {
		unix.Close(fd)
		return nil, &os.PathError{Op: "open", Path: rel, Err: errors.New("not a regular file of its own")}
	}
	// O_NONBLOCK only kept the open from waiting on a FIFO.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// openReadIn opens the regular file rel inside the tree of dirfd
// (confined as resolve says) for reading.
func openReadIn(dirfd int, rel string, resolve uint64) (*os.File, error) {
	fd, err := unix.Openat2(dirfd, cleanRel(rel), &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC, Resolve: resolve})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: rel, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, &os.PathError{Op: "open", Path: rel, Err: errors.New("not a regular file")}
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// writeFileIn makes rel inside the tree of dirfd (confined as resolve
// says) hold data, with mode and owned by uid:gid (-1 keeps the agent's):
// written in place, so that a container that has the file bind-mounted
// sees the new content.
func writeFileIn(dirfd int, rel string, resolve uint64, data []byte, mode uint32, uid, gid int) error {
	f, err := openOwnFile(dirfd, rel, resolve, unix.O_CREAT, mode)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(os.FileMode(mode)); err != nil { // not subject to the umask
		return err
	}
	if err := f.Chown(uid, gid); err != nil {
		return err
	}
	return f.Close()
}

// replaceFileIn makes rel inside the tree of dirfd (confined as resolve
// says; its directory must exist) hold data, with mode, replacing it in one
// rename: a reader sees the old content or the new, never a part.
func replaceFileIn(dirfd int, rel string, resolve uint64, data []byte, mode uint32) error {
	rel = cleanRel(rel)
	parent, err := openIn(dirfd, filepath.Dir(rel), resolve)
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	name := filepath.Base(rel)
	tmp := name + ".tmp"
	if err := unix.Unlinkat(parent, tmp, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "remove", Path: tmp, Err: err}
	}
	f, err := openOwnFile(parent, tmp, noLinks, unix.O_CREAT|unix.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(os.FileMode(mode))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(parent, tmp, parent, name)
	}
	if err != nil {
		unix.Unlinkat(parent, tmp, 0)
		return &os.PathError{Op: "write", Path: rel, Err: err}
	}
	return nil
}

// readFileIn reads rel inside the tree of dirfd (confined as resolve
// says), at most max bytes of it.
func readFileIn(dirfd int, rel string, resolve uint64, max int64) ([]byte, error) {
	f, err := openReadIn(dirfd, rel, resolve)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = &os.PathError{Op: "read", Path: rel, Err: fmt.Errorf("larger than %d bytes", max)}
	}
	return b, err
}

// readDirIn lists the directory rel inside the tree of dirfd (confined as
// resolve says).
func readDirIn(dirfd int, rel string, resolve uint64) ([]os.DirEntry, error) {
	fd, err := unix.Openat2(dirfd, cleanRel(rel), &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolve})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	return f.ReadDir(-1)
}

// removeAllIn removes name, a file or a whole tree, from the directory
// parent (a descriptor), as os.RemoveAll does but from a descriptor: every
// step is taken relative to the directory above it and no link is
// followed, so nothing outside parent is removed whatever the tree holds.
func removeAllIn(parent int, name string) error {
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return &os.PathError{Op: "remove", Path: name, Err: unix.EINVAL}
	}
	err := unix.Unlinkat(parent, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return &os.PathError{Op: "remove", Path: name, Err: err}
	}
	var errs []error
	for {
		fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				return nil
			}
			return &os.PathError{Op: "open", Path: name, Err: err}
		}
		dir := os.NewFile(uintptr(fd), name)
		const batch = 1024
		names, _ := dir.Readdirnames(batch)
		failed := 0
		for _, n := range names {
			if err := removeAllIn(fd, n); err != nil {
				errs = append(errs, err)
				failed++
			}
		}
		// Removing entries may reorder the directory: it is read
		// afresh until a read finds fewer than a batch, or nothing
		// more can go.
		dir.Close()
		if len(names) < batch || failed == len(names) {
			break
		}
	}
	if err := unix.Unlinkat(parent, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, &os.PathError{Op: "remove", Path: name, Err: err})
	}
	return errors.Join(errs...)
}

// isDirFd tells whether the O_PATH descriptor fd is a directory.
func isDirFd(fd int) (bool, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, err
	}
	return st.Mode&unix.S_IFMT == unix.S_IFDIR, nil
}

// fdKind names the file type of fd, for error messages and hostPath types.
func fdKind(fd int) (uint32, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	return st.Mode & unix.S_IFMT, nil
}

// bindFd mounts the file or tree of src (an O_PATH descriptor) on dst (an
// O_PATH descriptor of a file or directory of the same kind), read-only
// when ro (recursively), never with devices.
func bindFd(src, dst int, ro bool) error {
	tree, err := unix.OpenTree(src, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("cloning the mount's source: %w", err)
	}
	defer unix.Close(tree)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NODEV}
	if ro {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("setting the mount's flags: %w", err)
	}
	if err := unix.MoveMount(tree, "", dst, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("attaching the mount: %w", err)
	}
	return nil
}

// mountTarget makes the mount point dst (like src: a directory or a file)
// inside the container's root filesystem rootfd, owned by root in the lab,
// and returns it open as O_PATH. A symlink on the way is followed inside
// the root filesystem, as runc does for mount destinations.
func mountTarget(rootfd int, dst string, dir bool, uid int) (int, error) {
	if dir {
		return mkdirAllIn(rootfd, dst, inRoot, 0o755, uid, uid)
	}
	return createFileIn(rootfd, dst, inRoot, 0o644, uid, uid)
}
