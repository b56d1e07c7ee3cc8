//go:build linux

package nftables

import (
	"context"
	"flag"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/svclab/svclab/lab/proxier/manifest"
	"github.com/svclab/svclab/lab/proxier/model"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/golden")

// The fixture of upstream's NewFakeProxier (pkg/proxy/nftables/proxier_test.go).
const (
	testNodeName              = "test-node"
	testNodeIP                = "192.168.0.2"
	testNodeIPAlt             = "192.168.1.2"
	testExternalIP            = "192.168.99.11"
	testExternalClient        = "203.0.113.2"
	testExternalClientBlocked = "203.0.113.130"
)

var testNodeIPs = []string{testNodeIP, testNodeIPAlt, testExternalIP}

func upstreamConfig(t *testing.T) Config {
	t.Helper()
	npa, err := model.NewNodePortAddresses(v1.IPv4Protocol, []string{testNodeIP + "/32", "2001:db8::1/128"}, net.ParseIP(testNodeIP))
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		Family:            v1.IPv4Protocol,
		NodeIP:            net.ParseIP(testNodeIP),
		ClusterCIDR:       "10.0.0.0/8",
		ServiceCIDRs:      []string{"172.30.0.0/16"},
		NodePortAddresses: npa,
		MasqueradeMark:    "0x4000", // as upstream's fake proxier
		LocalAddresses: []net.IP{
			net.ParseIP("127.0.0.1"), net.ParseIP(testNodeIP), net.ParseIP(testNodeIPAlt), net.ParseIP(testExternalIP),
		},
	}
}

func newFakeSyncer(t *testing.T, cfg Config) (*knftables.Fake, *Syncer) {
	t.Helper()
	nft := knftables.NewFake(knftables.IPv4Family, Table)
	s, err := New(cfg, nft, nil)
	if err != nil {
		t.Fatal(err)
	}
	return nft, s
}

// loadSnapshot reads a manifest and builds the model for testNodeName.
func loadSnapshot(t *testing.T, path string) *model.Snapshot {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	objs, err := manifest.Decode(f, path)
	if err != nil {
		t.Fatal(err)
	}
	return buildSnapshot(t, objs)
}

func buildSnapshot(t *testing.T, objs *manifest.Objects) *model.Snapshot {
	t.Helper()
	snap, err := model.Build(context.Background(), nil, model.Input{
		Family:         v1.IPv4Protocol,
		NodeName:       testNodeName,
		Node:           objs.Node(testNodeName),
		Services:       objs.Services,
		EndpointSlices: objs.EndpointSlices,
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// decodeSnapshot builds a snapshot from inline YAML.
func decodeSnapshot(t *testing.T, yamlText string) *model.Snapshot {
	t.Helper()
	objs, err := manifest.Decode(strings.NewReader(yamlText), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	return buildSnapshot(t, objs)
}

// objectOrder ranks object types for sortTransaction (higher first).
var objectOrder = map[string]int{"table": 10, "chain": 9, "rule": 8, "set": 7, "map": 6, "element": 5}

// sortTransaction puts "add ..." lines into a canonical order so that a
// dump can be compared with an expectation written in any order: by object
// type, then object name; rules keep their relative order, other lines are
// sorted. Blank lines and "#" comments are dropped. This is the ordering
// upstream's tests use.
func sortTransaction(tx string) string {
	var lines []string
	for _, l := range strings.Split(tx, "\n") {
		if l != "" && l[0] != '#' {
			lines = append(lines, l)
		}
	}
	slices.SortStableFunc(lines, func(a, b string) int {
		wa, wb := strings.Split(a, " "), strings.Split(b, " ")
		if len(wa) < 5 || len(wb) < 5 {
			return 0
		}
		if wa[1] != wb[1] {
			return objectOrder[wb[1]] - objectOrder[wa[1]]
		}
		if c := strings.Compare(wa[4], wb[4]); c != 0 {
			return c
		}
		if wa[1] == "rule" {
			return 0
		}
		return strings.Compare(a, b)
	})
	return strings.Join(lines, "\n")
}

func assertDumpEqual(t *testing.T, expected, got string) {
	t.Helper()
	if diff := cmp.Diff(sortTransaction(expected), sortTransaction(got)); diff != "" {
		t.Errorf("ruleset mismatch (-want +got):\n%s", diff)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// golden compares got with testdata/golden/name, or rewrites it with -update.
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
	want := readFile(t, path)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s mismatch (-want +got; rerun with -update to accept):\n%s", path, diff)
	}
}
