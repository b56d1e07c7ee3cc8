package iptables

import (
	"net"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/proxier/model"
)

// TestConfigVariants renders the fact-sheet demo under several node
// configurations and keeps the results as golden files; the assertions
// below pin the parts that differ between the variants.
func TestConfigVariants(t *testing.T) {
	demo := readFile(t, "../testdata/demo.yaml")
	primary, err := model.NewNodePortAddresses(v1.IPv4Protocol, []string{"primary"}, net.ParseIP(testNodeIP))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		mutate  func(*Config)
		want    []string
		notWant []string
	}{{
		name:   "default",
		mutate: func(c *Config) { c.MasqueradeMark = ""; c.NFAcct = false },
		want: []string{
			"-A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000",
			`-m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`,
			"-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP",
		},
		notWant: []string{"nfacct"},
	}, {
		name:   "masquerade-all",
		mutate: func(c *Config) { c.MasqueradeAll = true },
		want:   []string{`-A KUBE-SVC-XRY76EGRC3BSCIIJ -m comment --comment "demo/web:http cluster IP" -m tcp -p tcp -d 172.30.0.10 --dport 80 -j KUBE-MARK-MASQ`},
	}, {
		name:    "nodeport-primary",
		mutate:  func(c *Config) { c.NodePortAddresses = primary },
		want:    []string{`-d 192.168.0.2 -j KUBE-NODEPORTS`},
		notWant: []string{"KUBE-FIREWALL", "127.0.0.0/8 --dport"},
	}, {
		name:    "tcp-be-liberal",
		mutate:  func(c *Config) { c.ConntrackTCPBeLiberal = true },
		notWant: []string{"--ctstate INVALID"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := upstreamConfig()
			tc.mutate(&cfg)
			res := render(t, cfg, decodeSnapshot(t, "demo.yaml", demo), Options{})
			for _, w := range tc.want {
				if !strings.Contains(res.Restore, w) {
					t.Errorf("missing %q", w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(res.Restore, w) {
					t.Errorf("unexpected %q", w)
				}
			}
			golden(t, "demo-"+tc.name+".iptables", res.Restore)
		})
	}
}
