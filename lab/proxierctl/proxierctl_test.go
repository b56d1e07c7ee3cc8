package proxierctl

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/proxier/faults"
	"github.com/svclab/svclab/lab/views/viewstest"
)

func TestAddr(t *testing.T) {
	if Addr() != "127.0.0.1:10249" {
		t.Errorf("Addr() = %s", Addr())
	}
}

// Mode reads /proxyMode and refuses a mode the lab does not know;
// SetFaults posts the typed patch, only the switches it sets.
func TestModeAndFaults(t *testing.T) {
	ctx := context.Background()
	c := viewstest.New("lab", "")
	for _, tc := range []struct{ answer, want, err string }{
		{"", "nftables", ""},
		{"iptables", "iptables", ""},
		{"ipvs", "", `runs in mode "ipvs"`},
	} {
		c.SetMode(tc.answer)
		got, err := Mode(ctx, c, "lab-worker")
		if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("answer %q: %q %v", tc.answer, got, err)
		}
	}
	on := true
	if err := SetFaults(ctx, c, "lab-worker", faults.Patch{StopSyncing: &on}); err != nil {
		t.Fatal(err)
	}
	if got := c.Patches(); !slices.Equal(got, []string{`lab-worker {"stopSyncing":true}`}) {
		t.Errorf("patches %q", got)
	}
	if _, err := Mode(ctx, c, "nope"); err == nil {
		t.Error("a node that is not there answered")
	}
}

func TestLastSync(t *testing.T) {
	for _, tc := range []struct {
		name, metrics string
		want          time.Time
	}{
		{"none yet", "# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge\n", time.Time{}},
		{"zero", `kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 0` + "\n", time.Time{}},
		{"one family", `kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1.7647e+09` + "\n", time.Unix(1764700000, 0)},
		{"latest of two", "kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv4\"} 1764700000.5\n" +
			"kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv6\"} 1764700002.25\n", time.Unix(1764700002, 250_000_000)},
		{"without labels", "kubeproxy_sync_proxy_rules_last_timestamp_seconds 1764700000\n", time.Unix(1764700000, 0)},
		{"other metrics only", "kubeproxy_sync_proxy_rules_last_timestamp_seconds_total 5\nkubeproxy_sync_proxy_rules_last_queued_timestamp_seconds 1764700009\n", time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lastSync(tc.metrics); !got.Equal(tc.want) {
				t.Errorf("lastSync = %v, want %v", got, tc.want)
			}
		})
	}
	c := viewstest.New("lab", "")
	when := time.Unix(1764700000, 0)
	c.SetLastSync(when)
	if got, err := LastSync(context.Background(), c, "lab-worker"); err != nil || !got.Equal(when) {
		t.Errorf("LastSync = %v, %v; want %v", got, err, when)
	}
}
