//go:build linux

package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/embedded/netpol"
)

// WaitPolicy asks the node agents' socket about every node until each
// enforces the versions asked for; versions compare as numbers.
func TestWaitPolicy(t *testing.T) {
	dir := t.TempDir()
	c := &Cluster{dir: dir, st: &State{Name: "lab", Nodes: []NodeSpec{{Name: "lab-control-plane"}, {Name: "lab-worker"}}}}
	l, err := net.Listen("unix", paths{dir}.agentsSocket())
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int64
	// The worker's agent catches up after a few questions: 9 < 10 as
	// numbers, although "9" > "10" as text.
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+policyPath, func(w http.ResponseWriter, r *http.Request) {
		s := netpol.Synced{Pods: "120", Namespaces: "100"}
		switch r.URL.Query().Get("node") {
		case "lab-worker":
			s.Namespaces = "9"
			if asked.Add(1) > 3 {
				s.Namespaces = "110"
			}
		case "lab-control-plane":
		default:
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(s)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	ctx := context.Background()
	if err := c.WaitPolicy(ctx, "120", "10"); err != nil {
		t.Fatal(err)
	}
	if n := asked.Load(); n != 4 {
		t.Errorf("asked the worker %d times", n)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := c.WaitPolicy(short, "121", ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting for a version no agent reaches: %v", err)
	}
	for _, tc := range []struct {
		have, want string
		ok         bool
	}{{"10", "9", true}, {"9", "10", false}, {"7", "", true}, {"", "7", false}, {"x", "7", false}, {"7", "7", true}} {
		if got := reached(tc.have, tc.want); got != tc.ok {
			t.Errorf("reached(%q, %q) = %v", tc.have, tc.want, got)
		}
	}
}
