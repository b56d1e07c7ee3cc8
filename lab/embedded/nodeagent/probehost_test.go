//go:build linux

package nodeagent

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// A Pod's host name is cut to a DNS label as the kubelet cuts it.
func TestPodHostname(t *testing.T) {
	long := "pod-update-activedeadlineseconds-c3e4dfcf-c440-400f-bbd9-4ab571cfd0fa"
	for _, tc := range []struct {
		name, hostname, want string
	}{
		{"web-0", "", "web-0"},
		{"web-0", "db", "db"},
		{long, "", "pod-update-activedeadlineseconds-c3e4dfcf-c440-400f-bbd9-4ab571"},
		{strings.Repeat("a", 62) + "-b", "", strings.Repeat("a", 62)},
		{strings.Repeat("a", 61) + ".-b", "", strings.Repeat("a", 61)},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tc.name}, Spec: corev1.PodSpec{Hostname: tc.hostname}}
		if got := podHostname(pod); got != tc.want {
			t.Errorf("podHostname(%q, %q) = %q, want %q", tc.name, tc.hostname, got, tc.want)
		}
	}
}
