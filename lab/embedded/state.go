package embedded

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded/userns"
)

// EnvStateDir overrides the default state directory.
const EnvStateDir = "SVCLAB_STATE_DIR"

// DefaultStateDir is $SVCLAB_STATE_DIR, /var/lib/svclab for root, or
// svclab in the user's state directory.
func DefaultStateDir() string {
	if d := os.Getenv(EnvStateDir); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/var/lib/svclab"
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "svclab")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "state", "svclab")
}

// NodeSpec is one node of an embedded cluster.
type NodeSpec struct {
	Name string       `json:"name"`
	Role cluster.Role `json:"role"`
	IP   string       `json:"ip"`
	// Netns is the node's network namespace (under /run/netns).
	Netns string `json:"netns"`
	// HostVeth is the node's port on the cluster's bridge (its veth's
	// end in the fabric's namespace).
	HostVeth string            `json:"hostVeth"`
	Labels   map[string]string `json:"labels,omitempty"`
}

// LBSpec is the lab's load balancer (package loadbalancer): its network
// namespace on the fabric, owned by the host (the learner has no say in
// it), and the pool it hands LoadBalancer addresses out of.
type LBSpec struct {
	Netns    string `json:"netns"`
	HostVeth string `json:"hostVeth"`
	IP       string `json:"ip"`
	Pool     string `json:"pool"`
}

// APISpec is where the lab's control plane runs: a network namespace of
// svclab's own on the lab's fabric (owned by the host, not by the lab's
// user namespace, and no node), where etcd, the controller-manager and the
// scheduler listen on its loopback only and the API server is the one port
// the lab reaches. A learner who is root on every node and cluster-admin
// can break the cluster through the API, never through its storage or the
// components' other ports — as on a managed cluster, whose control plane is
// not one of its nodes.
type APISpec struct {
	Netns    string `json:"netns"`
	HostVeth string `json:"hostVeth"`
	IP       string `json:"ip"`
}

// State is what svclab records about an embedded cluster; it is enough to
// find and remove every resource the cluster owns.
type State struct {
	Name string `json:"name"`
	// Index numbers the cluster's fabric: bridge svlbr<Index>, subnet
	// <FabricBase>.<Index>.0/24.
	Index   int    `json:"index"`
	Subnet  string `json:"subnet"`
	Gateway string `json:"gateway"`
	// Bridge names both the cluster's bridge, in the fabric's namespace,
	// and the host's link to the control plane (which holds the
	// gateway's address on the host): svlbr<Index>.
	Bridge      string `json:"bridge"`
	ServiceCIDR string `json:"serviceCIDR"`
	PodCIDR     string `json:"podCIDR"`
	KubeBin     string `json:"kubeBin"`
	// ImagesDir holds the images pods run from.
	ImagesDir string `json:"imagesDir"`
	// ProxyMode is kube-proxy's mode (nftables or iptables).
	ProxyMode string     `json:"proxyMode"`
	Nodes     []NodeSpec `json:"nodes"`
	// API is where the control plane runs.
	API *APISpec `json:"api"`
	// LB is the lab's load balancer (nil in clusters made before it).
	LB      *LBSpec   `json:"lb,omitempty"`
	Created time.Time `json:"created"`
	// IDs is the lab's claim on its range of host ids, which its user
	// namespace maps.
	IDs *userns.Claim `json:"ids,omitempty"`
	// Limits bound the lab.
	Limits Limits `json:"limits"`
}

// runBase holds every lab's runtime directory (runDir): the root
// filesystems of its containers and its idmapped image layers, mounted
// where the lab's ids may search, whichever state directory the lab lives
// in.
const runBase = svclabRun + "/labs"

// svclabRun holds what svclab keeps on the host beside state directories:
// labs' runtime directories, creation locks, id range claims.
const svclabRun = "/run/svclab"

// runDir is cluster name's runtime directory.
func runDir(name string) string { return filepath.Join(runBase, name) }

// ControlPlane returns the control-plane node.
func (s *State) ControlPlane() NodeSpec {
	for _, n := range s.Nodes {
		if n.Role == cluster.RoleControlPlane {
			return n
		}
	}
	return NodeSpec{}
}

// apiserverPort is the API server's port.
const apiserverPort = 6443

// Server is the API server URL.
func (s *State) Server() string {
	return fmt.Sprintf("https://%s:%d", s.API.IP, apiserverPort)
}

// ErrOldLayout is why svclab refuses a cluster whose control plane ran in
// its control-plane node's network namespace, which the lab owns.
var ErrOldLayout = errors.New("this cluster was made by an older svclab, whose control plane ran inside the lab: delete it and create it again")

// FabricNetns is the network namespace of the cluster's bridge (see
// fabricUp), the host's.
func (s *State) FabricNetns() string { return netnsPrefix + s.Name + fabricSuffix }

// FirewallTable is the name of the host nft table (family inet) that
// fences the host's link to the cluster's control plane.
func (s *State) FirewallTable() string { return firewallTablePrefix + s.Name }

