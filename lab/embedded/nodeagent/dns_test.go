//go:build linux

package nodeagent

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Pod's resolv.conf follows the kubelet's rules (pkg/kubelet/network/
// dns: GetPodDNS and its limits, in the container runtime's form).
func TestDNSFor(t *testing.T) {
	val := func(s string) *string { return &s }
	pod := func(policy corev1.DNSPolicy, hostNet bool, dc *corev1.PodDNSConfig) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop"},
			Spec: corev1.PodSpec{DNSPolicy: policy, HostNetwork: hostNet, DNSConfig: dc}}
	}
	const cluster = "search shop.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"
	var many, long []string
	for i := range 40 {
		many = append(many, fmt.Sprintf("s%d.example", i))
	}
	for i := range 12 {
		long = append(long, fmt.Sprintf("%d%s.example", i, strings.Repeat("x", 240)))
	}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		want    string
		warning string
	}{
		{"ClusterFirst", pod("", false, nil), cluster, ""},
		{"ClusterFirst on the host's network is Default", pod(corev1.DNSClusterFirst, true, nil), "search .\nnameserver 127.0.0.1\n", ""},
		{"ClusterFirstWithHostNet", pod(corev1.DNSClusterFirstWithHostNet, true, nil), cluster, ""},
		{"Default", pod(corev1.DNSDefault, false, nil), "search .\nnameserver 127.0.0.1\n", ""},
		{"None with its dnsConfig", pod(corev1.DNSNone, false, &corev1.PodDNSConfig{Nameservers: []string{"1.2.3.4"}, Searches: []string{"a.b", "."},
			Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: val("2")}, {Name: "edns0"}}}),
			"search a.b .\nnameserver 1.2.3.4\noptions ndots:2 edns0\n", ""},
		// dnsConfig is merged into the cluster's: one search line (a
		// second one would replace the cluster's paths), an option of
		// the same name replaced.
		{"ClusterFirst with dnsConfig", pod("", false, &corev1.PodDNSConfig{Nameservers: []string{"10.96.0.10", "1.1.1.1"},
			Searches: []string{"my_ns.example", "svc.cluster.local"}, Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: val("1")}, {Name: "single-request"}}}),
			"search shop.svc.cluster.local svc.cluster.local cluster.local my_ns.example\nnameserver 10.96.0.10\nnameserver 1.1.1.1\noptions ndots:1 single-request\n", ""},
		{"more than 3 nameservers", pod("", false, &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "2.2.2.2", "3.3.3.3"}}),
			"search shop.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\nnameserver 1.1.1.1\nnameserver 2.2.2.2\noptions ndots:5\n",
			"Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 10.96.0.10 1.1.1.1 2.2.2.2"},
		{"more than 32 search paths", pod(corev1.DNSNone, false, &corev1.PodDNSConfig{Searches: many}),
			"search " + strings.Join(many[:32], " ") + "\n", "Search Line limits were exceeded"},
		{"a search line over 2048 characters", pod(corev1.DNSNone, false, &corev1.PodDNSConfig{Searches: long}),
			"search " + strings.Join(long[:8], " ") + "\n", "Search Line limits were exceeded"},
		{"a search path longer than a DNS name", pod(corev1.DNSNone, false, &corev1.PodDNSConfig{Searches: []string{strings.Repeat("y", 254), "ok.example"}}),
			"search ok.example\n", "Search Line limits were exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := dnsFor(tc.pod, "10.96.0.10", "cluster.local")
			if got := d.resolvConf(); got != tc.want {
				t.Errorf("resolv.conf:\n%s\nwant:\n%s", got, tc.want)
			}
			w := strings.Join(d.warnings, "\n")
			if (tc.warning == "") != (w == "") || !strings.Contains(w, tc.warning) {
				t.Errorf("warnings %q, want %q", w, tc.warning)
			}
		})
	}
}
