// Package nsenter enters a lab's namespaces from the host: it runs Go code
// on a thread switched into a network namespace (sockets made there stay
// there), and host programs in a network namespace as root of the lab's
// user namespace, with nothing else of the lab's (its filesystem, its
// binaries, its processes).
package nsenter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/vishvananda/netns"

	"github.com/svclab/svclab/lab/embedded/cgroups"
)

// Do runs f on a thread switched into the network namespace in file path
// (/run/netns/NAME). Sockets f creates stay in that namespace after the
// thread switches back.
func Do(path string, f func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	target, err := netns.GetFromPath(path)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("network namespace %s: %w", path, err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	ferr := f()
	if err := netns.Set(orig); err != nil {
		// Leave the thread locked: Go retires it when this goroutine
		// ends, so no other goroutine runs in the wrong namespace.
		return fmt.Errorf("switching back from %s: %w", path, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// Netns is a network namespace of a lab, owned by the lab's user
// namespace Userns (a pin file).
type Netns struct {
	Path, Userns string
	// Cgroup are the cgroup.procs files (cgroups.Procs) of the cgroup in
	// which Command's programs run: a lab's, so that the memory and CPU a
	// host program spends on what the lab made (a ruleset of millions of
	// elements) count against the lab's limits, not the host's. Empty:
	// the caller's.
	Cgroup []string
}

// readerOOMScoreAdj makes a host program reading a lab the first to go
// when the lab's cgroup runs out of memory.
const readerOOMScoreAdj = 1000

// DialContext connects from inside the namespace.
func (n Netns) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return n.DialFrom(ctx, network, "", address)
}

// DialFrom connects from inside the namespace, from local ("" for any).
// Both are IP addresses: Go resolves a name on another thread, in the
// host's network, and races the addresses of a name from other threads
// too — a name given by the lab (a probe's host) would have svclab, root
// on the host, resolve it with the host's resolver and connect from the
// host's network.
func (n Netns) DialFrom(ctx context.Context, network, local, address string) (net.Conn, error) {
	if err := literal(address, false); err != nil {
		return nil, err
	}
	if local != "" {
		if err := literal(local, true); err != nil {
			return nil, err
		}
	}
	var d net.Dialer
	if local != "" {
		var err error
		if strings.HasPrefix(network, "udp") {
			d.LocalAddr, err = net.ResolveUDPAddr(network, local)
		} else {
			d.LocalAddr, err = net.ResolveTCPAddr(network, local)
		}
		if err != nil {
			return nil, err
		}
	}
	var c net.Conn
	err := Do(n.Path, func() (err error) {
		c, err = d.DialContext(ctx, network, address)
		return err
	})
	return c, err
}

// ErrNotAnAddress is the error of a dial or listen inside a lab's network
// namespace given a name instead of an IP address.
var ErrNotAnAddress = errors.New("svclab connects inside a lab's network to IP addresses only (a name would be resolved in the host's network)")

// literal checks that address (host:port) names an IP address; with
// anyHost an empty host (any address) passes too.
func literal(address string, anyHost bool) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%q: %w", address, err)
	}
	if host == "" && anyHost {
		return nil
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return fmt.Errorf("%q: %w", address, ErrNotAnAddress)
	}
	return nil
}

// Listen opens a stream listener inside the namespace, on an IP address
// (or on every address: ":port").
func (n Netns) Listen(ctx context.Context, network, address string) (net.Listener, error) {
	if err := literal(address, true); err != nil {
		return nil, err
	}
	var l net.Listener
	err := Do(n.Path, func() (err error) {
		var lc net.ListenConfig
		l, err = lc.Listen(ctx, network, address)
		return err
	})
	return l, err
}

// Command runs the host's program argv[0] in the namespace, as root of the
// lab's user namespace (no capability on the host), in the host's mount
// namespace (the program and what it reads are the host's, never the
// lab's), in the lab's cgroup Cgroup when set.
func (n Netns) Command(ctx context.Context, argv ...string) (*exec.Cmd, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("no command given")
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, fmt.Errorf("the host has no %s (svclab setup installs it): %w", argv[0], err)
	}
	args := []string{"nsenter", "--net=" + n.Path}
	if n.Userns != "" {
		args = append(args, "--user="+n.Userns)
	}
	args = append(append(args, "--", path), argv[1:]...)
	if len(n.Cgroup) > 0 {
		args = cgroups.Enter(readerOOMScoreAdj, n.Cgroup, args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	// The host's program may leave children holding its output.
	cmd.WaitDelay = time.Second
	return cmd, nil
}
