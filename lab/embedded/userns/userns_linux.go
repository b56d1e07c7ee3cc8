package userns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Create makes a user namespace that maps r from id 0 (uids and gids
// alike, setgroups allowed) and pins it at pin, a file it creates; the
// namespace lives until Remove.
//
// The namespace is created by a process running as r's first host id, not
// by root, so that the lab's first id owns it: the kernel counts what the
// lab's processes create against per-user limits (user namespaces,
// inotify instances and watches, …) charged to their namespace's owner in
// the host's namespace, and with root as the owner every lab would share
// root's counts with every other lab and with the host's own daemons. Root
// writes the mappings, as newuidmap does for a user's own namespace.
func Create(pin string, r Range) error {
	if !r.Valid() {
		return errors.New("no id range to map")
	}
	// unshare(1) is single-threaded, as unshare(CLONE_NEWUSER) requires;
	// it runs as r.Base, so the namespace it makes is r.Base's.
	cmd := exec.Command("unshare", "--user", "--", "sh", "-c", "echo ready; read _")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: r.Base, Gid: r.Base, Groups: []uint32{}},
		Pdeathsig:  syscall.SIGKILL,
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("creating the lab's user namespace: %w", err)
	}
	defer func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		return fmt.Errorf("creating the lab's user namespace: unshare: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	for _, m := range []string{"uid_map", "gid_map"} {
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/%s", cmd.Process.Pid, m), []byte(fmt.Sprintf("0 %d %d\n", r.Base, r.Size)), 0); err != nil {
			return fmt.Errorf("mapping the lab's ids: %w", err)
		}
	}
	return pinNS(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid), pin)
}

// OwnerUID is the host uid that owns the user namespace pinned at ns.
func OwnerUID(ns string) (uint32, error) {
	f, err := os.Open(ns)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var uid uint32
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), nsGetOwnerUID, uintptr(unsafe.Pointer(&uid))); errno != 0 {
		return 0, fmt.Errorf("the owner of %s: %w", ns, errno)
	}
	return uid, nil
}

// NewChild makes a user namespace nested in the one pinned at parent,
// mapping r — ids of the parent namespace — from id 0, and pins it at pin.
// Only a process inside the parent may write the child's mappings, so a
// helper there writes them.
func NewChild(ctx context.Context, parent, pin string, r Range) error {
	if !r.Valid() {
		return errors.New("no id range to map")
	}
	pid, done, err := holder(ctx, parent, "--user")
	if err != nil {
		return fmt.Errorf("creating a user namespace in the lab's: %w", err)
	}
	defer done()
	for _, m := range []string{"uid_map", "gid_map"} {
		w := exec.CommandContext(ctx, "nsenter", "--user="+parent, "--", "sh", "-c", `printf '%s\n' "$1" > "$2"`, "sh", r.String(), fmt.Sprintf("/proc/%d/%s", pid, m))
		if out, err := w.CombinedOutput(); err != nil {
			return fmt.Errorf("writing the nested user namespace's %s: %w: %s", m, err, strings.TrimSpace(string(out)))
		}
	}
	return pinNS(fmt.Sprintf("/proc/%d/ns/user", pid), pin)
}

// NewNetns creates a network namespace owned by the user namespace pinned
// at userns and pins it at /run/netns/name, where "ip netns" finds it: root
// of that user namespace has every network capability in it.
func NewNetns(ctx context.Context, userns, name string) error {
	if name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("network namespace name %q is not valid", name)
	}
	pid, done, err := holder(ctx, userns, "--net")
	if err != nil {
		return fmt.Errorf("creating network namespace %s: %w", name, err)
	}
	defer done()
	if err := prepareNetnsDir(); err != nil {
		return err
	}
	return pinNS(fmt.Sprintf("/proc/%d/ns/net", pid), filepath.Join(NetnsDir, name))
}

// prepareNetnsDir makes NetnsDir what "ip netns add" makes it before it
// pins a namespace: a shared mount point of its own, so that every pin is
// made inside it. A pin made before ip made the directory a mount point
// would end up hidden under it, and "ip netns del" could not remove it.
func prepareNetnsDir() error {
	if err := os.MkdirAll(NetnsDir, 0o755); err != nil {
		return err
	}
	netnsDirMu.Lock()
	defer netnsDirMu.Unlock()
	made := false
	for {
		err := unix.Mount("", NetnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EINVAL) || made {
			return fmt.Errorf("making %s a shared mount: %w", NetnsDir, err)
		}
		// Not a mount point yet: bind it onto itself, as ip does.
		if err := unix.Mount(NetnsDir, NetnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("making %s a mount point: %w", NetnsDir, err)
		}
		made = true
	}
}

