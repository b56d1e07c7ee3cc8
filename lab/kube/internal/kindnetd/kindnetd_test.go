package kindnetd

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type fakeRoutes struct{ routes map[string]string }

func (f *fakeRoutes) Ensure(dst *net.IPNet, gw net.IP) error {
	f.routes[dst.String()] = gw.String()
	return nil
}

func node(name, ip, cidr string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
	}
	if cidr != "" {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = cidr, []string{cidr}
	}
	return n
}

func TestReconcile(t *testing.T) {
	for _, tc := range []struct {
		name       string
		nodes      []corev1.Node
		wantRoutes map[string]string
		wantCIDR   string // in the CNI configuration; "" when none is written
	}{
		{name: "own node and two others",
			nodes:      []corev1.Node{node("cp", "172.18.0.2", "10.244.0.0/24"), node("w1", "172.18.0.3", "10.244.1.0/24"), node("w2", "172.18.0.4", "10.244.2.0/24")},
			wantRoutes: map[string]string{"10.244.0.0/24": "172.18.0.2", "10.244.2.0/24": "172.18.0.4"}, wantCIDR: "10.244.1.0/24"},
		{name: "own node has no pod CIDR yet",
			nodes:      []corev1.Node{node("cp", "172.18.0.2", "10.244.0.0/24"), node("w1", "172.18.0.3", "")},
			wantRoutes: map[string]string{"10.244.0.0/24": "172.18.0.2"}},
		{name: "a node without an address is skipped",
			nodes:      []corev1.Node{node("cp", "", "10.244.0.0/24"), node("w1", "172.18.0.3", "10.244.1.0/24")},
			wantRoutes: map[string]string{}, wantCIDR: "10.244.1.0/24"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			routes := &fakeRoutes{routes: map[string]string{}}
			path := filepath.Join(t.TempDir(), "net.d", "10-kindnet.conflist")
			r := &Reconciler{HostIP: "172.18.0.3", MTU: 1500, Routes: routes, ConfigPath: path}
			if err := r.Reconcile(tc.nodes); err != nil {
				t.Fatal(err)
			}
			if len(routes.routes) != len(tc.wantRoutes) {
				t.Errorf("routes %v, want %v", routes.routes, tc.wantRoutes)
			}
			for dst, gw := range tc.wantRoutes {
				if routes.routes[dst] != gw {
					t.Errorf("route to %s via %q, want %s", dst, routes.routes[dst], gw)
				}
			}
			data, err := os.ReadFile(path)
			if tc.wantCIDR == "" {
				if err == nil {
					t.Errorf("a CNI configuration was written:\n%s", data)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var conf struct {
				Name    string `json:"name"`
				Plugins []struct {
					Type string `json:"type"`
					MTU  int    `json:"mtu"`
					IPAM struct {
						Type   string                `json:"type"`
						Ranges [][]map[string]string `json:"ranges"`
					} `json:"ipam"`
				} `json:"plugins"`
			}
			if err := json.Unmarshal(data, &conf); err != nil {
				t.Fatal(err)
			}
			if len(conf.Plugins) != 2 || conf.Plugins[0].Type != "ptp" || conf.Plugins[1].Type != "portmap" || conf.Plugins[0].MTU != 1500 ||
				conf.Plugins[0].IPAM.Type != "host-local" || conf.Plugins[0].IPAM.Ranges[0][0]["subnet"] != tc.wantCIDR {
				t.Errorf("CNI configuration:\n%s", data)
			}
			if strings.Contains(string(data), `"ipMasq": true`) {
				t.Errorf("masquerades:\n%s", data)
			}
		})
	}
}
