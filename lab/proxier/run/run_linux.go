package run

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
	netutils "k8s.io/utils/net"
	"sigs.k8s.io/knftables"

	"github.com/svclab/svclab/lab/proxier/config"
	"github.com/svclab/svclab/lab/proxier/conntrack"
	"github.com/svclab/svclab/lab/proxier/control"
	"github.com/svclab/svclab/lab/proxier/daemon"
	"github.com/svclab/svclab/lab/proxier/healthcheck"
	"github.com/svclab/svclab/lab/proxier/iptables"
	"github.com/svclab/svclab/lab/proxier/manifest"
	"github.com/svclab/svclab/lab/proxier/metrics"
	"github.com/svclab/svclab/lab/proxier/model"
	"github.com/svclab/svclab/lab/proxier/nfacct"
	"github.com/svclab/svclab/lab/proxier/nftables"
)

// Run runs the daemon until ctx is done.
func Run(ctx context.Context, cmd *cobra.Command, opts *config.Options, extra *Extra, logOut io.Writer) error {
	kpc, err := opts.Complete(cmd.Flags())
	if err != nil {
		return err
	}
	if opts.WriteConfigTo != "" {
		return config.WriteDefaults(opts.WriteConfigTo, kpc)
	}
	cfg, err := config.Resolve(kpc)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if cfg.Verbosity >= 4 {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))
	// client-go logs through klog; send it to the same place.
	klog.SetSlogLogger(logger)

	if cfg.Mode == config.ModeIPVS {
		var nfts []knftables.Interface
		for _, fam := range []knftables.Family{knftables.IPv4Family, knftables.IPv6Family} {
			if nft, err := knftables.New(fam, nftables.Table); err == nil {
				nfts = append(nfts, nft)
			}
		}
		return refuseIPVS(ctx, logger, nfts, daemon.IPVSAvailable)
	}

	nodeName := cfg.HostnameOverride
	if nodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("couldn't determine hostname: %w", err)
		}
		nodeName = strings.ToLower(strings.TrimSpace(h))
	}

	var client kubernetes.Interface
	var fileObjs *manifest.Objects
	if extra.Objects != "" {
		f, err := os.Open(extra.Objects)
		if err != nil {
			return fmt.Errorf("--objects: %w", err)
		}
		fileObjs, err = manifest.Decode(f, extra.Objects)
		f.Close()
		if err != nil {
			return err
		}
	} else {
		if client, err = newClient(kpc, cfg.Kubeconfig); err != nil {
			return err
		}
	}

	nodeIP := detectNodeIP(ctx, logger, cfg.BindAddress, nodeName, client, fileObjs)
	family := v1.IPv4Protocol
	if nodeIP.To4() == nil {
		family = v1.IPv6Protocol
	}
	logger.InfoContext(ctx, "Successfully retrieved node IP(s)", "node", nodeName, "IPs", []string{nodeIP.String()})

	localAddrs := localAddresses(family)
	npaSpecs := cfg.NodePortAddresses
	if len(npaSpecs) == 0 && cfg.Mode == config.ModeNFTables {
		npaSpecs = []string{model.NodePortAddressesPrimary}
	}
	npa, err := model.NewNodePortAddresses(family, npaSpecs, nodeIP)
	if err != nil {
		return fmt.Errorf("nodePortAddresses: %w", err)
	}
	clusterCIDR := ""
	for _, c := range cfg.ClusterCIDRs {
		if netutils.IsIPv6CIDRString(c) == (family == v1.IPv6Protocol) {
			clusterCIDR = c
		}
	}
	if clusterCIDR == "" {
		logger.InfoContext(ctx, "Detect-local-mode set to ClusterCIDR, but no cluster CIDR for family", "ipFamily", family)
	}

	m := metrics.New(cfg.Mode)
	var applier daemon.Applier
	switch cfg.Mode {
	case config.ModeNFTables:
		logger.InfoContext(ctx, "Using nftables Proxier")
		nftFamily := knftables.IPv4Family
		if family == v1.IPv6Protocol {
			nftFamily = knftables.IPv6Family
		}
		// As kube-proxy v1.37 (NFTablesNetlink, beta, on by default):
		// list chains and sets over netlink instead of parsing
		// "nft --json list table", which costs a listing of every rule
		// per sync.
		nft, err := knftables.New(nftFamily, nftables.Table, knftables.UseNetlink)
		if err != nil {
			return fmt.Errorf("nftables mode is not available (is the nft binary installed and the kernel new enough?): %w", err)
		}
		// Large transactions go to nft batched (same ruleset, applied
		// many times faster).
		nft = &nftables.Batching{Interface: nft, Logger: logger}
		applier, err = daemon.NewNFTablesApplier(nftables.Config{
			Family: family, NodeIP: nodeIP, ClusterCIDR: clusterCIDR, ServiceCIDRs: familyCIDRs(extra.ServiceCIDRs, family),
			NodePortAddresses: npa, LocalAddresses: localAddrs, MasqueradeAll: cfg.MasqueradeAll, MasqueradeBit: cfg.MasqueradeBit,
		}, nft, daemon.NFTListRules(nftFamily), logger)
		if err != nil {
			return err
		}
		daemon.CleanupOtherMode(ctx, logger, cfg.Mode, daemon.ExecIPTables{Family: family}, nil)
	case config.ModeIPTables:
		logger.InfoContext(ctx, "Using iptables Proxier")
		if cfg.LocalhostNodePorts && family == v1.IPv4Protocol {
			if err := os.WriteFile("/proc/sys/net/ipv4/conf/all/route_localnet", []byte("1"), 0o644); err != nil {
				logger.ErrorContext(ctx, "failed to set sysctl net/ipv4/conf/all/route_localnet: localhost NodePorts will not work", "err", err)
			}
		}
		ipt := daemon.NewIPTablesApplier(iptables.Config{
			Family: family, NodeIP: nodeIP, ClusterCIDR: clusterCIDR, NodePortAddresses: npa, LocalAddresses: localAddrs,
			MasqueradeAll: cfg.MasqueradeAll, MasqueradeBit: cfg.MasqueradeBit, LocalhostNodePorts: cfg.LocalhostNodePorts,
			ConntrackTCPBeLiberal: cfg.TCPBeLiberal,
		}, daemon.ExecIPTables{Family: family}, logger)
		ipt.StaleChainCleanupPeriod = cfg.SyncPeriod
		// As upstream: nfacct counters (and "-m nfacct" in the rules)
		// where the kernel supports them.
		if acct, err := nfacct.New(); err != nil {
			logger.ErrorContext(ctx, "Failed to create nfacct runner, nfacct based metrics won't be available", "err", err)
		} else {
			defer acct.Close()
			ipt.NFAcct = acct
			m.RegisterNFAcct(func(name string) (uint64, error) {
				c, err := acct.Get(name)
				if err != nil {
					return 0, err
				}
				return c.Packets, nil
			}, func(counter string, err error) {
				logger.Error("failed to collect nfacct counter", "counter", counter, "err", err)
			})
		}
		applier = ipt
		nftFamily := knftables.IPv4Family
		if family == v1.IPv6Protocol {
			nftFamily = knftables.IPv6Family
		}
		if nft, err := knftables.New(nftFamily, nftables.Table); err == nil {
			daemon.CleanupOtherMode(ctx, logger, cfg.Mode, nil, nft)
		}
	}

	var p *daemon.Proxier
	network := "tcp4"
	if family == v1.IPv6Protocol {
		network = "tcp6"
	}
	var hcIPs []net.IP
	if !npa.MatchAll() {
		hcIPs = npa.NodeIPs(localAddrs)
	}
	serviceHealth := healthcheck.NewServiceHealthServer(logger, network, hcIPs, func() bool { return p.Health().Health().Healthy }, nil)
	defer serviceHealth.Close()

	var controlKey ed25519.PublicKey
	if extra.ControlKey != "" {
		if controlKey, err = control.ReadPublicFile(extra.ControlKey); err != nil {
			return fmt.Errorf("--control-key: %w", err)
		}
	}
	p, err = daemon.New(daemon.Config{
		Family: family, NodeName: nodeName,
		MinSyncPeriod: cfg.MinSyncPeriod, SyncPeriod: cfg.SyncPeriod, FullSyncPeriod: extra.FullSyncPeriod,
		RuleDiffLimit: extra.RuleDiffLimit,
		Applier:       applier, Conntrack: conntrack.New(), ServiceHealth: serviceHealth,
		Metrics: m, Logger: logger, Control: controlKey,
	})
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if cfg.HealthzBindAddress != "" {
		go serveRetrying(ctx, logger, "healthz", cfg.HealthzBindAddress, p.Health().Handler(), kpc.BindAddressHardFail, cancel)
	}
	if cfg.MetricsBindAddress != "" {
		go serveRetrying(ctx, logger, "metrics", cfg.MetricsBindAddress, p.MetricsHandler(kpc), kpc.BindAddressHardFail, cancel)
	}
	if cfg.Mode == config.ModeIPTables {
		go daemon.CanaryMonitor(ctx, logger, daemon.ExecIPTables{Family: family}, cfg.SyncPeriod, p.ForceFullSync)
	}
	if opts.ConfigFile != "" {
		go watchConfigFile(ctx, logger, opts.ConfigFile, cancel)
	}

	if fileObjs != nil {
		// No ServiceCIDR objects without an apiserver: --service-cidr
		// stands for them.
		p.OnServiceCIDRsChanged(familyCIDRs(extra.ServiceCIDRs, family))
		src := &daemon.ObjectsFile{Path: extra.Objects, NodeName: nodeName, Proxier: p, Logger: logger}
		if err := src.Load(ctx); err != nil {
			return err
		}
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go src.Watch(ctx, hup)
	} else {
		go func() {
			if err := daemon.RunInformers(ctx, logger, client, p, kpc.ConfigSyncPeriod.Duration); err != nil {
				cancel(err)
			}
		}()
	}

	p.Run(ctx)
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	logger.Info("proxier stopped")
	return nil
}

