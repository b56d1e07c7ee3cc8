package faults

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/svclab/svclab/lab/proxier/config"
	"github.com/svclab/svclab/lab/proxier/deploy"
	"github.com/svclab/svclab/lab/scenario"
)

func TestEditKubeProxyConfig(t *testing.T) {
	base := func(mode string) *kubeproxyconfig.KubeProxyConfiguration {
		return deploy.Config(deploy.Options{Mode: mode, ClusterCIDR: "10.244.0.0/16"})
	}
	for _, tc := range []struct {
		name          string
		from, mode    string
		minSync, sync time.Duration
		clusterCIDR   string
		want          string
		wantErr       string
		check         func(t *testing.T, cfg *kubeproxyconfig.KubeProxyConfiguration)
	}{
		{name: "nftables periods go to the nftables section", from: "nftables", minSync: 10 * time.Minute, sync: 10 * time.Minute, want: "nftables",
			check: func(t *testing.T, cfg *kubeproxyconfig.KubeProxyConfiguration) {
				if cfg.NFTables.MinSyncPeriod.Duration != 10*time.Minute || cfg.NFTables.SyncPeriod.Duration != 10*time.Minute || cfg.IPTables.MinSyncPeriod.Duration != 0 {
					t.Errorf("nftables %+v iptables %+v", cfg.NFTables, cfg.IPTables)
				}
			}},
		{name: "a blank mode runs as iptables and reads the iptables section", from: "nftables", mode: "blank", minSync: 2 * time.Second, want: "iptables",
			check: func(t *testing.T, cfg *kubeproxyconfig.KubeProxyConfiguration) {
				if cfg.Mode != "" || cfg.IPTables.MinSyncPeriod.Duration != 2*time.Second {
					t.Errorf("mode %q iptables %+v", cfg.Mode, cfg.IPTables)
				}
			}},
		{name: "ipvs is written but never runs", from: "nftables", mode: "ipvs", want: "",
			check: func(t *testing.T, cfg *kubeproxyconfig.KubeProxyConfiguration) {
				if cfg.Mode != "ipvs" {
					t.Errorf("mode %q", cfg.Mode)
				}
			}},
		{name: "clusterCIDR removed", from: "nftables", clusterCIDR: "blank", want: "nftables",
			check: func(t *testing.T, cfg *kubeproxyconfig.KubeProxyConfiguration) {
				if cfg.ClusterCIDR != "" || cfg.DetectLocalMode != "" && cfg.DetectLocalMode != "ClusterCIDR" {
					t.Errorf("clusterCIDR %q detectLocalMode %q", cfg.ClusterCIDR, cfg.DetectLocalMode)
				}
			}},
		{name: "clusterCIDR changed", from: "iptables", clusterCIDR: "172.16.0.0/12", want: "iptables",
			check: func(t *testing.T, cfg *kubeproxyconfig.KubeProxyConfiguration) {
				if cfg.ClusterCIDR != "172.16.0.0/12" {
					t.Errorf("clusterCIDR %q", cfg.ClusterCIDR)
				}
			}},
		{name: "minSyncPeriod above the default syncPeriod is refused", from: "nftables", minSync: 10 * time.Minute,
			wantErr: "kube-proxy would refuse the configuration the fault writes: invalid KubeProxyConfiguration: syncPeriod: must be greater than or equal to minSyncPeriod (10m0s), got 30s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base(tc.from)
			got, err := editKubeProxyConfig(cfg, kubeProxyEdit{mode: tc.mode, minSync: tc.minSync, sync: tc.sync, clusterCIDR: tc.clusterCIDR})
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("runs in %q, want %q", got, tc.want)
			}
			// What the fault writes is what kube-proxy reads back.
			text, err := config.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			back, err := config.Load(text)
			if err != nil {
				t.Fatalf("%v\n%s", err, text)
			}
			tc.check(t, back)
		})
	}
}

func TestKubeProxyConfigParams(t *testing.T) {
	f := kubeProxyConfig{spec("kube-proxy-config")}
	for _, tc := range []struct {
		params  scenario.Params
		wantErr string
	}{
		{params: scenario.Params{"minSyncPeriod": "10m", "syncPeriod": "10m"}},
		{params: scenario.Params{"mode": "blank"}},
		{params: scenario.Params{"minSyncPeriod": "ten minutes"}, wantErr: `minSyncPeriod: "ten minutes" is not a positive duration such as 10m`},
		{params: scenario.Params{"syncPeriod": "-1s"}, wantErr: `syncPeriod: "-1s" is not a positive duration`},
		{params: scenario.Params{"clusterCIDR": "blank"}},
		{params: scenario.Params{"clusterCIDR": "10.244.0.0/33"}, wantErr: `clusterCIDR: "10.244.0.0/33" is not a CIDR`},
		{params: scenario.Params{}, wantErr: "kube-proxy-config needs mode, minSyncPeriod, syncPeriod or clusterCIDR"},
	} {
		if err := f.Validate(tc.params); err != nil {
			t.Fatalf("%v: %v", tc.params, err)
		}
		_, err := f.params(tc.params)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%v: err %v, want %q", tc.params, err, tc.wantErr)
		}
	}
}

func TestExitedOnce(t *testing.T) {
	pod := func(st corev1.ContainerStatus) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{st}}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{name: "no status yet", pod: &corev1.Pod{}},
		{name: "running", pod: pod(corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})},
		{name: "exited", pod: pod(corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}), want: true},
		{name: "backing off after an exit", pod: pod(corev1.ContainerStatus{RestartCount: 1,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}), want: true},
		{name: "restarted and running", pod: pod(corev1.ContainerStatus{
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.Now()}}}), want: true},
	} {
		if got := exitedOnce(tc.pod); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
