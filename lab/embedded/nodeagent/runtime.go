//go:build linux

package nodeagent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/embedded/cgroups"
	"github.com/svclab/svclab/lab/mounts"
)

// Image is a root filesystem a container runs from.
type Image struct {
	// Name is the local image name the reference resolved to.
	Name string
	// Layers are read-only directories, lowest first, stacked with
	// overlayfs under the container's own writable layer.
	Layers     []string
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	// StopSignal stops the image's main process gracefully (the image's
	// STOPSIGNAL: nginx's is SIGQUIT); empty means SIGTERM.
	StopSignal string
}

// Images resolves a pod's image reference to a local image.
type Images interface {
	Resolve(ref string) (Image, error)
}

// ErrImageNotFound is wrapped by Images.Resolve for unknown references.
var ErrImageNotFound = errors.New("image not found")

// runc runs containers with the runc binary, one state root per node.
type runc struct {
	root   string // runc --root
	marker string // KEY=VALUE env marking every process
	// exits is where the supervisor records the exits of containers it
	// reaped for a dead agent (see ReapOrphans).
	exits string
	// cgroupParent is the cgroup under which each container gets its
	// own (runc's default, a cgroup per container at the root of each
	// hierarchy, when empty).
	cgroupParent string
	// iso is the lab's user namespace every container joins, and node
	// the node whose containers these are.
	iso  Isolation
	node string
}

// Mount is a bind mount into a container: Path inside the tree Root, with
// every link and ".." confined to Root (the node's root filesystem for a
// hostPath volume, the volume's own directory otherwise), then SubPath
// beneath that, which may not leave it (as the kubelet's subPath), mounted
// at Destination.
type Mount struct {
	Root, Path, SubPath string
	Destination         string
	ReadOnly            bool
	// CreateSubPath makes a missing SubPath directory (the kubelet does
	// for writable volumes).
	CreateSubPath bool
}

// containerSpec is what the runtime needs to create a container.
type containerSpec struct {
	ID       string
	Bundle   string
	Image    Image
	Args     []string
	Env      []string
	Cwd      string
	Hostname string
	// Netns is the path of the network namespace to join; PidNS and
	// IpcNS, when set, those of the PID and IPC namespaces (a hostPID or
	// hostIPC Pod's are its node's).
	Netns        string
	PidNS, IpcNS string
	Mounts       []Mount
	TTY          bool
	Stdin        bool
	Privileged   bool
	CapAdd       []string
	CapDrop      []string
	RunAsUser    *int64
	RunAsGroup   *int64
	ReadOnlyRoot bool
	// NoNewPrivs sets no_new_privs (allowPrivilegeEscalation: false);
	// Seccomp confines the container with the runtime's default profile
	// (seccompProfile RuntimeDefault: Docker's and containerd's).
	NoNewPrivs bool
	Seccomp    bool
	// CgroupsPath is the container's cgroup (runc's default when empty).
	CgroupsPath string
	// Isolation, when set, is the user namespace to join instead of the
	// lab's (a Pod's own).
	Isolation Isolation
}

// defaultCaps are the capabilities containers get by default (those of
// containerd and Docker).
var defaultCaps = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID",
	"CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"}

// capNames maps capability numbers to names, for the host's bounding set.
var capNames = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
	"CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW",
	"CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT",
	"CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD",
	"CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
	"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE"}

// boundingCaps reads the capabilities this process may hand out; a
// privileged container gets exactly these (requesting more fails).
func boundingCaps() []string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return defaultCaps
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				break
			}
			var caps []string
			for i, name := range capNames {
				if mask&(1<<uint(i)) != 0 {
					caps = append(caps, name)
				}
			}
			return caps
		}
	}
	return defaultCaps
}

func normaliseCap(c string) string {
	c = strings.ToUpper(c)
	if !strings.HasPrefix(c, "CAP_") {
		c = "CAP_" + c
	}
	return c
}

