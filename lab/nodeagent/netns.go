package nodeagent

import (
	"context"
	"fmt"
	"net"
	"runtime"

	"github.com/vishvananda/netns"
)

// inNetns runs f on a thread switched into the named network namespace.
// Sockets f creates stay in that namespace after the thread switches back.
func inNetns(name string, f func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	target, err := netns.GetFromName(name)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("network namespace %s: %w", name, err)
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
		return fmt.Errorf("switching back from %s: %w", name, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// listenIn opens a TCP listener inside the named network namespace.
func listenIn(name, addr string) (net.Listener, error) {
	var l net.Listener
	err := inNetns(name, func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

// dialIn connects from inside the named network namespace.
func dialIn(ctx context.Context, name, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNetns(name, func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}
