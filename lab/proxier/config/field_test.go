package config

import (
	"fmt"
	"strings"
	"testing"
)

func TestField(t *testing.T) {
	cfg, err := Load([]byte(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: 'nftables'
nftables:
        minSyncPeriod: 1000ms
conntrack:
  maxPerCore: 0
`))
	if err != nil {
		t.Fatal(err)
	}
	SetDefaults(cfg)
	for _, tc := range []struct {
		path, want string
		found      bool
		err        string
	}{
		{"mode", "nftables", true, ""},
		{"nftables.minSyncPeriod", "1s", true, ""},
		{"nftables.syncPeriod", "30s", true, ""},
		{"conntrack.maxPerCore", "0", true, ""},
		{"clusterCIDR", "", true, ""},
		{"nftables.nope", "", false, "no field nftables.nope"},
		{"mode.x", "", false, "mode is not an object"},
		{"kind", "KubeProxyConfiguration", true, ""},
	} {
		t.Run(tc.path, func(t *testing.T) {
			v, found, err := Field(cfg, tc.path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || found != tc.found {
				t.Fatalf("found %v err %v", found, err)
			}
			if got := fmt.Sprint(v); got != tc.want {
				t.Errorf("%s = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
}