func newClient(kpc *kubeproxyconfig.KubeProxyConfiguration, kubeconfig string) (kubernetes.Interface, error) {
	var rc *rest.Config
	var err error
	if kubeconfig == "" {
		rc, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig and no in-cluster config (use --objects FILE to run without an apiserver): %w", err)
		}
	} else {
		rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
		}
	}
	rc.AcceptContentTypes = kpc.ClientConnection.AcceptContentTypes
	rc.ContentType = kpc.ClientConnection.ContentType
	rc.QPS = kpc.ClientConnection.QPS
	rc.Burst = int(kpc.ClientConnection.Burst)
	rc.UserAgent = "svclab-proxier"
	return kubernetes.NewForConfig(rc)
}

// detectNodeIP follows kube-proxy: --bind-address if it is not the
// unspecified address, else the Node's InternalIP (or ExternalIP), else
// loopback with an error.
func detectNodeIP(ctx context.Context, logger *slog.Logger, bind net.IP, nodeName string, client kubernetes.Interface, objs *manifest.Objects) net.IP {
	if bind != nil && !bind.IsUnspecified() {
		return bind
	}
	var node *v1.Node
	switch {
	case objs != nil:
		node = objs.Node(nodeName)
	case client != nil:
		deadline := time.Now().Add(30 * time.Second)
		for {
			n, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err == nil {
				node = n
				break
			}
			if !apierrors.IsNotFound(err) {
				logger.ErrorContext(ctx, "failed to retrieve node info", "node", nodeName, "err", err)
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			time.Sleep(time.Second)
		}
	}
	if node != nil {
		for _, t := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
			for _, a := range node.Status.Addresses {
				if a.Type == t {
					if ip := netutils.ParseIPSloppy(a.Address); ip != nil {
						return ip
					}
				}
			}
		}
	}
	logger.ErrorContext(ctx, "Can't determine this node's IP, assuming loopback; if this is incorrect, please set the --bind-address flag")
	if bind != nil && bind.To4() == nil {
		return net.IPv6loopback
	}
	return net.ParseIP("127.0.0.1")
}

