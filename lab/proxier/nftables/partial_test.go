//go:build linux

package nftables

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/proxier/manifest"
	"github.com/svclab/svclab/lab/proxier/model"
)

func sharesPorts(a, b *model.Snapshot) bool {
	for _, x := range a.Ports {
		for _, y := range b.Ports {
			if x == y {
				return true
			}
		}
	}
	return false
}

// reuseUnchanged decodes yamlText and replaces every object that equals
// one of prev by prev's (the same pointer).
func reuseUnchanged(t *testing.T, prev *manifest.Objects, yamlText string) *manifest.Objects {
	t.Helper()
	objs, err := manifest.Decode(strings.NewReader(yamlText), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	if prev == nil {
		return objs
	}
	for i, svc := range objs.Services {
		for _, old := range prev.Services {
			if reflect.DeepEqual(old, svc) {
				objs.Services[i] = old
			}
		}
	}
	for i, sl := range objs.EndpointSlices {
		for _, old := range prev.EndpointSlices {
			if reflect.DeepEqual(old, sl) {
				objs.EndpointSlices[i] = old
			}
		}
	}
	return objs
}

// dropEmptyChains removes "add chain" lines of chains without rules (stale
// chains that a partial sync flushed but has not deleted yet).
func dropEmptyChains(dump string) string {
	lines := strings.Split(dump, "\n")
	hasRules := map[string]bool{}
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 4 && f[1] == "rule" {
			hasRules[f[4]] = true
		}
	}
	var out []string
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 4 && f[1] == "chain" && isServiceChainName(f[4]) && !hasRules[f[4]] {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// TestPartialSyncMatchesFullSync applies a series of changes with partial
// syncs and checks that after each one the ruleset equals what a fresh
// full sync of the same state produces.
func TestPartialSyncMatchesFullSync(t *testing.T) {
	ctx := context.Background()
	overall, err := os.ReadFile("../testdata/upstream/overall.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base := string(overall)
	steps := []struct{ name, manifest string }{
		{"initial", base},
		{"svc5 loses affinity", strings.Replace(base, "sessionAffinity: ClientIP", "sessionAffinity: None", 1)},
		{"svc2 endpoint becomes local", strings.Replace(base, "endpoints: [{addresses: [10.180.0.2], nodeName: other-node}]", "endpoints: [{addresses: [10.180.0.2], nodeName: test-node}]", 1)},
		{"svc4 loses an endpoint, svc1 gains one", strings.NewReplacer(
			"- {addresses: [10.180.0.4], nodeName: other-node}\n", "",
			"endpoints: [{addresses: [10.180.0.1], nodeName: test-node}]", "endpoints: [{addresses: [10.180.0.1], nodeName: test-node}, {addresses: [10.180.0.9], nodeName: n2}]",
		).Replace(base)},
		{"svc3 deleted", strings.Replace(base, "metadata: {namespace: ns3, name: svc3}", "metadata: {namespace: ns3, name: svc3-renamed}", 1)},
		{"back to initial", base},
		{"ipMode Proxy hides svc2's LB IP, svc5 source range changes", strings.NewReplacer(
			"ingress: [{ip: 1.2.3.4}]", "ingress: [{ip: 1.2.3.4, ipMode: Proxy}]",
			`loadBalancerSourceRanges: [" 203.0.113.0/25"]`, `loadBalancerSourceRanges: [192.168.0.0/16]`,
		).Replace(base)},
	}
	nft, s := newFakeSyncer(t, upstreamConfig(t))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.SetClock(func() time.Time { return now })
	// The same steps through a model.Builder that is given the previous
	// step's object wherever the object did not change (as the daemon's
	// store does): unchanged ports are then the same *ServicePort and the
	// syncer replays what it recorded for them. Its transactions must be
	// the same as those of fresh snapshots.
	cachedNFT, cached := newFakeSyncer(t, upstreamConfig(t))
	cached.SetClock(func() time.Time { return now })
	var builder model.Builder
	var prevObjs *manifest.Objects
	var prevSnap *model.Snapshot
	for i, step := range steps {
		now = now.Add(500 * time.Millisecond)
		snap := decodeSnapshot(t, step.manifest)
		res, err := s.Sync(ctx, snap)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		objs := reuseUnchanged(t, prevObjs, step.manifest)
		prevObjs = objs
		csnap, err := builder.Build(ctx, nil, model.Input{Family: v1.IPv4Protocol, NodeName: testNodeName, Node: objs.Node(testNodeName),
			Services: objs.Services, EndpointSlices: objs.EndpointSlices})
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && !sharesPorts(prevSnap, csnap) {
			t.Errorf("%s: the builder reused no ServicePort", step.name)
		}
		prevSnap = csnap
		cres, err := cached.Sync(ctx, csnap)
		if err != nil {
			t.Fatalf("%s (builder): %v", step.name, err)
		}
		if got, want := cres.Transaction.String(), res.Transaction.String(); got != want {
			t.Errorf("%s: transaction with reused ports differs:\n%s", step.name, lineDiff(want, got))
		}
		if got, want := cachedNFT.Dump(), nft.Dump(); got != want {
			t.Errorf("%s: ruleset with reused ports differs:\n%s", step.name, lineDiff(want, got))
		}
		if res.Full != (i == 0) {
			t.Errorf("%s: full = %v", step.name, res.Full)
		}
		fresh, err := Render(ctx, nil, upstreamConfig(t), snap)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := sortTransaction(dropEmptyChains(nft.Dump())), sortTransaction(fresh.Ruleset); got != want {
			t.Errorf("%s: partial sync differs from full sync:\n%s", step.name, lineDiff(want, got))
		}
	}
}

func lineDiff(want, got string) string {
	w, g := map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(want, "\n") {
		w[l] = true
	}
	for _, l := range strings.Split(got, "\n") {
		g[l] = true
	}
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

// TestRenderOutput checks that the rendered ruleset is parseable "nft -f"
// input that round-trips, and that the transaction sets up the table.
func TestRenderOutput(t *testing.T) {
	ctx := context.Background()
	snap := loadSnapshot(t, "../testdata/upstream/overall.yaml")
	r, err := Render(ctx, nil, upstreamConfig(t), snap)
	if err != nil {
		t.Fatal(err)
	}
	nft, _ := newFakeSyncer(t, upstreamConfig(t))
	if err := nft.ParseDump(r.Ruleset); err != nil {
		t.Fatalf("ruleset is not parseable nft input: %v", err)
	}
	if got := nft.Dump(); got != r.Ruleset {
		t.Errorf("re-parsed ruleset differs:\n%s", lineDiff(r.Ruleset, got))
	}
	if !strings.Contains(r.Transaction, "add table ip kube-proxy") || !strings.Contains(r.Transaction, "delete map ip kube-proxy localhost-nodeport-reject-ports") {
		t.Errorf("transaction lacks the table setup or the cleanup of alpha objects:\n%s", r.Transaction)
	}
}

// TestTopologyChangeForcesFullSync: a new zone label changes which
// endpoints are used without changing any Service, so the sync must be full.
func TestTopologyChangeForcesFullSync(t *testing.T) {
	ctx := context.Background()
	manifest := func(zone string) string {
		return `apiVersion: v1
kind: Node
metadata: {name: test-node, labels: {topology.kubernetes.io/zone: ` + zone + `}}
---
` + yamlClusterIP("ns1", "svc1", "172.30.0.41", "p80", 80) + `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: ns1, name: svc1-1, labels: {kubernetes.io/service-name: svc1}}
addressType: IPv4
endpoints:
- {addresses: [10.0.1.1], hints: {forZones: [{name: zone-a}]}}
- {addresses: [10.0.1.2], hints: {forZones: [{name: zone-b}]}}
ports: [{name: p80, port: 80, protocol: TCP}]
`
	}
	nft, s := newFakeSyncer(t, upstreamConfig(t))
	for i, zone := range []string{"zone-a", "zone-b"} {
		res, err := s.Sync(ctx, decodeSnapshot(t, manifest(zone)))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Full {
			t.Errorf("sync %d (%s) was partial", i, zone)
		}
	}
	rules, err := nft.ListRules(ctx, "service-ULMVA6XW-ns1/svc1/tcp/p80")
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 1 || rules[0].Rule != "meta l4proto tcp dnat to 10.0.1.2:80" {
		t.Errorf("after moving to zone-b got %v", rules)
	}
}