// firewallTablePrefix starts the name of every cluster's nft table.
const firewallTablePrefix = "svclab-"

// Node returns the node called name.
func (s *State) Node(name string) (NodeSpec, bool) {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return NodeSpec{}, false
}

// lbSuffix ends the names of a lab's load-balancer network namespace and
// its port on the bridge; apiSuffix those of its control plane's;
// fabricSuffix the name of the bridge's namespace.
const (
	lbSuffix     = "-lb"
	apiSuffix    = "-api"
	fabricSuffix = "-fabric"
)

const (
	// fabricBase is the /16 the cluster fabrics are carved from, one /24
	// per cluster.
	fabricBase   = "172.29"
	maxIndex     = 254
	bridgePrefix = "svlbr"
	netnsPrefix  = "svclab-"
)

// NewState lays out a cluster: node names as kind names them, node IPs .2,
// .3, ... on the cluster's /24, the bridge at .1.
func NewState(opts cluster.CreateOptions, index int) (*State, error) {
	if index < 1 || index > maxIndex {
		return nil, fmt.Errorf("fabric index %d out of range 1-%d", index, maxIndex)
	}
	if opts.Workers < 0 || opts.Workers > 20 {
		return nil, fmt.Errorf("%d worker nodes asked for: use between 0 and 20", opts.Workers)
	}
	subnet := netip.MustParsePrefix(fmt.Sprintf("%s.%d.0/24", fabricBase, index))
	gw := subnet.Addr().Next()
	if err := cluster.ValidateProxyMode(opts.ProxyMode); err != nil {
		return nil, err
	}
	mode := opts.ProxyMode
	if mode == "" {
		mode = "nftables"
	}
	st := &State{
		Name:        opts.Name,
		ProxyMode:   mode,
		Index:       index,
		Subnet:      subnet.String(),
		Gateway:     gw.String(),
		Bridge:      fmt.Sprintf("%s%d", bridgePrefix, index),
		ServiceCIDR: cluster.DefaultServiceCIDR,
		PodCIDR:     cluster.DefaultPodCIDR,
	}
	ip := gw
	for i, name := range cluster.NodeNames(opts.Name, opts.Workers) {
		ip = ip.Next()
		role := cluster.RoleWorker
		if i == 0 {
			role = cluster.RoleControlPlane
		}
		st.Nodes = append(st.Nodes, NodeSpec{
			Name:     name,
			Role:     role,
			IP:       ip.String(),
			Netns:    netnsPrefix + name,
			HostVeth: fmt.Sprintf("svl%d-%d", index, i),
			Labels:   opts.NodeLabels[name],
		})
	}
	// The load balancer at .254, its pool .224/28 (.225-.238), the API
	// server at .253: far from the nodes, which count up from .2.
	host := func(b byte) netip.Addr {
		a := subnet.Addr().As4()
		return netip.AddrFrom4([4]byte{a[0], a[1], a[2], b})
	}
	pool := netip.PrefixFrom(host(224), 28)
	st.LB = &LBSpec{Netns: netnsPrefix + opts.Name + lbSuffix, HostVeth: fmt.Sprintf("svl%d%s", index, lbSuffix), IP: host(254).String(), Pool: pool.String()}
	st.API = &APISpec{Netns: netnsPrefix + opts.Name + apiSuffix, HostVeth: fmt.Sprintf("svl%d%s", index, apiSuffix), IP: host(253).String()}
	for name := range opts.NodeLabels {
		if _, ok := st.Node(name); !ok {
			return nil, fmt.Errorf("labels given for node %q, which this cluster does not have (its nodes: %v)", name, cluster.NodeNames(opts.Name, opts.Workers))
		}
	}
	return st, nil
}

// paths is the layout of a cluster's state directory.
type paths struct{ dir string }

func (p paths) state() string          { return filepath.Join(p.dir, "cluster.json") }
func (p paths) pki() string            { return filepath.Join(p.dir, "pki") }
func (p paths) logs() string           { return filepath.Join(p.dir, "logs") }
func (p paths) etcdData() string       { return filepath.Join(p.dir, "etcd") }
func (p paths) kubeconfig() string     { return filepath.Join(p.dir, "kubeconfig") }
func (p paths) config(n string) string { return filepath.Join(p.dir, "config", n) }
func (p paths) supervisorPID() string  { return filepath.Join(p.dir, "supervisor.pid") }
func (p paths) status() string         { return filepath.Join(p.dir, "status.json") }

// controlKey is the private key of the proxiers' teaching hooks (the
// public half beside it, .pub).
func (p paths) controlKey() string { return filepath.Join(p.pki(), "proxier-control.key") }

// userns is the pin of the lab's user namespace.
func (p paths) userns() string { return filepath.Join(p.dir, "userns") }

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s is damaged: %w", path, err)
	}
	return nil
}

func loadState(p paths) (*State, error) {
	var st State
	if err := readJSON(p.state(), &st); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, cluster.ErrNotFound
		}
		return nil, err
	}
	if st.API == nil {
		return &st, ErrOldLayout
	}
	return &st, nil
}