func localAddresses(family v1.IPFamily) []net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []net.IP
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if (ipn.IP.To4() != nil) == (family == v1.IPv4Protocol) {
			out = append(out, ipn.IP)
		}
	}
	return out
}

func familyCIDRs(cidrs []string, family v1.IPFamily) []string {
	var out []string
	for _, c := range cidrs {
		if _, _, err := netutils.ParseCIDRSloppy(c); err == nil && netutils.IsIPv6CIDRString(c) == (family == v1.IPv6Protocol) {
			out = append(out, c)
		}
	}
	return out
}

// serveRetrying serves h on addr; a bind failure is retried every 5s as
// kube-proxy does, or ends the daemon with bindAddressHardFail.
func serveRetrying(ctx context.Context, logger *slog.Logger, name, addr string, h http.Handler, hardFail bool, cancel context.CancelCauseFunc) {
	for {
		err := healthcheck.ServeHTTP(ctx, logger, name, addr, h)
		if err == nil || ctx.Err() != nil {
			return
		}
		if hardFail {
			cancel(err)
			return
		}
		logger.ErrorContext(ctx, "server failed; retrying in 5s", "server", name, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
}

// watchConfigFile ends the daemon when its configuration file changes, as
// kube-proxy does (the DaemonSet then restarts it with the new config).
func watchConfigFile(ctx context.Context, logger *slog.Logger, path string, cancel context.CancelCauseFunc) {
	orig, err := os.ReadFile(path)
	if err != nil {
		return
	}
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			cur, err := os.ReadFile(path)
			if err == nil && string(cur) != string(orig) {
				err := errors.New("content of the proxy server's configuration file was updated")
				logger.ErrorContext(ctx, err.Error(), "file", path)
				cancel(err)
				return
			}
		}
	}
}

// refuseIPVS does what kube-proxy v1.37 (its image, which ships ipset)
// does in ipvs mode on a kernel without IPVS: it first cleans up the rules of the modes that ipvs mode
// does not use (the nftables tables: ipvs mode is iptables-based, so the
// iptables chains stay), then fails to create the proxier and exits. The
// node is left without nftables rules. svclab's proxier implements no ipvs
// mode at all, so where the kernel has IPVS it exits too, saying so.
func refuseIPVS(ctx context.Context, logger *slog.Logger, nfts []knftables.Interface, available func() error) error {
	for _, nft := range nfts {
		daemon.CleanupOtherMode(ctx, logger, config.ModeIPVS, nil, nft)
	}
	if err := available(); err != nil {
		return fmt.Errorf("can't use the IPVS proxier: %w", err)
	}
	return errors.New("can't use the IPVS proxier: svclab's proxier implements the nftables and iptables modes only (ipvs mode is deprecated since Kubernetes v1.37)")
}
