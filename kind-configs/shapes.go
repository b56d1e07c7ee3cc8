package kindconfigs

import (
	"embed"
	"fmt"
	"sort"
	"strings"
)

// FS holds the configuration files.
//
//go:embed *.yaml
var FS embed.FS

// Shape is one cluster shape.
type Shape struct {
	// Name is the file's name without .yaml.
	Name string
	// Summary says what the shape is for, in a line.
	Summary string
	// Proxier is the bundled proxier's mode ("nftables" or "iptables"),
	// which svclab installs as the kube-proxy DaemonSet; "" when kind
	// installs upstream kube-proxy (networking.kubeProxyMode in the file).
	Proxier string
}

// File is the shape's file name in FS.
func (s Shape) File() string { return s.Name + ".yaml" }

// Config returns the shape's kind configuration.
func (s Shape) Config() ([]byte, error) { return FS.ReadFile(s.File()) }

// Names of the shapes.
const (
	NFTables          = "nftables"
	IPTables          = "iptables"
	ThreeZones        = "three-zones"
	UpstreamKubeProxy = "upstream-kube-proxy"
)

// Shapes lists every shape, the default first.
var Shapes = []Shape{
	{Name: NFTables, Summary: "1 control plane + 2 workers, bundled proxier in nftables mode", Proxier: "nftables"},
	{Name: IPTables, Summary: "1 control plane + 2 workers, bundled proxier in iptables mode", Proxier: "iptables"},
	{Name: ThreeZones, Summary: "1 control plane + 3 workers in zones zone-a, zone-b, zone-c, bundled proxier in nftables mode", Proxier: "nftables"},
	{Name: UpstreamKubeProxy, Summary: "1 control plane + 2 workers, upstream kube-proxy (nftables) for comparison"},
}

// Lookup returns the shape called name.
func Lookup(name string) (Shape, error) {
	for _, s := range Shapes {
		if s.Name == name {
			return s, nil
		}
	}
	names := make([]string, len(Shapes))
	for i, s := range Shapes {
		names[i] = s.Name
	}
	sort.Strings(names)
	return Shape{}, fmt.Errorf("no kind cluster shape %q: use one of %s, or a path to a kind configuration file", name, strings.Join(names, ", "))
}
