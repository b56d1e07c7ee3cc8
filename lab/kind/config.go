package kind

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/svclab/svclab/kind-configs"
	"github.com/svclab/svclab/lab/cluster"
)

// noneProxyMode is kind's kubeProxyMode for "install no kube-proxy" (kind's
// public config package has no name for it).
const noneProxyMode v1alpha4.ProxyMode = "none"

// cgroupV1Patch lets the kubelet start on a cgroup v1 host: since
// Kubernetes 1.35 it refuses to unless told otherwise.
const cgroupV1Patch = "kind: KubeletConfiguration\nfailCgroupV1: false\n"

// Shape is a cluster shape: one of kind-configs' or a kind configuration
// file of the user's.
type Shape struct {
	// Name is the kind-configs shape name, or the file's path.
	Name string
	// Config is the kind configuration.
	Config []byte
	// Proxier is the bundled proxier's mode; "" when kind installs
	// upstream kube-proxy.
	Proxier string
}

// LoadShape returns the kind-configs shape called name, or reads a kind
// configuration file when name is a path (it contains a slash or ends in
// .yaml). A file's shape runs the bundled proxier in mode when it says
// kubeProxyMode: none, and kind's kube-proxy otherwise.
func LoadShape(name, mode string) (Shape, error) {
	if !strings.Contains(name, "/") && !strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml") {
		s, err := kindconfigs.Lookup(name)
		if err != nil {
			return Shape{}, err
		}
		data, err := s.Config()
		if err != nil {
			return Shape{}, err
		}
		proxier := s.Proxier
		if proxier != "" && mode != "" {
			proxier = mode
		}
		return Shape{Name: s.Name, Config: data, Proxier: proxier}, nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return Shape{}, fmt.Errorf("reading the kind configuration: %w", err)
	}
	c, err := parseConfig(name, data)
	if err != nil {
		return Shape{}, err
	}
	s := Shape{Name: name, Config: data}
	if c.Networking.KubeProxyMode == noneProxyMode {
		s.Proxier = cmpOr(mode, "nftables")
	}
	return s, nil
}

// DefaultShape is the shape for a proxy mode: nftables or iptables.
func DefaultShape(mode string) (Shape, error) {
	if mode == "iptables" {
		return LoadShape(kindconfigs.IPTables, "")
	}
	return LoadShape(kindconfigs.NFTables, "")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func parseConfig(source string, data []byte) (*v1alpha4.Cluster, error) {
	var c v1alpha4.Cluster
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("%s is not a kind configuration: %w", source, err)
	}
	if c.Kind != "Cluster" || c.APIVersion != "kind.x-k8s.io/v1alpha4" {
		return nil, fmt.Errorf("%s is not a kind configuration: want kind: Cluster and apiVersion: kind.x-k8s.io/v1alpha4, have %q and %q", source, c.Kind, c.APIVersion)
	}
	if len(c.Nodes) == 0 {
		c.Nodes = []v1alpha4.Node{{Role: v1alpha4.ControlPlaneRole}}
	}
	if n := countRole(c.Nodes, v1alpha4.ControlPlaneRole); n != 1 {
		return nil, fmt.Errorf("%s has %d control-plane nodes: svclab's clusters have one", source, n)
	}
	if c.Nodes[0].Role != v1alpha4.ControlPlaneRole {
		return nil, fmt.Errorf("%s: list the control-plane node first", source)
	}
	return &c, nil
}

func countRole(nodes []v1alpha4.Node, role v1alpha4.NodeRole) int {
	n := 0
	for _, node := range nodes {
		if node.Role == role {
			n++
		}
	}
	return n
}

// RenderOptions say how a shape becomes one cluster's configuration.
type RenderOptions struct {
	Name string
	// Workers is the number of workers; negative keeps the shape's.
	Workers int
	// NodeLabels are extra labels by node name (NAME-worker2).
	NodeLabels map[string]map[string]string
	// ProxyMode is upstream kube-proxy's mode for a shape without the
	// bundled proxier; "" keeps the shape's.
	ProxyMode string
	// CgroupV1 adds the kubelet patch that lets it run on cgroup v1.
	CgroupV1 bool
	// NodeImage overrides kind's node image.
	NodeImage string
}

// Render returns the kind configuration for one cluster of shape s, and
// the labels each node gets (by node name).
func Render(s Shape, o RenderOptions) ([]byte, map[string]map[string]string, error) {
	c, err := parseConfig(s.Name, s.Config)
	if err != nil {
		return nil, nil, err
	}
	c.Name = o.Name
	if o.Workers >= 0 {
		workers := c.Nodes[1:]
		if len(workers) > o.Workers {
			workers = workers[:o.Workers]
		}
		for len(workers) < o.Workers {
			workers = append(workers, v1alpha4.Node{Role: v1alpha4.WorkerRole})
		}
		c.Nodes = append(c.Nodes[:1], workers...)
	}
	names := cluster.NodeNames(o.Name, len(c.Nodes)-1)
	index := map[string]int{}
	for i, n := range names {
		index[n] = i
	}
	for _, node := range slices.Sorted(maps.Keys(o.NodeLabels)) {
		i, ok := index[node]
		if !ok {
			return nil, nil, fmt.Errorf("node label for %s: the cluster's nodes are %s", node, strings.Join(names, ", "))
		}
		if c.Nodes[i].Labels == nil {
			c.Nodes[i].Labels = map[string]string{}
		}
		maps.Copy(c.Nodes[i].Labels, o.NodeLabels[node])
	}
	if s.Proxier != "" {
		c.Networking.KubeProxyMode = noneProxyMode
	} else if o.ProxyMode != "" {
		c.Networking.KubeProxyMode = v1alpha4.ProxyMode(o.ProxyMode)
	}
	if o.CgroupV1 {
		c.KubeadmConfigPatches = append(c.KubeadmConfigPatches, cgroupV1Patch)
	}
	if o.NodeImage != "" {
		for i := range c.Nodes {
			c.Nodes[i].Image = o.NodeImage
		}
	}
	labels := map[string]map[string]string{}
	for i, n := range c.Nodes {
		if len(n.Labels) > 0 {
			labels[names[i]] = maps.Clone(n.Labels)
		}
	}
	data, err := yaml.Marshal(c)
	if err != nil {
		return nil, nil, err
	}
	proxier := "kube-proxy: kind's (upstream)"
	if s.Proxier != "" {
		proxier = "kube-proxy: svclab's bundled proxier, " + s.Proxier + " mode"
	}
	header := fmt.Sprintf("# Cluster %s, shape %s; %s.\n", o.Name, s.Name, proxier)
	return append([]byte(header), data...), labels, nil
}
