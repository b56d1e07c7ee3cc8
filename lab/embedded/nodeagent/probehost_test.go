//go:build linux

package nodeagent

import (
	"strings"
	"testing"
)

// A probe's or hook's host is the Pod's IP by default, an address, or
// localhost; a name is refused with a message that says why (the agent
// would resolve it with the host's resolver, in the host's network).
func TestProbeHost(t *testing.T) {
	for _, tc := range []struct{ host, want, err string }{
		{"", "10.244.1.5", ""},
		{"10.96.0.10", "10.96.0.10", ""},
		{"::1", "::1", ""},
		{"LocalHost", "127.0.0.1", ""},
		{"lab-data-c2VjcmV0.svclab-exfil-test.invalid", "", "is a name"},
		{"web.default.svc", "", "give the address"},
	} {
		got, err := probeHost(tc.host, "10.244.1.5")
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("probeHost(%q) = %q, %v; want %q, %q", tc.host, got, err, tc.want, tc.err)
		}
	}
}

// An exec probe's output is kept up to 10 KiB, the rest dropped without
// failing the command that prints it.
func TestProbeOutputBounded(t *testing.T) {
	o := &probeOutput{}
	chunk := make([]byte, 4096)
	for range 1000 {
		if n, err := o.Write(chunk); n != len(chunk) || err != nil {
			t.Fatalf("Write: %d %v", n, err)
		}
	}
	if o.Len() != maxProbeOutput {
		t.Errorf("kept %d bytes, want %d", o.Len(), maxProbeOutput)
	}
}
