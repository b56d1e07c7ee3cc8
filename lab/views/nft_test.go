package views

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var webService = ServiceInfo{Namespace: "shop", Name: "web", ClusterIP: "10.96.38.171", IPs: []string{"10.96.38.171"}, Ports: []PortInfo{{Name: "http", Protocol: "tcp", Port: 80}}}

func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs (go test -update rewrites it):\n%s", path, got)
	}
}

func readDump(t *testing.T, name string) *nftRuleset {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return parseNFT(string(b))
}

func TestNFTGroups(t *testing.T) {
	for _, tc := range []struct{ dump, golden string }{
		{"nft-selector-typo-broken.txt", "groups-broken.json"},
		{"nft-selector-typo-fixed.txt", "groups-fixed.json"},
	} {
		t.Run(tc.dump, func(t *testing.T) {
			golden(t, tc.golden, nftGroups(readDump(t, tc.dump), []ServiceInfo{webService}))
		})
	}
}

func TestTracePath(t *testing.T) {
	for _, tc := range []struct {
		name, dump string
		req        PathRequest
		outcome    string
		endpoints  int
	}{
		{"pod to broken service", "nft-selector-typo-broken.txt", PathRequest{Source: "10.244.2.3", Dest: "10.96.38.171", Protocol: "tcp", Port: 80}, "reject", 0},
		{"node to broken service", "nft-selector-typo-broken.txt", PathRequest{Source: "172.29.1.3", FromNode: true, Dest: "10.96.38.171", Protocol: "tcp", Port: 80}, "reject", 0},
		{"pod to fixed service", "nft-selector-typo-fixed.txt", PathRequest{Source: "10.244.2.3", Dest: "10.96.38.171", Protocol: "tcp", Port: 80}, "dnat", 2},
		{"node to fixed service", "nft-selector-typo-fixed.txt", PathRequest{Source: "172.29.1.3", FromNode: true, Dest: "10.96.38.171", Protocol: "tcp", Port: 80}, "dnat", 2},
		{"wrong port of a ClusterIP", "nft-selector-typo-fixed.txt", PathRequest{Source: "10.244.2.3", Dest: "10.96.38.171", Protocol: "tcp", Port: 81}, "reject", 0},
		{"unallocated ClusterIP", "nft-selector-typo-fixed.txt", PathRequest{Source: "10.244.2.3", Dest: "10.96.9.9", Protocol: "tcp", Port: 80}, "drop", 0},
		{"not a Service", "nft-selector-typo-fixed.txt", PathRequest{Source: "10.244.2.3", Dest: "10.244.1.3", Protocol: "tcp", Port: 8080}, "pass", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tracePath(readDump(t, tc.dump), tc.req)
			if p.Outcome != tc.outcome || len(p.Endpoints) != tc.endpoints {
				b, _ := json.MarshalIndent(p, "", "  ")
				t.Errorf("outcome %s with %d endpoints, want %s with %d:\n%s", p.Outcome, len(p.Endpoints), tc.outcome, tc.endpoints, b)
			}
		})
	}
	golden(t, "path-fixed.json", tracePath(readDump(t, "nft-selector-typo-fixed.txt"), PathRequest{Source: "10.244.2.3", Dest: "10.96.38.171", Protocol: "tcp", Port: 80}))
	golden(t, "path-broken.json", tracePath(readDump(t, "nft-selector-typo-broken.txt"), PathRequest{Source: "10.244.2.3", Dest: "10.96.38.171", Protocol: "tcp", Port: 80}))
}

