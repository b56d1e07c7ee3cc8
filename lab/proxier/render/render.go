package render

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	netutils "k8s.io/utils/net"

	"github.com/svclab/svclab/lab/proxier/iptables"
	"github.com/svclab/svclab/lab/proxier/manifest"
	"github.com/svclab/svclab/lab/proxier/model"
)

// Proxy modes.
const (
	ModeNFTables = "nftables"
	ModeIPTables = "iptables"
)

// Output forms of the nftables mode.
const (
	// OutputRuleset prints the resulting kube-proxy table as sorted "add"
	// commands (loadable with "nft -f" on a node without the table).
	OutputRuleset = "ruleset"
	// OutputTransaction prints the exact transaction of the first full sync
	// (what kube-proxy pipes into "nft -f").
	OutputTransaction = "transaction"
)

// Options configure a render.
type Options struct {
	// Mode is ModeNFTables or ModeIPTables.
	Mode string
	// NodeName is this node; endpoints on it are local. Its Node object,
	// if present in the manifest, provides topology labels and (if NodeIP
	// is empty) the node IP.
	NodeName string
	// NodeIP is the node's primary IP; its family selects IPv4 or IPv6.
	NodeIP string
	// ClusterCIDR is the pod CIDR (detect-local-mode ClusterCIDR).
	ClusterCIDR string
	// ServiceCIDRs are the ServiceCIDR ranges (nftables drops traffic to
	// unallocated ClusterIPs in them).
	ServiceCIDRs []string
	// NodePortAddresses is --nodeport-addresses; empty means kube-proxy's
	// default for the mode ("primary" for nftables, all for iptables).
	NodePortAddresses []string
	// MasqueradeAll is --masquerade-all.
	MasqueradeAll bool
	// Output is OutputRuleset (default) or OutputTransaction (nftables).
	Output string
}

// Render decodes the manifest in r (named source in errors) and writes what
// kube-proxy v1.37 would program for it on this node.
func Render(ctx context.Context, logger *slog.Logger, opts Options, r io.Reader, source string, w io.Writer) error {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Mode != ModeNFTables && opts.Mode != ModeIPTables {
		return fmt.Errorf("unknown mode %q: want %s or %s", opts.Mode, ModeNFTables, ModeIPTables)
	}
	if opts.Output == "" {
		opts.Output = OutputRuleset
	}
	if opts.Output != OutputRuleset && opts.Output != OutputTransaction {
		return fmt.Errorf("unknown output %q: want %s or %s", opts.Output, OutputRuleset, OutputTransaction)
	}
	if opts.Output == OutputTransaction && opts.Mode != ModeNFTables {
		return fmt.Errorf("--output %s is only available in %s mode", OutputTransaction, ModeNFTables)
	}
	if opts.NodeName == "" {
		return errors.New("a node name is required (--node)")
	}
	objs, err := manifest.Decode(r, source)
	if err != nil {
		return err
	}
	node := objs.Node(opts.NodeName)

	nodeIP, err := resolveNodeIP(opts.NodeIP, node)
	if err != nil {
		return err
	}
	family := v1.IPv4Protocol
	if nodeIP.To4() == nil {
		family = v1.IPv6Protocol
	}
	if opts.ClusterCIDR != "" {
		if _, _, err := netutils.ParseCIDRSloppy(opts.ClusterCIDR); err != nil {
			return fmt.Errorf("--cluster-cidr %q: %w", opts.ClusterCIDR, err)
		}
	}
	localAddrs := []net.IP{nodeIP}
	if node != nil {
		for _, a := range node.Status.Addresses {
			if ip := netutils.ParseIPSloppy(a.Address); ip != nil && !ip.Equal(nodeIP) {
				localAddrs = append(localAddrs, ip)
			}
		}
	}
	npaSpecs := opts.NodePortAddresses
	if len(npaSpecs) == 0 && opts.Mode == ModeNFTables {
		npaSpecs = []string{model.NodePortAddressesPrimary}
	}
	npa, err := model.NewNodePortAddresses(family, npaSpecs, nodeIP)
	if err != nil {
		return fmt.Errorf("--nodeport-addresses: %w", err)
	}

	snap, err := model.Build(ctx, logger, model.Input{
		Family:         family,
		Node:           node,
		NodeName:       opts.NodeName,
		Services:       objs.Services,
		EndpointSlices: objs.EndpointSlices,
	})
	if err != nil {
		return err
	}

	switch opts.Mode {
	case ModeNFTables:
		return renderNFTables(ctx, logger, opts, family, nodeIP, npa, localAddrs, snap, w)
	default:
		res, err := iptables.Render(ctx, logger, iptables.Config{
			Family:             family,
			NodeIP:             nodeIP,
			ClusterCIDR:        familyCIDR(opts.ClusterCIDR, family),
			NodePortAddresses:  npa,
			LocalAddresses:     localAddrs,
			MasqueradeAll:      opts.MasqueradeAll,
			LocalhostNodePorts: true,
		}, snap, iptables.Options{})
		if err != nil {
			return err
		}
		var b strings.Builder
		b.WriteString("# Jump rules kube-proxy inserts separately (iptables -I), not part of this input:\n")
		for _, j := range iptables.JumpRules() {
			b.WriteString("#   " + j.String() + "\n")
		}
		b.WriteString("# Canary chains: " + strings.Join(iptables.CanaryChains(), ", ") + "\n")
		b.WriteString("# Apply with: iptables-restore --noflush --counters\n")
		b.WriteString(res.Restore)
		_, err = io.WriteString(w, b.String())
		return err
	}
}

