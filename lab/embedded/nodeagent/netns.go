//go:build linux

package nodeagent

import (
	"context"
	"net"

	"github.com/svclab/svclab/lab/embedded/nsenter"
)

// listenIn opens a TCP listener inside the named network namespace.
func listenIn(name, addr string) (net.Listener, error) {
	return nsenter.Netns{Path: "/run/netns/" + name}.Listen(context.Background(), "tcp", addr)
}

// dialIn connects from inside the named network namespace.
func dialIn(ctx context.Context, name, network, addr string) (net.Conn, error) {
	return nsenter.Netns{Path: "/run/netns/" + name}.DialContext(ctx, network, addr)
}
