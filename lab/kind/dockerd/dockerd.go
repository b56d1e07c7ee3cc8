package dockerd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/flock"
)

// EnvHost is the variable the docker command line (and so kind's library)
// reads the daemon's address from.
const EnvHost = "DOCKER_HOST"

// EnvOwn set to "no" keeps svclab from installing or starting a Docker
// engine of its own: the kind backend then uses the user's or says what to
// do.
const EnvOwn = "SVCLAB_OWN_DOCKER"

// ErrNoOwn is returned when no daemon answers and svclab may not start its
// own (EnvOwn=no).
var ErrNoOwn = errors.New("no Docker daemon answers and " + EnvOwn + "=no keeps svclab from starting its own")

// DefaultSocket is where a Docker daemon of the machine listens.
const DefaultSocket = "unix:///var/run/docker.sock"

// ErrDown is returned when the daemon DOCKER_HOST names does not answer.
var ErrDown = errors.New("the Docker daemon does not answer")

// ErrNeedRoot is returned when svclab would have to start its own daemon
// but is not root.
var ErrNeedRoot = errors.New("starting a Docker engine needs root")

// System is what the engine needs from the machine, behind an interface for
// the tests.
type System interface {
	// Ping says whether a Docker daemon answers at host, and its version.
	Ping(ctx context.Context, host string) (version string, err error)
	// Containers lists the IDs of every container of the daemon at host.
	Containers(ctx context.Context, host string) ([]string, error)
	// Install makes dockerd available (installing docker.io as root on
	// Debian) or says what to install.
	Install(ctx context.Context, out io.Writer) error
	// IsRoot says whether the process may start a daemon.
	IsRoot() bool
	// Start starts argv detached from this process (its own session), its
	// output appended to logPath, and returns its pid.
	Start(argv []string, logPath string) (int, error)
	// Alive says whether process pid runs.
	Alive(pid int) bool
	// Signal sends sig to process pid.
	Signal(pid int, sig syscall.Signal) error
	// Capabilities returns the bounding set and the last capability.
	Capabilities() (bounding uint64, lastCap int, err error)
	// Unmount detaches the mounts at and below dir.
	Unmount(dir string) error
	// LookPath finds a command.
	LookPath(name string) (string, error)
}

// Options say where svclab's own engine lives and how it is started.
type Options struct {
	// Dir holds svclab's own engine (DefaultDir when empty).
	Dir string
	// Svclab is the svclab binary, whose svclab-runc applet is the wrapper
	// runtime; os.Executable() when empty.
	Svclab string
	// Env is the environment's DOCKER_HOST ("" when unset).
	Env string
	// NoOwn keeps svclab from installing or starting its own daemon
	// (EnvOwn=no).
	NoOwn  bool
	System System
	// Engines are the engines of the machine's tried, in order, when
	// DOCKER_HOST is unset; Engines(home, $XDG_RUNTIME_DIR) when nil.
	Engines  []Engine
	Progress cluster.Progress
	Log      *slog.Logger
	// StartTimeout bounds the wait for a started daemon to answer.
	StartTimeout time.Duration
}

