package grade

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/lab/scenario"
)

// The configuration is judged as kube-proxy reads it: every spelling
// kube-proxy accepts passes, a text that only looks right does not.
func TestKubeProxyConfig(t *testing.T) {
	const head = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
	minSync := &scenario.KubeProxyConfigCheck{Field: "nftables.minSyncPeriod", Op: scenario.OpAtMost, Value: "1s"}
	mode := &scenario.KubeProxyConfigCheck{Field: "mode", Op: scenario.OpEquals, Value: "nftables"}
	for _, tc := range []struct {
		name   string
		conf   string // "" for no ConfigMap
		check  *scenario.KubeProxyConfigCheck
		pass   bool
		detail string
	}{
		{"1s", head + "nftables:\n  minSyncPeriod: 1s\n", minSync, true, `nftables.minSyncPeriod is "1s"`},
		{"1000ms", head + "nftables:\n  minSyncPeriod: 1000ms\n", minSync, true, ""},
		{"quoted, indented deeper", head + "nftables:\n        minSyncPeriod: \"500ms\"\n", minSync, true, ""},
		{"left to the default", head + "mode: nftables\n", minSync, true, `"1s"`},
		{"10m", head + "nftables:\n  minSyncPeriod: 10m\n", minSync, false, `nftables.minSyncPeriod is "10m0s" in config.conf of the kube-proxy ConfigMap, as kube-proxy reads it; expected at most 1s`},
		// The regular expression this check replaced passed this one.
		{"the iptables section's field", head + "iptables:\n  minSyncPeriod: 1s\nnftables:\n  minSyncPeriod: 10m\n", minSync, false, "10m0s"},
		{"a field kube-proxy does not know", head + "nftables:\n  minSyncPeriode: 1s\n", minSync, false, "kube-proxy cannot read config.conf"},
		{"mode in single quotes", head + "mode: 'nftables'\n", mode, true, ""},
		{"mode unset", head, mode, false, "mode is not set"},
		{"no ConfigMap", "", mode, false, "there is no ConfigMap kube-system/kube-proxy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g *Grader
			if tc.conf == "" {
				g = newGrader(nil, nil)
			} else {
				g = newGrader(nil, nil, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"}, Data: map[string]string{"config.conf": tc.conf}})
			}
			c := &scenario.Check{ID: "c", Description: "d", Weight: 1, KubeProxyConfig: tc.check}
			r := g.Check(context.Background(), c, nil)
			if r.Passed != tc.pass || r.Error != "" || !strings.Contains(r.Full(), tc.detail) {
				t.Errorf("passed=%v error=%q detail=%q, want passed=%v and %q", r.Passed, r.Error, r.Full(), tc.pass, tc.detail)
			}
		})
	}
}
