//go:build linux

package nftables

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// yamlClusterIP renders a ClusterIP Service with one TCP port.
func yamlClusterIP(ns, name, ip, portName string, port int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {namespace: %s, name: %s}
spec:
  clusterIP: %s
  ports: [{name: %s, port: %d, protocol: TCP}]
---
`, ns, name, ip, portName, port)
}

// yamlSlice renders an EndpointSlice with local endpoints on test-node.
func yamlSlice(ns, svc, portName string, port int, ips ...string) string {
	var eps []string
	for _, ip := range ips {
		eps = append(eps, fmt.Sprintf("{addresses: [%s], nodeName: %s}", ip, testNodeName))
	}
	return fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: %s, name: %s-1, labels: {kubernetes.io/service-name: %s}}
addressType: IPv4
endpoints: [%s]
ports: [{name: %s, port: %d, protocol: TCP}]
---
`, ns, svc, svc, strings.Join(eps, ", "), portName, port)
}

// TestSyncProxyRulesRepeated transcribes upstream's test of the same name:
// a sequence of full and partial syncs, checking the resulting ruleset and
// the size of each (partial) transaction.
func TestSyncProxyRulesRepeated(t *testing.T) {
	ctx := context.Background()
	nft, s := newFakeSyncer(t, upstreamConfig(t))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.SetClock(func() time.Time { return now })
	base := readFile(t, "testdata/upstream/base.nft")

	svc1 := yamlClusterIP("ns1", "svc1", "172.30.0.41", "p80", 80)
	svc2 := yamlClusterIP("ns2", "svc2", "172.30.0.42", "p8080", 8080)
	svc3 := yamlClusterIP("ns3", "svc3", "172.30.0.43", "p80", 80)
	svc4 := yamlClusterIP("ns4", "svc4", "172.30.0.44", "p80", 80)
	eps1 := yamlSlice("ns1", "svc1", "p80", 80, "10.0.1.1")
	eps2 := yamlSlice("ns2", "svc2", "p8080", 8080, "10.0.2.1")
	eps3 := yamlSlice("ns3", "svc3", "p80", 80, "10.0.3.1")
	eps3b := yamlSlice("ns3", "svc3", "p80", 80, "10.0.3.2")
	eps3c := yamlSlice("ns3", "svc3", "p80", 80, "10.0.3.2", "10.0.3.3")
	eps3empty := yamlSlice("ns3", "svc3", "p80", 80)
	eps4 := yamlSlice("ns4", "svc4", "p80", 80, "10.0.4.1")

	const (
		svc1Rules = `
add element ip kube-proxy cluster-ips { 172.30.0.41 }
add element ip kube-proxy service-ips { 172.30.0.41 . tcp . 80 : goto service-ULMVA6XW-ns1/svc1/tcp/p80 }
add element ip kube-proxy hairpin-connections { 10.0.1.1 . 10.0.1.1 . tcp . 80 }
add chain ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80
add rule ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 meta l4proto tcp dnat to 10.0.1.1:80
`
		svc2Rules = `
add element ip kube-proxy cluster-ips { 172.30.0.42 }
add element ip kube-proxy service-ips { 172.30.0.42 . tcp . 8080 : goto service-MHHHYRWA-ns2/svc2/tcp/p8080 }
add element ip kube-proxy hairpin-connections { 10.0.2.1 . 10.0.2.1 . tcp . 8080 }
add chain ip kube-proxy service-MHHHYRWA-ns2/svc2/tcp/p8080
add rule ip kube-proxy service-MHHHYRWA-ns2/svc2/tcp/p8080 meta l4proto tcp dnat to 10.0.2.1:8080
`
		svc3Rules = `
add element ip kube-proxy cluster-ips { 172.30.0.43 }
add element ip kube-proxy service-ips { 172.30.0.43 . tcp . 80 : goto service-4AT6LBPK-ns3/svc3/tcp/p80 }
add element ip kube-proxy hairpin-connections { 10.0.3.1 . 10.0.3.1 . tcp . 80 }
add chain ip kube-proxy service-4AT6LBPK-ns3/svc3/tcp/p80
add rule ip kube-proxy service-4AT6LBPK-ns3/svc3/tcp/p80 meta l4proto tcp dnat to 10.0.3.1:80
`
		svc3bRules = `
add element ip kube-proxy cluster-ips { 172.30.0.43 }
add element ip kube-proxy service-ips { 172.30.0.43 . tcp . 80 : goto service-4AT6LBPK-ns3/svc3/tcp/p80 }
add element ip kube-proxy hairpin-connections { 10.0.3.2 . 10.0.3.2 . tcp . 80 }
add chain ip kube-proxy service-4AT6LBPK-ns3/svc3/tcp/p80
add rule ip kube-proxy service-4AT6LBPK-ns3/svc3/tcp/p80 meta l4proto tcp dnat to 10.0.3.2:80
`
		svc3cRules = `
add element ip kube-proxy cluster-ips { 172.30.0.43 }
add element ip kube-proxy service-ips { 172.30.0.43 . tcp . 80 : goto service-4AT6LBPK-ns3/svc3/tcp/p80 }
add element ip kube-proxy hairpin-connections { 10.0.3.2 . 10.0.3.2 . tcp . 80 }
add element ip kube-proxy hairpin-connections { 10.0.3.3 . 10.0.3.3 . tcp . 80 }
add chain ip kube-proxy service-4AT6LBPK-ns3/svc3/tcp/p80
add rule ip kube-proxy service-4AT6LBPK-ns3/svc3/tcp/p80 meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.0.3.2 . 80 , 1 : 10.0.3.3 . 80 }
`
		svc3EmptyRules = `
add element ip kube-proxy cluster-ips { 172.30.0.43 }
add element ip kube-proxy no-endpoint-services { 172.30.0.43 . tcp . 80 comment "ns3/svc3:p80" : goto reject-chain }
add chain ip kube-proxy service-4AT6LBPK-ns3/svc3/tcp/p80
`
		svc4NoEndpointsRules = `
add element ip kube-proxy cluster-ips { 172.30.0.44 }
add element ip kube-proxy no-endpoint-services { 172.30.0.44 . tcp . 80 comment "ns4/svc4:p80" : goto reject-chain }
`
		svc4Rules = `
add element ip kube-proxy cluster-ips { 172.30.0.44 }
add element ip kube-proxy service-ips { 172.30.0.44 . tcp . 80 : goto service-LAUZTJTB-ns4/svc4/tcp/p80 }
add element ip kube-proxy hairpin-connections { 10.0.4.1 . 10.0.4.1 . tcp . 80 }
add chain ip kube-proxy service-LAUZTJTB-ns4/svc4/tcp/p80
add rule ip kube-proxy service-LAUZTJTB-ns4/svc4/tcp/p80 meta l4proto tcp dnat to 10.0.4.1:80
`
		svc2FlushedRules = "add chain ip kube-proxy service-MHHHYRWA-ns2/svc2/tcp/p8080\n"
	)

	steps := []struct {
		name       string
		manifest   []string
		age        bool // let more than a second pass before the sync
		full       bool
		want       []string
		wantOps    int // -1: do not check
		wantStale  []string
		wantDelete []string
	}{{
		name:     "initial full sync",
		manifest: []string{svc1, svc2, eps1, eps2},
		full:     true,
		want:     []string{svc1Rules, svc2Rules},
		wantOps:  -1,
	}, {
		name:     "add a service and its endpoints",
		manifest: []string{svc1, svc2, svc3, eps1, eps2, eps3},
		want:     []string{svc1Rules, svc2Rules, svc3Rules},
		wantOps:  3 + 3, // 1 element each in cluster-ips, service-ips, hairpin-connections; add+flush chain, 1 rule
	}, {
		name:      "delete a service: its chain is flushed, not deleted",
		manifest:  []string{svc1, svc3, eps1, eps2, eps3},
		want:      []string{svc1Rules, svc3Rules, svc2FlushedRules},
		wantOps:   3 + 1, // delete 3 elements, flush the chain
		wantStale: []string{"service-MHHHYRWA-ns2/svc2/tcp/p8080"},
	}, {
		name:       "after a second the stale chain is deleted in its own transaction",
		manifest:   []string{svc1, svc3, eps1, eps2, eps3},
		age:        true,
		want:       []string{svc1Rules, svc3Rules},
		wantOps:    0,
		wantDelete: []string{"service-MHHHYRWA-ns2/svc2/tcp/p8080"},
	}, {
		name:     "add a service without endpoints",
		manifest: []string{svc1, svc3, svc4, eps1, eps3},
		want:     []string{svc1Rules, svc3Rules, svc4NoEndpointsRules},
		wantOps:  2,
	}, {
		name:     "add its endpoints",
		manifest: []string{svc1, svc3, svc4, eps1, eps3, eps4},
		want:     []string{svc1Rules, svc3Rules, svc4Rules},
		wantOps:  2 + 1 + 3,
	}, {
		name:     "change an endpoint",
		manifest: []string{svc1, svc3, svc4, eps1, eps3b, eps4},
		want:     []string{svc1Rules, svc3bRules, svc4Rules},
		wantOps:  2 + 3,
	}, {
		name:     "add an endpoint",
		manifest: []string{svc1, svc3, svc4, eps1, eps3c, eps4},
		age:      true,
		want:     []string{svc1Rules, svc3cRules, svc4Rules},
		wantOps:  1 + 3,
	}, {
		name:      "empty a service's endpoints: its chain is flushed",
		manifest:  []string{svc1, svc3, svc4, eps1, eps3empty, eps4},
		want:      []string{svc1Rules, svc3EmptyRules, svc4Rules},
		wantOps:   2 + 2 + 1,
		wantStale: []string{"service-4AT6LBPK-ns3/svc3/tcp/p80"},
	}, {
		name:     "restore them at once: the chain is rewritten and no longer stale",
		manifest: []string{svc1, svc3, svc4, eps1, eps3c, eps4},
		want:     []string{svc1Rules, svc3cRules, svc4Rules},
		wantOps:  2 + 2 + 3,
	}, {
		name:      "empty them again",
		manifest:  []string{svc1, svc3, svc4, eps1, eps3empty, eps4},
		want:      []string{svc1Rules, svc3EmptyRules, svc4Rules},
		wantOps:   -1,
		wantStale: []string{"service-4AT6LBPK-ns3/svc3/tcp/p80"},
	}, {
		name:       "restore them after the chain aged: deleted, then recreated",
		manifest:   []string{svc1, svc3, svc4, eps1, eps3c, eps4},
		age:        true,
		want:       []string{svc1Rules, svc3cRules, svc4Rules},
		wantOps:    -1,
		wantDelete: []string{"service-4AT6LBPK-ns3/svc3/tcp/p80"},
	}, {
		name:     "no changes: empty transaction",
		manifest: []string{svc1, svc3, svc4, eps1, eps3c, eps4},
		want:     []string{svc1Rules, svc3cRules, svc4Rules},
		wantOps:  0,
	}}

	for _, step := range steps {
		if step.age {
			now = now.Add(2 * time.Second)
		}
		snap := decodeSnapshot(t, strings.Join(step.manifest, ""))
		res, err := s.Sync(ctx, snap)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if res.Full != step.full {
			t.Errorf("%s: full = %v, want %v", step.name, res.Full, step.full)
		}
		assertDumpEqual(t, base+strings.Join(step.want, ""), nft.Dump())
		if step.wantOps >= 0 && nft.LastTransaction.NumOperations() != step.wantOps {
			t.Errorf("%s: transaction has %d operations, want %d:\n%s", step.name, nft.LastTransaction.NumOperations(), step.wantOps, nft.LastTransaction)
		}
		if !slices.Equal(res.StaleChainsFlushed, step.wantStale) {
			t.Errorf("%s: flushed stale chains %v, want %v", step.name, res.StaleChainsFlushed, step.wantStale)
		}
		if !slices.Equal(res.StaleChainsDeleted, step.wantDelete) {
			t.Errorf("%s: deleted stale chains %v, want %v", step.name, res.StaleChainsDeleted, step.wantDelete)
		}
	}
}