// runtimeSpec renders the OCI runtime spec of a container that joins the
// lab's user namespace, with its root filesystem mounted at rootfs; staged are the bind mounts runc makes itself
// (under the file systems it mounts: /dev, /proc, /sys), from sources the
// agent mounted for it.
func runtimeSpec(c containerSpec, bounding []string, iso Isolation, rootfs string, staged []specs.Mount) *specs.Spec {
	caps := defaultCaps
	if c.Privileged {
		caps = bounding
	} else {
		allowed := map[string]bool{}
		for _, b := range bounding {
			allowed[b] = true
		}
		set := map[string]bool{}
		for _, d := range defaultCaps {
			set[d] = true
		}
		// As the kubelet: drops apply to the defaults, then adds.
		for _, d := range c.CapDrop {
			if normaliseCap(d) == "CAP_ALL" {
				set = map[string]bool{}
				continue
			}
			delete(set, normaliseCap(d))
		}
		for _, a := range c.CapAdd {
			if normaliseCap(a) == "CAP_ALL" {
				for _, b := range bounding {
					set[b] = true
				}
				continue
			}
			set[normaliseCap(a)] = true
		}
		caps = nil
		for _, name := range capNames {
			if set[name] && allowed[name] {
				caps = append(caps, name)
			}
		}
	}
	user := specs.User{}
	if c.RunAsUser != nil {
		user.UID = uint32(*c.RunAsUser)
	}
	if c.RunAsGroup != nil {
		user.GID = uint32(*c.RunAsGroup)
	}
	cwd := c.Cwd
	if cwd == "" {
		cwd = "/"
	}
	spec := &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			Terminal: c.TTY,
			User:     user,
			Args:     c.Args,
			Env:      c.Env,
			Cwd:      cwd,
			Capabilities: &specs.LinuxCapabilities{
				Bounding: caps, Effective: caps, Permitted: caps,
			},
			NoNewPrivileges: c.NoNewPrivs,
		},
		Root:     &specs.Root{Path: rootfs, Readonly: c.ReadOnlyRoot},
		Hostname: c.Hostname,
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5", "max=" + strconv.Itoa(maxPTYs)}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		},
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.UserNamespace, Path: iso.Userns},
				{Type: specs.PIDNamespace, Path: c.PidNS}, {Type: specs.IPCNamespace, Path: c.IpcNS}, {Type: specs.MountNamespace},
				{Type: specs.NetworkNamespace, Path: c.Netns},
			},
			// runc needs the mappings of the namespace it joins.
			UIDMappings: []specs.LinuxIDMapping{{ContainerID: 0, HostID: iso.IDs.Base, Size: iso.IDs.Size}},
			GIDMappings: []specs.LinuxIDMapping{{ContainerID: 0, HostID: iso.IDs.Base, Size: iso.IDs.Size}},
			Resources:   &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}},
			// The files of the host's kernel a container has no use
			// for, masked in every container, privileged ones too: in
			// the lab's user namespace the kernel refuses what matters
			// (writing kernel.* sysctls, reading /proc/kcore), and the
			// masks leave nothing to read either.
			MaskedPaths: []string{"/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
				"/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/proc/sysrq-trigger", "/sys/firmware"},
		},
	}
	spec.Linux.CgroupsPath = c.CgroupsPath
	if c.Hostname != "" {
		spec.Linux.Namespaces = append(spec.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UTSNamespace})
	}
	if !c.Privileged {
		spec.Linux.ReadonlyPaths = []string{"/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys"}
	} else {
		// A privileged container may change its network namespace's
		// sysctls and the like, as kube-proxy does: root over its node,
		// which the lab's user namespace keeps it to.
		for i := range spec.Mounts {
			if spec.Mounts[i].Destination == "/sys" {
				spec.Mounts[i].Options = []string{"nosuid", "noexec", "nodev", "rw"}
			}
		}
	}
	spec.Mounts = append(spec.Mounts, staged...)
	return spec
}

// withSeccomp gives spec the runtime's default seccomp profile (Docker's,
// from moby/profiles, for the container's capabilities and the host's
// architecture), when c asks for it.
func withSeccomp(spec *specs.Spec, c containerSpec) error {
	if !c.Seccomp {
		return nil
	}
	p, err := seccomp.GetDefaultProfile(spec)
	if err != nil {
		return fmt.Errorf("the default seccomp profile: %w", err)
	}
	spec.Linux.Seccomp = p
	return nil
}