// familyCIDR returns cidr if it is of family, else "" (as kube-proxy picks
// the cluster CIDR of each family).
func familyCIDR(cidr string, family v1.IPFamily) string {
	if cidr == "" || netutils.IsIPv6CIDRString(cidr) != (family == v1.IPv6Protocol) {
		return ""
	}
	return cidr
}

func resolveNodeIP(flag string, node *v1.Node) (net.IP, error) {
	if flag != "" {
		ip := netutils.ParseIPSloppy(flag)
		if ip == nil {
			return nil, fmt.Errorf("--node-ip %q is not an IP address", flag)
		}
		return ip, nil
	}
	if node != nil {
		for _, a := range node.Status.Addresses {
			if a.Type == v1.NodeInternalIP {
				if ip := netutils.ParseIPSloppy(a.Address); ip != nil {
					return ip, nil
				}
			}
		}
	}
	return nil, errors.New("no node IP: pass --node-ip or include the Node with an InternalIP address")
}

// AddFlags adds the options' flags (those of "svclab proxier render") to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Mode, "mode", ModeNFTables, "proxy mode: nftables or iptables")
	fs.StringVar(&o.NodeName, "node", "", "name of this node (endpoints on it are local)")
	fs.StringVar(&o.NodeIP, "node-ip", "", "primary IP of this node (default: the Node's InternalIP from the file)")
	fs.StringVar(&o.ClusterCIDR, "cluster-cidr", "", "pod CIDR, used to tell pod traffic apart")
	fs.StringSliceVar(&o.ServiceCIDRs, "service-cidr", nil, "ServiceCIDR ranges (nftables drops traffic to unallocated ClusterIPs)")
	fs.StringSliceVar(&o.NodePortAddresses, "nodeport-addresses", nil, `CIDRs or "primary", "localhost", "all" (default: primary for nftables, all for iptables)`)
	fs.BoolVar(&o.MasqueradeAll, "masquerade-all", false, "masquerade all traffic to ClusterIPs")
	fs.StringVar(&o.Output, "output", OutputRuleset, `nftables output: "ruleset" (resulting table) or "transaction" (the nft -f input of the first sync)`)
}

// RenderFile renders the manifests in file, or those read from stdin when
// file is "-".
func RenderFile(ctx context.Context, logger *slog.Logger, opts Options, file string, stdin io.Reader, w io.Writer) error {
	if file == "" {
		return errors.New("a manifest file is required (-f FILE)")
	}
	in, source := stdin, "<stdin>"
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("open manifest: %w", err)
		}
		defer f.Close()
		in, source = f, file
	}
	return Render(ctx, logger, opts, in, source, w)
}
