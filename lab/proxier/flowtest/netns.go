package flowtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// Prefix starts the name of every network namespace these tests create.
const Prefix = "svft-"

// netnsDir is where "ip netns" keeps its named namespaces.
const netnsDir = "/run/netns"

// Netns is a named network namespace (one made by "ip netns add").
type Netns struct {
	Name string
}

// Path is the bind mount of the namespace.
func (n Netns) Path() string { return filepath.Join(netnsDir, n.Name) }

// Exec runs a command inside the namespace ("ip netns exec") and returns
// its standard output.
func (n Netns) Exec(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	return run(ctx, stdin, "ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// IP runs "ip -n NAME args...".
func (n Netns) IP(ctx context.Context, args ...string) error {
	_, err := run(ctx, nil, "ip", append([]string{"-n", n.Name}, args...)...)
	return err
}

// Do runs fn on an OS thread that has entered the namespace. Sockets that
// fn creates belong to the namespace for their whole life, so fn can open
// listeners and connections that are then used from any goroutine. The
// thread is thrown away afterwards, never returned to the scheduler.
func (n Netns) Do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread exits with this goroutine.
		runtime.LockOSThread()
		f, err := os.Open(n.Path())
		if err != nil {
			errc <- fmt.Errorf("open namespace %s: %w", n.Name, err)
			return
		}
		err = setns(f)
		f.Close()
		if err != nil {
			errc <- fmt.Errorf("enter namespace %s: %w", n.Name, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// run runs a host command and returns its standard output; errors carry
// the command line and its standard error.
func run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// Sandbox tracks the namespaces of one test so that they can all be deleted,
// and checked for, afterwards. Namespace names are Prefix + run ID + "-" +
// a short name; veths are created directly inside the namespaces and go
// away with them.
type Sandbox struct {
	ID  string
	log *slog.Logger

	mu      sync.Mutex
	netns   []Netns
	ports   [][2]string // network namespace, link
	claimed bool
	closed  bool
}

// ownerDir records which process owns each lab (a file per lab ID holding
// the process's pid and start time), so that SweepStale can tell the
// namespaces of a test run that was killed from those of one that runs.
const ownerDir = "/run/svclab-flowtest"

// owner identifies this process: its pid and its start time (pids are
// reused).
func owner(pid int) (string, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	// The command name (field 2) may hold spaces: count from its ")".
	rest := stat[bytes.LastIndexByte(stat, ')')+1:]
	f := strings.Fields(string(rest))
	if len(f) < 20 {
		return "", false
	}
	return fmt.Sprintf("%d %s", pid, f[19]), true // starttime, field 22
}

// claim records this process as the lab's owner, before its first
// namespace exists.
func (l *Sandbox) claim() error {
	if l.claimed {
		return nil
	}
	me, ok := owner(os.Getpid())
	if !ok {
		return errors.New("cannot read this process's start time")
	}
	if err := os.MkdirAll(ownerDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(ownerDir, l.ID), []byte(me), 0o644); err != nil {
		return err
	}
	l.claimed = true
	return nil
}

// SweepStale deletes what labs of test runs that no longer run left on
// the host (a run killed by a timeout, or by hand, never gets to Close):
// their namespaces and host links. Labs whose owner still runs are left
// alone. It returns what it deleted.
func SweepStale(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(netnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	stale := map[string]bool{}
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), Prefix)
		if !ok {
			continue
		}
		id, _, _ := strings.Cut(name, "-")
		if stale[id] {
			continue
		}
		rec, err := os.ReadFile(filepath.Join(ownerDir, id))
		if err == nil {
			var pid int
			fmt.Sscan(string(rec), &pid)
			if now, ok := owner(pid); ok && now == string(rec) {
				continue // its test still runs
			}
		}
		stale[id] = true
	}
	var removed []string
	var errs []error
	for id := range stale {
		left, err := Leftovers(ctx, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, what := range left {
			kind, name, _ := strings.Cut(what, " ")
			switch kind {
			case "namespace":
				_, err = run(ctx, nil, "ip", "netns", "del", name)
			case "link":
				name, _, _ = strings.Cut(name, "@")
				_, err = run(ctx, nil, "ip", "link", "del", name)
			default:
				continue
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, what)
		}
		os.Remove(filepath.Join(ownerDir, id))
	}
	return removed, errors.Join(errs...)
}

// NewSandbox returns a Sandbox with a fresh random ID (prefix + 4 hex digits, so
// that names stay short enough for interfaces too).
func NewSandbox(prefix string, log *slog.Logger) *Sandbox {
	b := make([]byte, 2)
	rand.Read(b)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sandbox{ID: prefix + hex.EncodeToString(b), log: log}
}

// Netns creates the namespace Prefix+ID+"-"+short with loopback up.
func (l *Sandbox) Netns(ctx context.Context, short string) (Netns, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return Netns{}, errors.New("lab is closed")
	}
	err := l.claim()
	l.mu.Unlock()
	if err != nil {
		return Netns{}, fmt.Errorf("record the lab's owner: %w", err)
	}
	n := Netns{Name: Prefix + l.ID + "-" + short}
	if _, err := run(ctx, nil, "ip", "netns", "add", n.Name); err != nil {
		return Netns{}, fmt.Errorf("create namespace: %w", err)
	}
	l.mu.Lock()
	l.netns = append(l.netns, n)
	l.mu.Unlock()
	l.log.Debug("created namespace", "netns", n.Name)
	if err := n.IP(ctx, "link", "set", "lo", "up"); err != nil {
		return n, fmt.Errorf("namespace %s: %w", n.Name, err)
	}
	return n, nil
}

// Veth links two namespaces: interface aName in a (with address aAddr, a
// CIDR, if not empty) and bName in b (bAddr likewise), both up.
func (l *Sandbox) Veth(ctx context.Context, a Netns, aName, aAddr string, b Netns, bName, bAddr string) error {
	if _, err := run(ctx, nil, "ip", "link", "add", "name", aName, "netns", a.Name, "type", "veth", "peer", "name", bName, "netns", b.Name); err != nil {
		return fmt.Errorf("create veth %s/%s - %s/%s: %w", a.Name, aName, b.Name, bName, err)
	}
	for _, end := range []struct {
		ns         Netns
		name, addr string
	}{{a, aName, aAddr}, {b, bName, bAddr}} {
		if end.addr != "" {
			if err := end.ns.IP(ctx, "addr", "add", end.addr, "dev", end.name); err != nil {
				return err
			}
		}
		if err := end.ns.IP(ctx, "link", "set", end.name, "up"); err != nil {
			return err
		}
	}
	return nil
}

// BridgePort links ns to a bridge: port, a port of bridge in network
// namespace bridgeNetns, and nsName in ns with address nsAddr (a CIDR),
// both up. Close deletes the port explicitly: the kernel tears a deleted
// namespace down asynchronously, veths included.
func (l *Sandbox) BridgePort(ctx context.Context, bridgeNetns, bridge, port string, ns Netns, nsName, nsAddr string) error {
	if _, err := run(ctx, nil, "ip", "-n", bridgeNetns, "link", "add", "name", port, "type", "veth", "peer", "name", nsName, "netns", ns.Name); err != nil {
		return fmt.Errorf("create veth %s/%s - %s/%s: %w", bridgeNetns, port, ns.Name, nsName, err)
	}
	l.mu.Lock()
	l.ports = append(l.ports, [2]string{bridgeNetns, port})
	l.mu.Unlock()
	if _, err := run(ctx, nil, "ip", "-n", bridgeNetns, "link", "set", port, "master", bridge, "up"); err != nil {
		return err
	}
	if err := ns.IP(ctx, "addr", "add", nsAddr, "dev", nsName); err != nil {
		return err
	}
	return ns.IP(ctx, "link", "set", nsName, "up")
}

// Names returns the names of the namespaces created so far.
func (l *Sandbox) Names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, n := range l.netns {
		out = append(out, n.Name)
	}
	return out
}

// Close deletes every namespace of the lab (and with them their veths).
// Sockets opened in them must be closed first, or the kernel keeps the
// namespaces alive, unnamed.
func (l *Sandbox) Close(ctx context.Context) error {
	l.mu.Lock()
	l.closed = true
	if l.claimed {
		defer os.Remove(filepath.Join(ownerDir, l.ID))
	}
	ns := slices.Clone(l.netns)
	ports := slices.Clone(l.ports)
	l.mu.Unlock()
	var errs []error
	for _, p := range ports {
		if _, err := run(ctx, nil, "ip", "-n", p[0], "link", "del", p[1]); err != nil && !strings.Contains(err.Error(), "Cannot find device") && !strings.Contains(err.Error(), "Cannot open network namespace") {
			errs = append(errs, err)
		}
	}
	for _, n := range ns {
		if _, err := run(ctx, nil, "ip", "netns", "del", n.Name); err != nil {
			if _, serr := os.Stat(n.Path()); serr == nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Leftovers lists what a lab with this ID left on the host: named
// namespaces, and links in the host namespace whose name contains the ID.
func Leftovers(ctx context.Context, id string) ([]string, error) {
	var out []string
	entries, err := os.ReadDir(netnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), Prefix+id) {
			out = append(out, "namespace "+e.Name())
		}
	}
	links, err := run(ctx, nil, "ip", "-o", "link", "show")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(links), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.Contains(f[1], id) {
			out = append(out, "link "+strings.TrimSuffix(f[1], ":"))
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if strings.Contains(line, netnsDir+"/"+Prefix+id) {
			out = append(out, "mount "+line)
		}
	}
	return out, nil
}
