package kind

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		golden, shape, mode string
		opts                RenderOptions
	}{
		{"nftables.yaml", "nftables", "", RenderOptions{Name: "lab", Workers: -1}},
		{"iptables.yaml", "iptables", "", RenderOptions{Name: "lab", Workers: 2}},
		{"three-zones.yaml", "three-zones", "", RenderOptions{Name: "zones", Workers: -1}},
		{"upstream-kube-proxy.yaml", "upstream-kube-proxy", "", RenderOptions{Name: "up", Workers: -1}},
		{"upstream-kube-proxy-iptables.yaml", "upstream-kube-proxy", "", RenderOptions{Name: "up", Workers: -1, ProxyMode: "iptables"}},
		{"nftables-cgroupv1.yaml", "nftables", "", RenderOptions{Name: "lab", Workers: 2, CgroupV1: true}},
		{"nftables-one-node.yaml", "nftables", "", RenderOptions{Name: "solo", Workers: 0}},
		{"nftables-labels.yaml", "nftables", "iptables", RenderOptions{Name: "lab", Workers: 3, NodeImage: "kindest/node:v1.37.0",
			NodeLabels: map[string]map[string]string{"lab-worker3": {"topology.kubernetes.io/zone": "zone-c"}, "lab-control-plane": {"svclab.dev/role": "cp"}}}},
		{"three-zones-scaled-down.yaml", "three-zones", "", RenderOptions{Name: "zones", Workers: 2}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			s, err := LoadShape(tc.shape, tc.mode)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := Render(s, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.golden, got)
			// What svclab gives kind is a strict, valid kind configuration.
			var c v1alpha4.Cluster
			if err := yaml.UnmarshalStrict(got, &c); err != nil {
				t.Fatalf("rendered configuration does not parse: %v", err)
			}
		})
	}
}

func TestRenderLabels(t *testing.T) {
	s, err := LoadShape("three-zones", "")
	if err != nil {
		t.Fatal(err)
	}
	_, labels, err := Render(s, RenderOptions{Name: "z", Workers: -1, NodeLabels: map[string]map[string]string{"z-worker": {"extra": "1"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"z-control-plane": {"topology.kubernetes.io/zone": "zone-a"},
		"z-worker":        {"topology.kubernetes.io/zone": "zone-a", "extra": "1"},
		"z-worker2":       {"topology.kubernetes.io/zone": "zone-b"},
		"z-worker3":       {"topology.kubernetes.io/zone": "zone-c"},
	}
	if diff := cmp.Diff(want, labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
}

func TestShapeErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, shape string
		render      *RenderOptions
		want        string
	}{
		{"unknown shape", "five-zones", nil, `no kind cluster shape "five-zones": use one of iptables, nftables, three-zones, upstream-kube-proxy`},
		{"missing file", filepath.Join(dir, "nope.yaml"), nil, "no such file"},
		{"not kind", write("pod.yaml", "apiVersion: v1\nkind: Pod\n"), nil, "is not a kind configuration"},
		{"unknown field", write("typo.yaml", "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n  lables: {a: b}\n"), nil, `unknown field "lables"`},
		{"two control planes", write("ha.yaml", "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n- role: control-plane\n"), nil, "has 2 control-plane nodes"},
		{"worker first", write("wf.yaml", "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: worker\n- role: control-plane\n"), nil, "control-plane node first"},
		{"label for a missing node", "nftables", &RenderOptions{Name: "lab", Workers: 2, NodeLabels: map[string]map[string]string{"lab-worker5": {"a": "b"}}},
			"node label for lab-worker5: the cluster's nodes are lab-control-plane, lab-worker, lab-worker2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := LoadShape(tc.shape, "")
			if err == nil && tc.render != nil {
				_, _, err = Render(s, *tc.render)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	// A file of the user's with kubeProxyMode: none runs the bundled
	// proxier; one without runs kind's kube-proxy.
	none := write("none.yaml", "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnetworking:\n  kubeProxyMode: none\n")
	if s, err := LoadShape(none, "iptables"); err != nil || s.Proxier != "iptables" {
		t.Errorf("LoadShape(none.yaml) = %+v, %v; want the bundled proxier in iptables mode", s, err)
	}
	plain := write("plain.yaml", "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\n")
	if s, err := LoadShape(plain, ""); err != nil || s.Proxier != "" {
		t.Errorf("LoadShape(plain.yaml) = %+v, %v; want kind's kube-proxy", s, err)
	}
}