// prepare writes the bundle (config.json, the root filesystem's own
// layer) and mounts the container's root filesystem: the image's layers,
// idmapped into the lab, under the bundle's writable layer, with /run and
// every mount of the container in it (see mounts.go).
func (r *runc) prepare(c containerSpec) (err error) {
	iso := r.iso
	if c.Isolation.Userns != "" {
		iso = c.Isolation
	}
	if err := iso.Validate(); err != nil {
		return err
	}
	if err := validContainerID(c.ID); err != nil {
		return err
	}
	if r.cgroupParent != "" {
		c.CgroupsPath = "/" + filepath.Join(r.cgroupParent, c.ID)
		// The container's sockets count against the lab.
		if err := cgroups.CountSockets(c.CgroupsPath); err != nil {
			return err
		}
	}
	if len(c.Image.Layers) == 0 {
		return fmt.Errorf("image %s has no layers", c.Image.Name)
	}
	uid := iso.RootUID()
	bundle, err := makeBundle(c.Bundle, uid)
	if err != nil {
		return err
	}
	defer unix.Close(bundle)
	upper, work := filepath.Join(c.Bundle, "upper"), filepath.Join(c.Bundle, "work")
	lower := make([]string, len(c.Image.Layers))
	for i, l := range c.Image.Layers { // overlayfs wants the top layer first
		mapped, err := iso.Layer(l)
		if err != nil {
			return err
		}
		lower[len(lower)-1-i] = mapped
	}
	// What an earlier, interrupted preparation of this container left.
	if err := r.unmountRootfs(c.ID); err != nil {
		return err
	}
	rootfs := r.iso.Rootfs(r.node, c.ID)
	if err := os.MkdirAll(rootfs, 0o711); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			r.unmountRootfs(c.ID)
		}
	}()
	// overlayfs reads its options as a list: a path that holds one of
	// its separators would be taken for more options.
	for _, p := range append([]string{upper, work}, lower...) {
		if strings.ContainsAny(p, ",:\\") {
			return fmt.Errorf("the path %q cannot be given to overlayfs", p)
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", strings.Join(lower, ":"), upper, work)
	if err := unix.Mount("overlay", rootfs, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mounting the image's layers: %w", err)
	}
	staged, err := r.mountAll(c, rootfs, uid)
	if err != nil {
		return err
	}
	spec := runtimeSpec(c, boundingCaps(), iso, rootfs, staged)
	if err := withSeccomp(spec, c); err != nil {
		return err
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	return writeFileIn(bundle, "config.json", noLinks, b, 0o644, -1, -1)
}

// makeBundle makes the bundle directory dir with its writable layer
// (upper, the container's root directory: root's in the lab, uid) and
// overlayfs's work directory, and returns it open (O_PATH). What goes
// into the bundle is made from this descriptor, through no link: its
// writable layer is the lab's.
func makeBundle(dir string, uid int) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return -1, err
	}
	bundle, err := openDir(dir)
	if err != nil {
		return -1, err
	}
	if err := ownDir(bundle, "upper", 0o755, uid, uid); err != nil {
		unix.Close(bundle)
		return -1, err
	}
	if err := ownDir(bundle, "work", 0o755, -1, -1); err != nil {
		unix.Close(bundle)
		return -1, err
	}
	return bundle, nil
}

