package nsenter

import (
	"context"
	"errors"
	"testing"
)

// Only IP addresses are dialed or listened on inside a lab's network: a
// name is refused before anything is resolved (Go would resolve it, and
// race its addresses, on threads in the host's network).
func TestOnlyAddresses(t *testing.T) {
	n := Netns{Path: "/nonexistent/netns"}
	ctx := context.Background()
	for _, addr := range []string{"localhost:80", "example.invalid:53", "lab-data.svclab-exfil-test.invalid:80", "[localhost]:1"} {
		if _, err := n.DialContext(ctx, "tcp", addr); !errors.Is(err, ErrNotAnAddress) {
			t.Errorf("dial %s: %v, want ErrNotAnAddress", addr, err)
		}
		if _, err := n.Listen(ctx, "tcp", addr); !errors.Is(err, ErrNotAnAddress) {
			t.Errorf("listen %s: %v, want ErrNotAnAddress", addr, err)
		}
	}
	if _, err := n.DialFrom(ctx, "udp", "localhost:53", "10.96.0.10:53"); !errors.Is(err, ErrNotAnAddress) {
		t.Errorf("dial from a name: %v", err)
	}
	// Addresses pass the check (and then fail on the missing namespace).
	for _, addr := range []string{"10.96.0.10:53", "[::1]:80", "127.0.0.1:10249"} {
		if _, err := n.DialContext(ctx, "tcp", addr); err == nil || errors.Is(err, ErrNotAnAddress) {
			t.Errorf("dial %s: %v, want the namespace's error", addr, err)
		}
	}
	if _, err := n.Listen(ctx, "tcp", ":8080"); err == nil || errors.Is(err, ErrNotAnAddress) {
		t.Errorf("listen on every address: %v, want the namespace's error", err)
	}
}
