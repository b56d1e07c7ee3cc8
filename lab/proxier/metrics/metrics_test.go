package metrics

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRegisteredPerMode(t *testing.T) {
	tests := []struct {
		mode    string
		want    []string
		notWant []string
	}{
		{
			mode: "nftables",
			want: []string{
				"kubeproxy_sync_proxy_rules_duration_seconds",
				"kubeproxy_sync_full_proxy_rules_duration_seconds",
				"kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
				"kubeproxy_conntrack_reconciler_deleted_entries_total",
				"svclab_proxier_fault_active",
			},
			notWant: []string{"kubeproxy_sync_proxy_rules_iptables_restore_failures_total"},
		},
		{
			mode: "iptables",
			want: []string{
				"kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
				"kubeproxy_sync_proxy_rules_iptables_total",
				"kubeproxy_conntrack_reconciler_sync_duration_seconds",
			},
			notWant: []string{"kubeproxy_sync_proxy_rules_nftables_sync_failures_total"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			m := New(tc.mode)
			// Vectors only show up once a child exists.
			m.SyncProxyRulesLatency.WithLabelValues("IPv4").Observe(0.01)
			m.SyncFullProxyRulesLatency.WithLabelValues("IPv4").Observe(0.01)
			m.NFTablesSyncFailures.WithLabelValues("IPv4").Inc()
			m.IPTablesRestoreFailures.WithLabelValues("IPv4").Inc()
			m.IPTablesRulesTotal.WithLabelValues("nat", "IPv4").Set(3)
			m.ConntrackDeletedEntries.WithLabelValues("IPv4").Add(2)
			m.ConntrackReconcileLatency.WithLabelValues("IPv4").Observe(0.1)
			m.FaultActive.WithLabelValues("stop-syncing").Set(0)

			rec := httptest.NewRecorder()
			m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			body, _ := io.ReadAll(rec.Body)
			text := string(body)
			for _, name := range tc.want {
				if !strings.Contains(text, "# TYPE "+name+" ") {
					t.Errorf("metric %s missing", name)
				}
			}
			for _, name := range tc.notWant {
				if strings.Contains(text, name) {
					t.Errorf("metric %s registered in %s mode", name, tc.mode)
				}
			}
			if !strings.Contains(text, `# HELP kubeproxy_sync_proxy_rules_duration_seconds [ALPHA] SyncProxyRules latency in seconds`) {
				t.Errorf("help text differs from upstream:\n%s", text)
			}
			if !strings.Contains(text, "go_goroutines") {
				t.Error("Go collector missing")
			}
		})
	}
}

func TestNFAcctMetrics(t *testing.T) {
	m := New("iptables")
	var failed []string
	counts := map[string]uint64{"ct_state_invalid_dropped_pkts": 3}
	m.RegisterNFAcct(func(name string) (uint64, error) {
		if n, ok := counts[name]; ok {
			return n, nil
		}
		return 0, errors.New("object not found")
	}, func(counter string, err error) { failed = append(failed, counter) })
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if want := "kubeproxy_iptables_ct_state_invalid_dropped_packets_total 3\n"; !strings.Contains(body, want) {
		t.Errorf("metrics lack %q", want)
	}
	if strings.Contains(body, "kubeproxy_iptables_localhost_nodeports_accepted_packets_total ") {
		t.Error("a counter that cannot be read is exported")
	}
	if len(failed) != 1 || failed[0] != "localhost_nps_accepted_pkts" {
		t.Errorf("errors reported for %v", failed)
	}
}