// mountAll mounts /run and the container's mounts into rootfs, parents
// before children, and returns those runc has to make (see staging); uid
// is the host id of root in the container.
func (r *runc) mountAll(c containerSpec, rootfs string, uid int) ([]specs.Mount, error) {
	rootfd, err := openDir(rootfs)
	if err != nil {
		return nil, err
	}
	defer unix.Close(rootfd)
	// /run is a tmpfs of the container's own, as /tmp on a node.
	runfd, err := mkdirAllIn(rootfd, "run", inRoot, 0o755, uid, uid)
	if err != nil {
		return nil, fmt.Errorf("making /run: %w", err)
	}
	err = unix.Mount("tmpfs", fmt.Sprintf("/proc/self/fd/%d", runfd), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
		fmt.Sprintf("mode=755,size=65536k,uid=%d,gid=%d", uid, uid))
	unix.Close(runfd)
	if err != nil {
		return nil, fmt.Errorf("mounting /run: %w", err)
	}
	mounts := append([]Mount(nil), c.Mounts...)
	sort.SliceStable(mounts, func(i, j int) bool { return depth(mounts[i].Destination) < depth(mounts[j].Destination) })
	var staged []specs.Mount
	for i, m := range mounts {
		src, err := m.open(uid)
		if err != nil {
			return nil, fmt.Errorf("volume mount at %s: %w", m.Destination, err)
		}
		dir, err := isDirFd(src)
		if err != nil {
			unix.Close(src)
			return nil, err
		}
		if underRuncMounts(m.Destination) {
			// runc mounts /dev, /proc and /sys over whatever is there:
			// the mount waits at a staging point for runc to bind.
			stage := filepath.Join(r.iso.staging(r.node, c.ID), strconv.Itoa(i))
			err = r.stage(src, stage, dir, m.ReadOnly)
			unix.Close(src)
			if err != nil {
				return nil, fmt.Errorf("volume mount at %s: %w", m.Destination, err)
			}
			opts := []string{"rbind", "rprivate"}
			if m.ReadOnly {
				opts = append(opts, "ro")
			}
			staged = append(staged, specs.Mount{Destination: m.Destination, Type: "bind", Source: stage, Options: opts})
			continue
		}
		dst, err := mountTarget(rootfd, m.Destination, dir, uid)
		if err == nil {
			err = bindFd(src, dst, m.ReadOnly)
			unix.Close(dst)
		}
		unix.Close(src)
		if err != nil {
			return nil, fmt.Errorf("volume mount at %s: %w", m.Destination, err)
		}
	}
	return staged, nil
}

// stage mounts src at path (made like src: a file or a directory).
func (r *runc) stage(src int, path string, dir bool, ro bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o711); err != nil {
		return err
	}
	if dir {
		if err := os.Mkdir(path, 0o755); err != nil {
			return err
		}
	} else if f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err != nil {
		return err
	} else {
		f.Close()
	}
	dst, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dst)
	return bindFd(src, dst, ro)
}

// underRuncMounts tells whether dst lies on a file system runc mounts.
func underRuncMounts(dst string) bool {
	dst = filepath.Clean("/" + dst)
	for _, top := range []string{"/dev", "/proc", "/sys"} {
		if dst == top || strings.HasPrefix(dst, top+"/") {
			return true
		}
	}
	return false
}

func depth(p string) int { return strings.Count(filepath.Clean("/"+p), "/") }

// open opens the mount's source (see Mount), as O_PATH; uid owns a subPath
// directory it makes.
func (m Mount) open(uid int) (int, error) {
	root, err := openDir(m.Root)
	if err != nil {
		return -1, err
	}
	defer unix.Close(root)
	fd, err := openIn(root, m.Path, inRoot)
	if err != nil {
		return -1, err
	}
	if m.SubPath == "" {
		return fd, nil
	}
	defer unix.Close(fd)
	if m.CreateSubPath {
		return mkdirAllIn(fd, m.SubPath, beneath, 0o755, uid, uid)
	}
	return openIn(fd, m.SubPath, beneath)
}

// unmountRootfs detaches container id's root filesystem and staged mounts
// and removes their mount points.
func (r *runc) unmountRootfs(id string) error {
	// id names directories of the lab's runtime directory, which are
	// removed.
	if err := validContainerID(id); err != nil {
		return err
	}
	for _, dir := range []string{r.iso.staging(r.node, id), r.iso.Rootfs(r.node, id)} {
		if err := mounts.DetachMatching(mounts.Beneath(dir)); err != nil {
			return err
		}
		os.RemoveAll(dir)
	}
	return nil
}

func (r *runc) cmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "runc", append([]string{"--root", r.root}, args...)...)
	cmd.Env = append(os.Environ(), r.marker)
	return cmd
}

