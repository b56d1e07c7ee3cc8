package kindconfigs

import (
	"io/fs"
	"strings"
	"testing"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"
)

// Every file is a shape and every shape a valid kind configuration with
// kind's (and the embedded backend's) network layout.
func TestShapes(t *testing.T) {
	files, err := fs.Glob(FS, "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(Shapes) {
		t.Errorf("%d files for %d shapes: %v", len(files), len(Shapes), files)
	}
	for _, s := range Shapes {
		t.Run(s.Name, func(t *testing.T) {
			data, err := s.Config()
			if err != nil {
				t.Fatal(err)
			}
			var c v1alpha4.Cluster
			if err := yaml.UnmarshalStrict(data, &c); err != nil {
				t.Fatalf("%s: %v", s.File(), err)
			}
			if c.Kind != "Cluster" || c.APIVersion != "kind.x-k8s.io/v1alpha4" {
				t.Errorf("kind %q apiVersion %q", c.Kind, c.APIVersion)
			}
			if c.Networking.PodSubnet != "10.244.0.0/16" || c.Networking.ServiceSubnet != "10.96.0.0/16" {
				t.Errorf("networking %+v: want kind's defaults", c.Networking)
			}
			wantMode := v1alpha4.ProxyMode("none")
			if s.Proxier == "" {
				wantMode = v1alpha4.NFTablesProxyMode
			}
			if c.Networking.KubeProxyMode != wantMode {
				t.Errorf("kubeProxyMode %q, want %q", c.Networking.KubeProxyMode, wantMode)
			}
			if len(c.Nodes) < 3 || c.Nodes[0].Role != v1alpha4.ControlPlaneRole {
				t.Errorf("nodes %+v: want a control plane first and workers", c.Nodes)
			}
			if c.Name != "" {
				t.Errorf("name %q: svclab names clusters", c.Name)
			}
			if !strings.HasPrefix(string(data), "#") {
				t.Errorf("%s does not start with a comment saying what it is for", s.File())
			}
		})
	}
	if _, err := Lookup("nope"); err == nil || !strings.Contains(err.Error(), "three-zones") {
		t.Errorf("Lookup(nope) = %v, want an error listing the shapes", err)
	}
}
