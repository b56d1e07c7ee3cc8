package iptables

import (
	"context"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/proxier/manifest"
	"github.com/svclab/svclab/lab/proxier/model"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/golden")

const (
	testNodeName = "test-node"
	testNodeIP   = "192.168.0.2"
)

// upstreamConfig mirrors upstream's iptables NewFakeProxier.
func upstreamConfig() Config {
	return Config{
		Family:             v1.IPv4Protocol,
		NodeIP:             net.ParseIP(testNodeIP),
		ClusterCIDR:        "10.0.0.0/8",
		MasqueradeMark:     "0x4000",
		LocalhostNodePorts: true,
		NFAcct:             true,
		LocalAddresses:     []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(testNodeIP), net.ParseIP("192.168.1.2"), net.ParseIP("192.168.99.11")},
	}
}

func decodeSnapshot(t testing.TB, name, text string) *model.Snapshot {
	t.Helper()
	objs, err := manifest.Decode(strings.NewReader(text), name)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := model.Build(context.Background(), nil, model.Input{
		Family: v1.IPv4Protocol, NodeName: testNodeName, Services: objs.Services, EndpointSlices: objs.EndpointSlices,
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// stripComments drops the "#" header lines of transcribed expectations.
func stripComments(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func render(t testing.TB, cfg Config, snap *model.Snapshot, opts Options) *Result {
	t.Helper()
	res, err := Render(context.Background(), nil, cfg, snap, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func assertRestoreEqual(t *testing.T, want, got string) {
	t.Helper()
	if diff := cmp.Diff(stripComments(want), got); diff != "" {
		t.Errorf("iptables-restore input mismatch (-want +got):\n%s", diff)
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(readFile(t, path), got); diff != "" {
		t.Errorf("%s mismatch (-want +got; rerun with -update to accept):\n%s", path, diff)
	}
}
