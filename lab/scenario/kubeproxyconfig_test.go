package scenario

import (
	"strings"
	"testing"
)

func TestKubeProxyConfigJudge(t *testing.T) {
	for _, tc := range []struct {
		name   string
		check  KubeProxyConfigCheck
		v      any
		found  bool
		want   bool
		errHas string
	}{
		{"a duration at most", KubeProxyConfigCheck{"nftables.minSyncPeriod", OpAtMost, "1s"}, "1s", true, true, ""},
		{"1000ms is 1s", KubeProxyConfigCheck{"nftables.minSyncPeriod", OpEquals, "1000ms"}, "1s", true, true, ""},
		{"10m is over 1s", KubeProxyConfigCheck{"nftables.minSyncPeriod", OpAtMost, "1s"}, "10m0s", true, false, ""},
		{"zero is at most", KubeProxyConfigCheck{"nftables.minSyncPeriod", OpAtMost, "1s"}, "0s", true, true, ""},
		{"at least", KubeProxyConfigCheck{"iptables.syncPeriod", OpAtLeast, "30s"}, "1m0s", true, true, ""},
		{"a number", KubeProxyConfigCheck{"conntrack.maxPerCore", OpAtLeast, "32768"}, float64(131072), true, true, ""},
		{"a number 0", KubeProxyConfigCheck{"conntrack.maxPerCore", OpEquals, "0"}, float64(0), true, true, ""},
		{"text", KubeProxyConfigCheck{"mode", OpEquals, "nftables"}, "nftables", true, true, ""},
		{"other text", KubeProxyConfigCheck{"mode", OpEquals, "nftables"}, "iptables", true, false, ""},
		{"unset is empty", KubeProxyConfigCheck{"mode", OpEquals, "nftables"}, nil, false, false, ""},
		{"unset not equal", KubeProxyConfigCheck{"mode", OpNotEquals, "ipvs"}, nil, false, true, ""},
		{"text cannot be at most", KubeProxyConfigCheck{"mode", OpAtMost, "1s"}, "nftables", true, false, "neither a duration nor a number"},
		{"a duration against text", KubeProxyConfigCheck{"nftables.minSyncPeriod", OpEquals, "soon"}, "1s", true, false, "is a duration"},
		{"an object", KubeProxyConfigCheck{"nftables", OpEquals, "x"}, map[string]any{}, true, false, "not a single value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, _, err := tc.check.Judge(tc.v, tc.found)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Errorf("err %v, want %q", err, tc.errHas)
				}
				return
			}
			if err != nil || ok != tc.want {
				t.Errorf("Judge = %v, %v; want %v", ok, err, tc.want)
			}
		})
	}
}
