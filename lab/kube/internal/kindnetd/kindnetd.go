// Package kindnetd is svclab's kindnetd: the node half of the CNI of the
// kind backend's offline node image, doing what kind's own kindnetd does for
// an IPv4 cluster — kind's is not published as a Go module, so it cannot be
// built here from modules.
//
// It runs as the kindnet DaemonSet (host network, one per node) and, every
// few seconds and whenever a Node changes:
//
//   - writes /etc/cni/net.d/10-kindnet.conflist for its own node: the ptp
//     plugin with host-local addresses from the node's spec.podCIDR, and
//     portmap for hostPorts (the plugins are Debian's
//     containernetworking-plugins);
//   - routes every other node's pod CIDR through that node's InternalIP.
//
// Unlike kind's, it masquerades nothing (a lab's traffic stays among its
// nodes) and enforces no NetworkPolicy.
package kindnetd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// ConfigPath is where the CNI configuration is written.
const ConfigPath = "/etc/cni/net.d/10-kindnet.conflist"

// Main runs kindnetd until SIGINT or SIGTERM and returns its exit status.
func Main(args []string) int {
	fs := flag.NewFlagSet("kindnetd", flag.ContinueOnError)
	klog.InitFlags(fs)
	interval := fs.Duration("interval", 10*time.Second, "how often the nodes are reconciled")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *interval); err != nil && !errors.Is(err, context.Canceled) {
		klog.ErrorS(err, "kindnetd failed")
		return 1
	}
	return 0
}

func run(ctx context.Context, interval time.Duration) error {
	hostIP := os.Getenv("HOST_IP")
	if net.ParseIP(hostIP) == nil {
		return fmt.Errorf("HOST_IP is %q: set it from status.hostIP", hostIP)
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	// Reach the API server directly: the Service VIP needs kube-proxy, which
	// may need the pod network first.
	if ep := os.Getenv("CONTROL_PLANE_ENDPOINT"); ep != "" {
		cfg.Host = "https://" + ep
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	r := &Reconciler{HostIP: hostIP, MTU: eth0MTU(), Routes: netlinkRoutes{}, ConfigPath: ConfigPath}
	klog.InfoS("kindnetd started", "hostIP", hostIP, "mtu", r.MTU)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			klog.ErrorS(err, "listing nodes")
		} else if err := r.Reconcile(list.Items); err != nil {
			klog.ErrorS(err, "reconciling nodes")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func eth0MTU() int {
	if i, err := net.InterfaceByName("eth0"); err == nil {
		return i.MTU
	}
	return 0
}

// Routes is the part of the kernel's routing table kindnetd changes.
type Routes interface {
	// Ensure routes dst through gw, replacing a route to dst through
	// another gateway.
	Ensure(dst *net.IPNet, gw net.IP) error
}

// Reconciler makes a node's CNI configuration and routes follow the Nodes.
type Reconciler struct {
	HostIP     string
	MTU        int
	Routes     Routes
	ConfigPath string

	written []byte
}

// Reconcile writes the CNI configuration for this node (once it has a pod
// CIDR) and routes the other nodes' pod CIDRs.
func (r *Reconciler) Reconcile(nodes []corev1.Node) error {
	var errs []error
	for _, n := range nodes {
		ip := internalIPv4(n)
		cidrs := podCIDRs(n)
		if ip == nil || len(cidrs) == 0 {
			continue
		}
		if ip.String() == r.HostIP {
			if err := r.writeConfig(cidrs); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		for _, c := range cidrs {
			if err := r.Routes.Ensure(c, ip); err != nil {
				errs = append(errs, fmt.Errorf("route to %s via %s (node %s): %w", c, ip, n.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

func internalIPv4(n corev1.Node) net.IP {
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip := net.ParseIP(a.Address).To4(); ip != nil {
			return ip
		}
	}
	return nil
}

func podCIDRs(n corev1.Node) []*net.IPNet {
	list := n.Spec.PodCIDRs
	if len(list) == 0 && n.Spec.PodCIDR != "" {
		list = []string{n.Spec.PodCIDR}
	}
	var out []*net.IPNet
	for _, c := range list {
		if _, ipn, err := net.ParseCIDR(c); err == nil && ipn.IP.To4() != nil {
			out = append(out, ipn)
		}
	}
	return out
}

// Config returns the CNI configuration list for a node's pod CIDRs: ptp
// with host-local addresses and a default route, then portmap.
func Config(cidrs []*net.IPNet, mtu int) ([]byte, error) {
	type rng struct {
		Subnet string `json:"subnet"`
	}
	var ranges [][]rng
	for _, c := range cidrs {
		ranges = append(ranges, []rng{{Subnet: c.String()}})
	}
	ptp := map[string]any{
		"type":   "ptp",
		"ipMasq": false,
		"ipam": map[string]any{
			"type":    "host-local",
			"dataDir": "/run/cni-ipam-state",
			"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
			"ranges":  ranges,
		},
	}
	if mtu > 0 {
		ptp["mtu"] = mtu
	}
	return json.MarshalIndent(map[string]any{
		"cniVersion": "0.3.1",
		"name":       "kindnet",
		"plugins": []any{ptp, map[string]any{
			"type":         "portmap",
			"capabilities": map[string]bool{"portMappings": true},
		}},
	}, "", "  ")
}

func (r *Reconciler) writeConfig(cidrs []*net.IPNet) error {
	data, err := Config(cidrs, r.MTU)
	if err != nil {
		return err
	}
	if bytes.Equal(data, r.written) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(r.ConfigPath), 0o755); err != nil {
		return err
	}
	tmp := r.ConfigPath + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, r.ConfigPath); err != nil {
		return err
	}
	r.written = data
	klog.InfoS("wrote the CNI configuration", "path", r.ConfigPath, "podCIDRs", cidrs)
	return nil
}

// netlinkRoutes is the real Routes.
type netlinkRoutes struct{}

func (netlinkRoutes) Ensure(dst *net.IPNet, gw net.IP) error {
	want := netlink.Route{Dst: dst, Gw: gw}
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &want, netlink.RT_FILTER_DST)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(routes, func(r netlink.Route) bool { return r.Gw.Equal(gw) }) {
		return nil
	}
	klog.InfoS("routing a node's pod CIDR", "dst", dst, "gw", gw)
	return netlink.RouteReplace(&want)
}