func TestTracePathIPTables(t *testing.T) {
	b, err := os.ReadFile("testdata/iptables-save.txt")
	if err != nil {
		t.Fatal(err)
	}
	save := string(b)
	for _, tc := range []struct {
		name      string
		req       PathRequest
		outcome   string
		endpoints int
	}{
		{"pod to a Service with endpoints", PathRequest{Source: "10.244.1.5", Dest: "10.96.93.51", Protocol: "tcp", Port: 80, NodeIP: "172.29.1.3"}, "dnat", 2},
		{"node to a Service with endpoints", PathRequest{Source: "172.29.1.3", FromNode: true, Dest: "10.96.93.51", Protocol: "tcp", Port: 80, NodeIP: "172.29.1.3"}, "dnat", 2},
		{"pod to a Service without endpoints", PathRequest{Source: "10.244.1.5", Dest: "10.96.72.176", Protocol: "tcp", Port: 80, NodeIP: "172.29.1.3"}, "reject", 0},
		{"node to a Service without endpoints", PathRequest{Source: "172.29.1.3", FromNode: true, Dest: "10.96.72.176", Protocol: "tcp", Port: 80, NodeIP: "172.29.1.3"}, "reject", 0},
		{"another port", PathRequest{Source: "10.244.1.5", Dest: "10.96.93.51", Protocol: "tcp", Port: 81, NodeIP: "172.29.1.3"}, "pass", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tracePathIPTables(save, tc.req)
			if p.Outcome != tc.outcome || len(p.Endpoints) != tc.endpoints {
				b, _ := json.MarshalIndent(p, "", "  ")
				t.Errorf("outcome %s with %d endpoints, want %s with %d:\n%s", p.Outcome, len(p.Endpoints), tc.outcome, tc.endpoints, b)
			}
		})
	}
	golden(t, "path-iptables.json", tracePathIPTables(save, PathRequest{Source: "10.244.1.5", Dest: "10.96.93.51", Protocol: "tcp", Port: 80, NodeIP: "172.29.1.3"}))
	golden(t, "groups-iptables.json", iptablesGroups(save, []ServiceInfo{
		{Namespace: "shop", Name: "web", ClusterIP: "10.96.93.51", Ports: []PortInfo{{Protocol: "tcp", Port: 80}}},
		{Namespace: "shop", Name: "broken", ClusterIP: "10.96.72.176", Ports: []PortInfo{{Protocol: "tcp", Port: 80}}},
	}))
}

// A Service whose ClusterIP changed under a proxier that did not sync: the
// summary says the rules are for the old address, not that the address is
// no Service's.
func TestNFTSummaryStaleAddress(t *testing.T) {
	dump := `table ip kube-proxy {
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		comment "ClusterIP, ExternalIP and LoadBalancer IP traffic"
		elements = { 10.96.38.171 . tcp . 80 comment "shop/web:http" : goto service-ULMVA6XW-shop/web/tcp/http }
	}
	chain service-ULMVA6XW-shop/web/tcp/http {
		ip daddr 10.96.38.171 tcp dport 80 ip saddr != 10.244.0.0/16 jump mark-for-masquerade
	}
}`
	for _, tc := range []struct {
		ip, want string
	}{
		{"10.96.38.171", "tcp/80: load-balanced to 0 endpoints"},
		{"10.96.99.9", "tcp/80: no rule for ClusterIP 10.96.99.9 on this node: its rules are still for 10.96.38.171, an address the Service no longer has (the proxier has not caught up)"},
	} {
		svc := ServiceInfo{Namespace: "shop", Name: "web", ClusterIP: tc.ip, Ports: []PortInfo{{Protocol: "tcp", Port: 80}}}
		if got := nftSummary(parseNFT(dump), svc); got != tc.want {
			t.Errorf("ClusterIP %s: %q, want %q", tc.ip, got, tc.want)
		}
	}
	other := ServiceInfo{Namespace: "shop", Name: "api", ClusterIP: "10.96.1.1", Ports: []PortInfo{{Protocol: "tcp", Port: 80}}}
	if got := nftSummary(parseNFT(dump), other); got != "tcp/80: no rule for ClusterIP 10.96.1.1 on this node (its proxier has not written one)" {
		t.Errorf("a Service without rules: %q", got)
	}
}
