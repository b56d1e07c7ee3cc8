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
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
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
}

// Mount is a bind mount into a container.
type Mount struct {
	Source, Destination string
	ReadOnly            bool
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
	// Netns is the path of the network namespace to join.
	Netns        string
	Mounts       []Mount
	TTY          bool
	Stdin        bool
	Privileged   bool
	CapAdd       []string
	CapDrop      []string
	RunAsUser    *int64
	RunAsGroup   *int64
	ReadOnlyRoot bool
	// CgroupsPath is the container's cgroup (runc's default when empty).
	CgroupsPath string
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

// runtimeSpec renders the OCI runtime spec of a container.
func runtimeSpec(c containerSpec, bounding []string) *specs.Spec {
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
		},
		Root:     &specs.Root{Path: "rootfs", Readonly: c.ReadOnlyRoot},
		Hostname: c.Hostname,
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/run", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=755"}},
		},
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.MountNamespace},
				{Type: specs.NetworkNamespace, Path: c.Netns},
			},
			Resources: &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}},
		},
	}
	spec.Linux.CgroupsPath = c.CgroupsPath
	if c.Hostname != "" {
		spec.Linux.Namespaces = append(spec.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UTSNamespace})
	}
	if !c.Privileged {
		spec.Linux.MaskedPaths = []string{"/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
			"/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"}
		spec.Linux.ReadonlyPaths = []string{"/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
	} else {
		// A privileged container may change its network namespace's
		// sysctls and the like, as kube-proxy does.
		for i := range spec.Mounts {
			if spec.Mounts[i].Destination == "/sys" {
				spec.Mounts[i].Options = []string{"nosuid", "noexec", "nodev", "rw"}
			}
		}
	}
	for _, m := range c.Mounts {
		opts := []string{"rbind", "rprivate"}
		if m.ReadOnly {
			opts = append(opts, "ro")
		}
		spec.Mounts = append(spec.Mounts, specs.Mount{Destination: m.Destination, Type: "bind", Source: m.Source, Options: opts})
	}
	return spec
}

// prepare writes the bundle: the overlay root filesystem and config.json.
func (r *runc) prepare(c containerSpec) error {
	if r.cgroupParent != "" {
		c.CgroupsPath = "/" + filepath.Join(r.cgroupParent, c.ID)
	}
	rootfs := filepath.Join(c.Bundle, "rootfs")
	upper, work := filepath.Join(c.Bundle, "upper"), filepath.Join(c.Bundle, "work")
	for _, d := range []string{rootfs, upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if len(c.Image.Layers) == 0 {
		return fmt.Errorf("image %s has no layers", c.Image.Name)
	}
	lower := make([]string, len(c.Image.Layers))
	for i, l := range c.Image.Layers { // overlayfs wants the top layer first
		lower[len(lower)-1-i] = l
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", strings.Join(lower, ":"), upper, work)
	if err := unix.Mount("overlay", rootfs, "overlay", 0, opts); err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("mounting the image's layers: %w", err)
	}
	// Mount points for bind mounts must exist in the image.
	for _, m := range c.Mounts {
		dst := filepath.Join(rootfs, m.Destination)
		if fi, err := os.Stat(m.Source); err == nil && !fi.IsDir() {
			os.MkdirAll(filepath.Dir(dst), 0o755)
			if _, err := os.Stat(dst); err != nil {
				f, err := os.Create(dst)
				if err == nil {
					f.Close()
				}
			}
		} else {
			os.MkdirAll(dst, 0o755)
		}
	}
	b, err := json.MarshalIndent(runtimeSpec(c, boundingCaps()), "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.Bundle, "config.json"), b, 0o644)
}

// cleanup unmounts and removes a bundle.
func (r *runc) cleanup(bundle string) error {
	rootfs := filepath.Join(bundle, "rootfs")
	if err := unix.Unmount(rootfs, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmounting %s: %w", rootfs, err)
	}
	return os.RemoveAll(bundle)
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
// ("<RFC3339Nano> <stream> F <line>"), which kubectl logs reads back.
type containerLog struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

func openContainerLog(path string) (*containerLog, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &containerLog{path: path, f: f}, nil
}

func (l *containerLog) copy(stream string, r io.Reader) {
	br := bufio.NewReaderSize(r, 64*1024)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			tag := "F"
			if !strings.HasSuffix(line, "\n") {
				tag = "P"
				line += "\n"
			}
			l.mu.Lock()
			fmt.Fprintf(l.f, "%s %s %s %s", time.Now().UTC().Format(time.RFC3339Nano), stream, tag, line)
			l.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func (l *containerLog) Close() error { return l.f.Close() }

// detach stops following the container, which goes on running.
func (rc *runningContainer) detach() { rc.detachOnce.Do(func() { close(rc.detached) }) }