// DefaultDir is svclab/docker in the user's cache directory, or under
// $SVCLAB_CACHE_DIR.
func DefaultDir() (string, error) {
	if d := os.Getenv("SVCLAB_CACHE_DIR"); d != "" {
		return filepath.Join(d, "docker"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the user cache directory: %w (set SVCLAB_CACHE_DIR)", err)
	}
	return filepath.Join(d, "svclab", "docker"), nil
}

// Daemon is a Docker engine that answers.
type Daemon struct {
	// Host is its address, for DOCKER_HOST.
	Host    string
	Version string
	// Engine names the engine of the machine's it is ("Docker Desktop");
	// "" for DOCKER_HOST's and svclab's own.
	Engine string
	// Own says it is svclab's own daemon.
	Own bool
	// Wrapped says containers run with svclab-runc (capabilities dropped).
	Wrapped bool

	o       Options
	release func()
}

func (o *Options) fill() error {
	if o.Dir == "" {
		d, err := DefaultDir()
		if err != nil {
			return err
		}
		o.Dir = d
	}
	if o.System == nil {
		o.System = Host{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	o.Progress = cluster.OrNop(o.Progress)
	if o.StartTimeout == 0 {
		o.StartTimeout = time.Minute
	}
	if o.Engines == nil {
		o.Engines = userEngines()
	}
	return nil
}

func (o Options) socket() string     { return filepath.Join(o.Dir, "docker.sock") }
func (o Options) host() string       { return "unix://" + o.socket() }
func (o Options) pidFile() string    { return filepath.Join(o.Dir, "dockerd.pid") }
func (o Options) logFile() string    { return filepath.Join(o.Dir, "dockerd.log") }
func (o Options) configFile() string { return filepath.Join(o.Dir, "daemon.json") }
func (o Options) execRoot() string   { return filepath.Join(o.Dir, "exec") }
func (o Options) dataRoot() string   { return filepath.Join(o.Dir, "data") }
func (o Options) wrapper() string    { return filepath.Join(o.Dir, "bin", RuntimeName) }
func (o Options) usersLock() string  { return filepath.Join(o.Dir, "users.lock") }
func (o Options) startLock() string  { return filepath.Join(o.Dir, "start.lock") }

// UsersLock is the file every svclab process using d holds shared ("" for
// an engine that is not svclab's own): a test can tell whether it still
// holds it.
func (d *Daemon) UsersLock() string {
	if !d.Own {
		return ""
	}
	return d.o.usersLock()
}

// OwnHost is the address of svclab's own engine in dir.
func OwnHost(dir string) string { return Options{Dir: dir}.host() }

// Ensure returns a Docker engine that answers: the one DOCKER_HOST names,
// else the machine's (/var/run/docker.sock) or the user's (Docker Desktop,
// colima, OrbStack, ...: Engines), else svclab's own — started,
// after installing docker.io when needed, if it does not run. Release it
// when done.
func Ensure(ctx context.Context, o Options) (*Daemon, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	if o.Env != "" && o.Env != o.host() {
		v, err := o.System.Ping(ctx, o.Env)
		if err != nil {
			return nil, fmt.Errorf("%w at %s=%s: %w", ErrDown, EnvHost, o.Env, err)
		}
		return &Daemon{Host: o.Env, Version: v, o: o}, nil
	}
	if o.Env == "" {
		for _, e := range o.Engines {
			if v, err := o.System.Ping(ctx, e.Host); err == nil {
				o.Log.Debug("using a Docker engine of the machine's", "engine", e.Name, "host", e.Host, "version", v)
				return &Daemon{Host: e.Host, Version: v, Engine: e.Name, o: o}, nil
			}
		}
	}
	if o.NoOwn {
		if st, err := OwnStatus(ctx, o); err == nil && st.Running && st.Version != "" {
			return nil, fmt.Errorf("%w; svclab's own runs at %s: set %s=%s to use it", ErrNoOwn, o.host(), EnvHost, o.host())
		}
		return nil, ErrNoOwn
	}
	if err := ownEngine(o.Engines); err != nil {
		return nil, err
	}
	return ensureOwn(ctx, o)
}

func ensureOwn(ctx context.Context, o Options) (*Daemon, error) {
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("svclab's Docker engine directory %s: %w", o.Dir, err)
	}
	// Users hold users.lock shared; Release stops the daemon only when it
	// gets it exclusively.
	release, err := flock.Shared(o.usersLock(), 0o600)
	if err != nil {
		return nil, err
	}
	d, err := startOwn(ctx, o)
	if err != nil {
		release()
		return nil, err
	}
	d.release = release
	return d, nil
}

func startOwn(ctx context.Context, o Options) (*Daemon, error) {
	unlock, err := flock.Lock(o.startLock(), 0o600)
	if err != nil {
		return nil, err
	}
	defer unlock()
	drop, err := o.missingCaps()
	if err != nil {
		return nil, err
	}
	if !o.installed() {
		// Without the docker command nothing can be asked of a daemon,
		// running or not.
		if !o.System.IsRoot() {
			return nil, fmt.Errorf("%w: Docker is not installed", ErrNeedRoot)
		}
		var out strings.Builder
		done := o.Progress.Start("Installing Docker (Debian's docker.io) for the kind backend")
		err := o.System.Install(ctx, &out)
		done(err)
		if err != nil {
			return nil, fmt.Errorf("no Docker daemon answers and Docker cannot be installed here: %w", err)
		}
	}
	if pid := o.pid(); pid > 0 && o.System.Alive(pid) {
		if v, err := o.System.Ping(ctx, o.host()); err == nil {
			return &Daemon{Host: o.host(), Version: v, Own: true, Wrapped: len(drop) > 0, o: o}, nil
		}
		o.Log.Warn("svclab's dockerd runs but does not answer; restarting it", "pid", pid)
		if err := o.stopPid(ctx, pid); err != nil {
			return nil, err
		}
	}
	if !o.System.IsRoot() {
		return nil, fmt.Errorf("%w: no Docker daemon answers (%s), and svclab can only start one of its own as root: start Docker, or run svclab as root", ErrNeedRoot, DefaultSocket)
	}
	o.cleanup()
	done := o.Progress.Start("Starting svclab's Docker engine (no Docker daemon answers)")
	d, err := o.start(ctx, drop)
	done(err)
	return d, err
}

// installed says whether Docker's daemon and command line are there.
func (o Options) installed() bool {
	_, err1 := o.System.LookPath("dockerd")
	_, err2 := o.System.LookPath("docker")
	return err1 == nil && err2 == nil
}

// missingCaps lists the capabilities the bounding set lacks.
func (o Options) missingCaps() ([]string, error) {
	bounding, last, err := o.System.Capabilities()
	if err != nil {
		return nil, fmt.Errorf("reading the capability bounding set: %w", err)
	}
	return Missing(bounding, last), nil
}

// Config is svclab's dockerd configuration (daemon.json).
func (o Options) Config(wrapped bool) ([]byte, error) {
	cfg := map[string]any{
		"data-root":  o.dataRoot(),
		"exec-root":  o.execRoot(),
		"hosts":      []string{o.host()},
		"pidfile":    o.pidFile(),
		"iptables":   false,
		"ip6tables":  false,
		"ip-forward": false,
		"ip-masq":    false,
		"bridge":     "none",
		"log-driver": "json-file",
		"log-opts":   map[string]string{"max-size": "10m", "max-file": "2"},
		"features":   map[string]bool{"buildkit": false},
	}
	if wrapped {
		cfg["runtimes"] = map[string]any{RuntimeName: map[string]string{"path": o.wrapper()}}
		cfg["default-runtime"] = RuntimeName
	}
	return json.MarshalIndent(cfg, "", "  ")
}

func (o Options) start(ctx context.Context, drop []string) (*Daemon, error) {
	wrapped := len(drop) > 0
	if wrapped {
		if err := o.installWrapper(); err != nil {
			return nil, err
		}
		o.Progress.Infof("this machine's capability bounding set lacks %s: containers run with %s, which drops them", strings.Join(drop, ", "), RuntimeName)
	}
	cfg, err := o.Config(wrapped)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(o.configFile(), cfg, 0o600); err != nil {
		return nil, err
	}
	dockerd, err := o.System.LookPath("dockerd")
	if err != nil {
		return nil, fmt.Errorf("dockerd is not installed: %w", err)
	}
	pid, err := o.System.Start([]string{dockerd, "--config-file", o.configFile()}, o.logFile())
	if err != nil {
		return nil, fmt.Errorf("starting dockerd: %w", err)
	}
	o.Log.Info("started svclab's dockerd", "pid", pid, "host", o.host())
	deadline := time.Now().Add(o.StartTimeout)
	for {
		v, err := o.System.Ping(ctx, o.host())
		if err == nil {
			return &Daemon{Host: o.host(), Version: v, Own: true, Wrapped: wrapped, o: o}, nil
		}
		if !o.System.Alive(pid) || time.Now().After(deadline) || ctx.Err() != nil {
			o.stopPid(context.WithoutCancel(ctx), pid)
			o.cleanup()
			return nil, fmt.Errorf("svclab's dockerd did not start (its log is %s): %w\n%s", o.logFile(), err, tailFile(o.logFile(), 10))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// installWrapper puts the svclab binary at bin/svclab-runc: a hard link
// when it can (a rebuilt svclab gets a new file, the link keeps the old
// one), else a copy.
func (o Options) installWrapper() error {
	src := o.Svclab
	if src == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		src = exe
	}
	dst := o.wrapper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if a, err := os.Stat(src); err == nil {
		if b, err := os.Stat(dst); err == nil && os.SameFile(a, b) {
			return nil
		}
	}
	tmp := dst + ".tmp"
	os.Remove(tmp)
	if err := os.Link(src, tmp); err != nil {
		if err := copyFile(src, tmp); err != nil {
			return fmt.Errorf("installing the %s runtime: %w", RuntimeName, err)
		}
	}
	return os.Rename(tmp, dst)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func (o Options) pid() int {
	data, err := os.ReadFile(o.pidFile())
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

// stopPid stops dockerd: SIGTERM (it stops its containers and containerd),
// then SIGKILL after 45 seconds.
func (o Options) stopPid(ctx context.Context, pid int) error {
	if err := o.System.Signal(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stopping dockerd (pid %d): %w", pid, err)
	}
	deadline := time.Now().Add(45 * time.Second)
	for o.System.Alive(pid) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			o.Log.Warn("dockerd did not stop; killing it", "pid", pid)
			o.System.Signal(pid, syscall.SIGKILL)
			time.Sleep(time.Second)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

// cleanup removes what a stopped (or crashed) daemon left: its mounts
// below the directory, its exec-root, socket and pid file. The data-root
// (images) stays.
func (o Options) cleanup() {
	if err := o.System.Unmount(o.Dir); err != nil {
		o.Log.Warn("unmounting what dockerd left", "dir", o.Dir, "err", err)
	}
	for _, p := range []string{o.execRoot(), o.socket(), o.pidFile()} {
		if err := os.RemoveAll(p); err != nil {
			o.Log.Warn("removing what dockerd left", "path", p, "err", err)
		}
	}
}

// Release ends this process's use of the engine. svclab's own daemon is
// stopped when no other svclab process uses it and it has no container
// left (its images stay for the next start).
func (d *Daemon) Release(ctx context.Context) error {
	if d == nil || !d.Own {
		return nil
	}
	if d.release != nil {
		d.release()
		d.release = nil
	}
	return StopIdle(ctx, d.o)
}

// StopIdle stops svclab's own daemon when no svclab process uses it and
// it has no container. It reports whether it stopped it.
func StopIdle(ctx context.Context, o Options) error {
	_, err := stopIdle(ctx, o, false)
	return err
}

// Stop stops svclab's own daemon unless a svclab process uses it or it
// still has containers (force stops it all the same).
func Stop(ctx context.Context, o Options, force bool) (stopped bool, err error) {
	return stopIdle(ctx, o, force)
}

func stopIdle(ctx context.Context, o Options, force bool) (bool, error) {
	if err := o.fill(); err != nil {
		return false, err
	}
	pid := o.pid()
	if pid <= 0 || !o.System.Alive(pid) {
		if pid > 0 {
			o.cleanup()
		}
		return false, nil
	}
	users, err := flock.TryLock(o.usersLock(), 0o600)
	if errors.Is(err, flock.ErrLocked) && !force {
		return false, nil // another svclab process uses it
	}
	if err == nil {
		defer users.Close()
	}
	if !force {
		ids, err := o.System.Containers(ctx, o.host())
		if err != nil {
			return false, err
		}
		if len(ids) > 0 {
			return false, nil
		}
	}
	done := o.Progress.Start("Stopping svclab's Docker engine (nothing uses it)")
	err = o.stopPid(ctx, pid)
	if err == nil {
		o.cleanup()
	}
	done(err)
	return err == nil, err
}

// Status describes svclab's own engine in dir.
type Status struct {
	Running bool
	Pid     int
	Host    string
	Version string
}

// OwnStatus says whether svclab's own daemon runs.
func OwnStatus(ctx context.Context, o Options) (Status, error) {
	if err := o.fill(); err != nil {
		return Status{}, err
	}
	st := Status{Host: o.host(), Pid: o.pid()}
	if st.Pid > 0 && o.System.Alive(st.Pid) {
		st.Version, _ = o.System.Ping(ctx, o.host())
		st.Running = true
	}
	return st, nil
}

func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
