package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestOptionsComplete(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	iptablesFile := write("iptables.conf", `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: 10.244.0.0/16
iptables:
  syncPeriod: 10s
  masqueradeAll: true
metricsBindAddress: 0.0.0.0
`)
	nftFile := write("nft.conf", `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
nftables:
  minSyncPeriod: 0s
  syncPeriod: 5s
healthzBindAddress: 127.0.0.1:20256
`)
	badKind := write("bad.conf", "apiVersion: v1\nkind: ConfigMap\n")
	noMode := write("nomode.conf", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\niptables:\n  syncPeriod: 12s\nnftables:\n  syncPeriod: 5s\n")
	unknownField := write("unknown.conf", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmodee: iptables\n")
	ipvs := write("ipvs.conf", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\nipvs:\n  syncPeriod: 20s\n")
	slowMin := write("slowmin.conf", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\nnftables:\n  minSyncPeriod: 10m\n")
	slow := write("slow.conf", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\nnftables:\n  minSyncPeriod: 10m\n  syncPeriod: 10m\n")
	slowOther := write("slowother.conf", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\niptables:\n  minSyncPeriod: 10m\n  syncPeriod: 10m\n")

	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, r *Resolved)
	}{
		{
			name: "flags only: defaults",
			args: nil,
			check: func(t *testing.T, r *Resolved) {
				// An empty mode is iptables, as upstream on Linux.
				if r.Mode != ModeIPTables || r.SyncPeriod != 30*time.Second || r.MinSyncPeriod != time.Second ||
					r.HealthzBindAddress != "0.0.0.0:10256" || r.MetricsBindAddress != "127.0.0.1:10249" || r.MasqueradeBit != 14 {
					t.Errorf("%+v", r)
				}
			},
		},
		{
			name: "flags only: kube-proxy flag names",
			args: []string{"--proxy-mode=iptables", "--cluster-cidr=10.244.0.0/16", "--masquerade-all", "--nodeport-addresses=primary",
				"--healthz-bind-address=127.0.0.1:30256", "--metrics-bind-address=127.0.0.1:30249", "--hostname-override=lab-worker",
				"--iptables-sync-period=7s", "--iptables-min-sync-period=0", "--v=4", "--kubeconfig=/tmp/kc"},
			check: func(t *testing.T, r *Resolved) {
				if r.Mode != ModeIPTables || r.ClusterCIDRs[0] != "10.244.0.0/16" || !r.MasqueradeAll || r.NodePortAddresses[0] != "primary" ||
					r.HealthzBindAddress != "127.0.0.1:30256" || r.MetricsBindAddress != "127.0.0.1:30249" || r.HostnameOverride != "lab-worker" ||
					r.SyncPeriod != 7*time.Second || r.MinSyncPeriod != 0 || r.Verbosity != 4 || r.Kubeconfig != "/tmp/kc" || !r.LocalhostNodePorts {
					t.Errorf("%+v", r)
				}
			},
		},
		{
			name: "config file wins over flags, except hostname-override and v",
			args: []string{"--config=" + iptablesFile, "--proxy-mode=nftables", "--cluster-cidr=10.0.0.0/8", "--hostname-override=n1", "--v=5"},
			check: func(t *testing.T, r *Resolved) {
				if r.Mode != ModeIPTables || r.ClusterCIDRs[0] != "10.244.0.0/16" || r.SyncPeriod != 10*time.Second || !r.MasqueradeAll ||
					r.MetricsBindAddress != "0.0.0.0:10249" || r.HostnameOverride != "n1" || r.Verbosity != 5 {
					t.Errorf("%+v", r)
				}
			},
		},
		{
			name: "nftables section of the file",
			args: []string{"--config=" + nftFile},
			check: func(t *testing.T, r *Resolved) {
				if r.Mode != ModeNFTables || r.SyncPeriod != 5*time.Second || r.MinSyncPeriod != time.Second || r.HealthzBindAddress != "127.0.0.1:20256" {
					// minSyncPeriod 0s is defaulted to 1s, as upstream.
					t.Errorf("%+v", r)
				}
			},
		},
		{
			name: "a file without a mode: iptables, its section's periods",
			args: []string{"--config=" + noMode},
			check: func(t *testing.T, r *Resolved) {
				if r.Mode != ModeIPTables || r.SyncPeriod != 12*time.Second {
					t.Errorf("%+v", r)
				}
			},
		},
		{name: "wrong kind", args: []string{"--config=" + badKind}, wantErr: "want apiVersion kubeproxy.config.k8s.io/v1alpha1"},
		{name: "unknown field", args: []string{"--config=" + unknownField}, wantErr: "unknown field"},
		{
			name: "ipvs is valid configuration, with its own section's periods",
			args: []string{"--config=" + ipvs},
			check: func(t *testing.T, r *Resolved) {
				if r.Mode != ModeIPVS || r.SyncPeriod != 20*time.Second {
					t.Errorf("%+v", r)
				}
			},
		},
		{name: "unknown mode flag", args: []string{"--proxy-mode=userspace"}, wantErr: `unknown proxy mode "userspace": must be iptables, ipvs, nftables or blank`},
		{name: "minSyncPeriod above syncPeriod", args: []string{"--config=" + slowMin}, wantErr: "syncPeriod: must be greater than or equal to minSyncPeriod (10m0s), got 30s"},
		{
			name: "minSyncPeriod raised together with syncPeriod",
			args: []string{"--config=" + slow},
			check: func(t *testing.T, r *Resolved) {
				if r.Mode != ModeNFTables || r.MinSyncPeriod != 10*time.Minute || r.SyncPeriod != 10*time.Minute {
					t.Errorf("%+v", r)
				}
			},
		},
		{
			name: "the other mode's section does not count",
			args: []string{"--config=" + slowOther},
			check: func(t *testing.T, r *Resolved) {
				if r.Mode != ModeNFTables || r.MinSyncPeriod != time.Second || r.SyncPeriod != 30*time.Second {
					t.Errorf("%+v", r)
				}
			},
		},
		{name: "bad cluster cidr", args: []string{"--cluster-cidr=10.0.0.0/33"}, wantErr: "clusterCIDR"},
		{name: "missing file", args: []string{"--config=" + filepath.Join(dir, "nope")}, wantErr: "no such file"},
		{name: "bad metrics address", args: []string{"--metrics-bind-address=localhost:x"}, wantErr: "metricsBindAddress"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o := NewOptions()
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			cfg, err := o.Complete(fs)
			var r *Resolved
			if err == nil {
				r, err = Resolve(cfg)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, r)
		})
	}
}

func TestWriteDefaultsRoundTrip(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o := NewOptions()
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--proxy-mode=iptables"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.Complete(fs)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "out.conf")
	if err := WriteDefaults(p, cfg); err != nil {
		t.Fatal(err)
	}
	back, err := LoadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Resolve(back)
	if err != nil {
		t.Fatal(err)
	}
	if r.Mode != ModeIPTables || r.SyncPeriod != 30*time.Second {
		t.Errorf("%+v", r)
	}
}