// netnsDirMu keeps this process's goroutines from binding NetnsDir onto
// itself twice (ip, in another process, checks the same way).
var netnsDirMu sync.Mutex

// NetnsDir is where "ip netns" keeps named network namespaces.
const NetnsDir = "/run/netns"

// holder starts a process in the user namespace pinned at userns that has
// unshared the namespace flag asks for (unshare(1)'s --net, --user) and
// waits; done ends it. Its namespaces are /proc/PID/ns/*.
func holder(ctx context.Context, userns, flag string) (pid int, done func(), err error) {
	cmd := exec.CommandContext(ctx, "nsenter", "--user="+userns, "--", "unshare", flag, "--", "sh", "-c", "echo ready; read _")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	done = func() {
		stdin.Close()
		cmd.Wait()
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		done()
		return 0, nil, fmt.Errorf("nsenter/unshare: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return cmd.Process.Pid, done, nil
}

// pinNS bind-mounts the namespace file ns on pin, which it creates.
func pinNS(ns, pin string) error {
	f, err := os.OpenFile(pin, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o400)
	if err != nil {
		return fmt.Errorf("pinning the namespace: %w", err)
	}
	f.Close()
	if err := unix.Mount(ns, pin, "", unix.MS_BIND, ""); err != nil {
		os.Remove(pin)
		return fmt.Errorf("pinning the namespace at %s: %w", pin, err)
	}
	return nil
}

// Remove unpins the namespace pinned at pin; a missing pin is fine.
func Remove(pin string) error {
	if err := unix.Unmount(pin, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unpinning %s: %w", pin, err)
	}
	if err := os.Remove(pin); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// nsGetUserns is ioctl NS_GET_USERNS: the user namespace owning a
// namespace.
const nsGetUserns = 0xb701

// nsGetOwnerUID is ioctl NS_GET_OWNER_UID: the uid that owns a user
// namespace.
const nsGetOwnerUID = 0xb704

// Owner returns the inode of the user namespace that owns the namespace
// in file ns (a pin or /proc/PID/ns/*).
func Owner(ns string) (uint64, error) {
	f, err := os.Open(ns)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fd, err := unix.IoctlRetInt(int(f.Fd()), nsGetUserns)
	if err != nil {
		return 0, fmt.Errorf("the owner of %s: %w", ns, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// Inode returns the inode of the namespace in file ns.
func Inode(ns string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(ns, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// IDMapMount mounts dir read-only at target (a directory it creates)
// with its ids shifted by the user namespace pinned at userns: a file
// owned by host id N appears owned by the host id that N inside the
// namespace maps to. Nothing is copied; the mount costs nothing per file.
func IDMapMount(userns, dir, target string) error {
	nsfd, err := unix.Open(userns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the lab's user namespace: %w", err)
	}
	defer unix.Close(nsfd)
	tree, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("cloning %s: %w", dir, err)
	}
	defer unix.Close(tree)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(nsfd)}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, attr); err != nil {
		return fmt.Errorf("idmapping %s: %w", dir, err)
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mounting %s at %s: %w", dir, target, err)
	}
	return nil
}

// IsMountPoint tells whether path is the root of a mount.
func IsMountPoint(path string) bool {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, 0, &st); err != nil {
		return false
	}
	return st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
}

// nsGetParent is ioctl NS_GET_PARENT: the parent of a user namespace.
const nsGetParent = 0xb702

// Members lists the processes in the user namespace pinned at pin or in
// one nested in it: every process of the lab, wherever it moved its other
// namespaces (a learner's "unshare -n" leaves the lab's network
// namespaces, never its user namespace).
func Members(pin string) []int {
	ino, err := Inode(pin)
	if err != nil {
		return nil
	}
	self, _ := Inode("/proc/self/ns/user")
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if within(filepath.Join("/proc", e.Name(), "ns", "user"), ino, self) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// within tells whether the user namespace in file ns is the one with inode
// ino or nested in it; self (the host's) ends the walk up.
func within(ns string, ino, self uint64) bool {
	f, err := os.Open(ns)
	if err != nil {
		return false
	}
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return false
	}
	for depth := 0; depth < 33; depth++ { // the kernel nests at most 32 deep
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || st.Ino == self {
			break
		}
		if st.Ino == ino {
			unix.Close(fd)
			return true
		}
		parent, err := unix.IoctlRetInt(fd, nsGetParent)
		unix.Close(fd)
		if err != nil {
			return false
		}
		fd = parent
	}
	unix.Close(fd)
	return false
}