// run starts the container and returns once it runs; wait reports its
// exit. Output goes to log in the CRI log format.
func (r *runc) run(c containerSpec, log *containerLog) (*runningContainer, error) {
	if !c.TTY && !c.Stdin {
		return r.startDetached(c, log)
	}
	// A terminal or stdin (kubectl run -it, attach) is held by a runc
	// run in the foreground: a restarted agent does not adopt such a
	// container but runs it again.
	if err := r.prepare(c); err != nil {
		return nil, err
	}
	r.delete(context.Background(), c.ID) // a leftover of a crashed agent
	cmd := r.cmd(context.Background(), "run", "--bundle", c.Bundle, c.ID)
	rc := &runningContainer{id: c.ID, done: make(chan struct{}), detached: make(chan struct{})}
	var streams []func()
	if c.TTY {
		// runc in the foreground connects the container's terminal to
		// its own, which must be a terminal: ours, whose other end
		// carries kubectl attach's input, output and resizes. A new
		// session, so the agent's restarts do not reach it.
		console, err := pty.StartWithAttrs(cmd, &pty.Winsize{Rows: 24, Cols: 80}, &syscall.SysProcAttr{Setsid: true, Setctty: true})
		if err != nil {
			return nil, fmt.Errorf("starting runc on a terminal: %w", err)
		}
		rc.console, rc.stdin = console, console
		streams = append(streams, func() { log.copy("stdout", console) })
	} else {
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			return nil, err
		}
		if c.Stdin {
			// Held open for kubectl attach -i until the container ends.
			in, err := cmd.StdinPipe()
			if err != nil {
				return nil, err
			}
			rc.stdin = in
		}
		// The agent may restart; runc and the container must not die
		// with it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting runc: %w", err)
		}
		streams = append(streams, func() { log.copy("stdout", stdout) }, func() { log.copy("stderr", stderr) })
	}
	rc.started = time.Now()
	var wg sync.WaitGroup
	for _, f := range streams {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	go func() {
		wg.Wait()
		err := cmd.Wait()
		if rc.console != nil {
			rc.console.Close()
		}
		rc.exitCode = exitCode(err)
		rc.finished = time.Now()
		if rc.exitCode < 0 {
			rc.err = err
		}
		r.delete(context.Background(), c.ID)
		close(rc.done)
	}()
	return rc, nil
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

// kill signals the container's init process.
func (r *runc) kill(ctx context.Context, id string, sig syscall.Signal) error {
	out, err := r.cmd(ctx, "kill", id, strconv.Itoa(int(sig))).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "not exist") && !strings.Contains(string(out), "not running") {
		return fmt.Errorf("runc kill %s: %w: %s", id, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (r *runc) delete(ctx context.Context, id string) {
	r.cmd(ctx, "delete", "--force", id).Run()
}

// exec runs a command in a running container.
func (r *runc) exec(ctx context.Context, id string, argv []string, tty bool, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	args := []string{"exec"}
	if tty {
		args = append(args, "--tty")
	}
	args = append(append(args, id), argv...)
	cmd := r.cmd(ctx, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	err := cmd.Run()
	if code := exitCode(err); code >= 0 {
		return code, nil
	}
	return -1, err
}

// runningContainer is one run of a container.
type runningContainer struct {
	id string
	// pid and pidStart identify a detached container's process (0 for
	// one that runs under runc run).
	pid      int
	pidStart uint64
	done     chan struct{}
	started  time.Time
	finished time.Time
	exitCode int
	err      error
	// detached is closed when the agent stops following the container
	// (it stops, and leaves the container running).
	detached   chan struct{}
	detachOnce sync.Once
	// stdin is the container's input (a terminal's or a pipe), for
	// kubectl attach; nil when the container has no stdin.
	stdin io.Writer
	// console is the terminal of a tty container, for resizes.
	console *os.File
}

// containerLog writes a container's output in the CRI log format
// ("<RFC3339Nano> <stream> F <line>"), which kubectl logs reads back. As
// the kubelet's containerLogMaxSize and containerLogMaxFiles, the file is
// rotated when it passes maxBytes (path.1 the newest of the rotated ones),
// and at most maxFiles files are kept: a container that prints without
// end fills neither the disk nor the agent's memory.
type containerLog struct {
	mu sync.Mutex
	// dir is the log's directory (an O_PATH descriptor), name the log's
	// file name in it: the log and its rotated files are reached from
	// the directory, through no link.
	dir      int
	name     string
	f        *os.File
	size     int64
	maxBytes int64
	maxFiles int
}

// logLimits is the configured limits, or the defaults.
func (c Config) logLimits() LogLimits {
	l := c.Logs
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultLogLimits.MaxBytes
	}
	if l.MaxFiles < 1 {
		l.MaxFiles = DefaultLogLimits.MaxFiles
	}
	return l
}

// openContainerLog opens the log rel of the node's state directory t for
// appending, making it and its directory when missing.
func openContainerLog(t stateTree, rel string, limits LogLimits) (*containerLog, error) {
	dir := -1
	err := t.root(func(root int) error {
		var err error
		dir, err = mkdirAllIn(root, path.Dir(rel), noLinks, 0o755, -1, -1)
		return err
	})
	if err != nil {
		return nil, err
	}
	name := path.Base(rel)
	f, err := openOwnFile(dir, name, noLinks, unix.O_CREAT|unix.O_APPEND, 0o644)
	if err != nil {
		unix.Close(dir)
		return nil, err
	}
	fi, _ := f.Stat()
	l := &containerLog{dir: dir, name: name, f: f, maxBytes: limits.MaxBytes, maxFiles: limits.MaxFiles}
	if fi != nil {
		l.size = fi.Size()
	}
	return l, nil
}

// maxLogLine is the longest line a container log holds as one entry, as
// containerd's max_container_log_line_size: a longer line is written as
// partial entries (tag P) of this size, so that a line without end is
// rotated like any other output and never held whole in memory.
const maxLogLine = 16 << 10

// maxPTYs bounds the pseudo-terminals of one container's /dev/pts.
const maxPTYs = 256

func (l *containerLog) copy(stream string, r io.Reader) {
	br := bufio.NewReaderSize(r, maxLogLine)
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			tag, nl := "F", ""
			if chunk[len(chunk)-1] != '\n' {
				tag, nl = "P", "\n"
			}
			l.mu.Lock()
			n, _ := fmt.Fprintf(l.f, "%s %s %s %s%s", time.Now().UTC().Format(time.RFC3339Nano), stream, tag, chunk, nl)
			l.size += int64(n)
			if l.maxBytes > 0 && l.size >= l.maxBytes {
				l.rotateLocked()
			}
			l.mu.Unlock()
		}
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
	}
}

// rotateLocked moves the log aside (path.1, path.2, ...; the oldest
// beyond maxFiles goes) and starts an empty one.
func (l *containerLog) rotateLocked() {
	keep := l.maxFiles - 1
	if keep < 1 {
		// One file only: it starts over.
		l.f.Truncate(0)
		l.size = 0
		return
	}
	unix.Unlinkat(l.dir, fmt.Sprintf("%s.%d", l.name, keep), 0)
	for i := keep - 1; i >= 1; i-- {
		unix.Renameat(l.dir, fmt.Sprintf("%s.%d", l.name, i), l.dir, fmt.Sprintf("%s.%d", l.name, i+1))
	}
	unix.Renameat(l.dir, l.name, l.dir, l.name+".1")
	f, err := openOwnFile(l.dir, l.name, noLinks, unix.O_CREAT|unix.O_APPEND|unix.O_TRUNC, 0o644)
	if err != nil {
		return // keep writing to the renamed file rather than lose output
	}
	l.f.Close()
	l.f, l.size = f, 0
}

func (l *containerLog) Close() error {
	err := l.f.Close()
	l.mu.Lock()
	if l.dir >= 0 {
		unix.Close(l.dir)
		l.dir = -1
	}
	l.mu.Unlock()
	return err
}

// detach stops following the container, which goes on running.
func (rc *runningContainer) detach() { rc.detachOnce.Do(func() { close(rc.detached) }) }
