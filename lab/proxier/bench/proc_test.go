package bench

import (
	"strings"
	"testing"
)

func TestParseMetrics(t *testing.T) {
	s, err := parseMetrics(strings.NewReader(`# HELP kubeproxy_sync_full_proxy_rules_duration_seconds [ALPHA] SyncProxyRules latency in seconds for full resyncs
kubeproxy_sync_full_proxy_rules_duration_seconds_sum{ip_family="IPv4"} 2.5
kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"} 1
kubeproxy_sync_full_proxy_rules_duration_seconds_sum{ip_family="IPv6"} 0.01
kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv6"} 1
kubeproxy_sync_proxy_rules_iptables_total{ip_family="IPv4",table="nat"} 10
kubeproxy_sync_proxy_rules_iptables_total{ip_family="IPv4",table="filter"} 5
go_goroutines 12
`))
	if err != nil {
		t.Fatal(err)
	}
	// IPv6 (upstream's second proxier) is left out; label sets add up.
	if got := s.Sum(metricFull) / s.Count(metricFull); got != 2.5 {
		t.Errorf("full sync mean = %v, want 2.5", got)
	}
	if got := s["kubeproxy_sync_proxy_rules_iptables_total"]; got != 15 {
		t.Errorf("iptables rules = %v, want 15", got)
	}
	if _, ok := s["go_goroutines"]; ok {
		t.Error("non-kubeproxy metric kept")
	}
}
