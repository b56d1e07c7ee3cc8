package run

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/proxier/config"
	"github.com/svclab/svclab/lab/proxier/daemon"
)

// Extra are svclab's own flags, beyond kube-proxy's.
type Extra struct {
	// Objects is a YAML file of Services, EndpointSlices and Nodes to
	// program instead of watching an apiserver.
	Objects string
	// ServiceCIDRs are used with --objects (with an apiserver they come
	// from ServiceCIDR objects).
	ServiceCIDRs []string
	// FullSyncPeriod overrides kube-proxy's hourly full resync.
	FullSyncPeriod time.Duration
	// RuleDiffLimit caps the rules per sync event; negative disables diffs.
	RuleDiffLimit int
	// ControlKey is the file of the public key that guards the teaching
	// hooks (package control); none leaves them open.
	ControlKey string
}

// NewRunCommand returns "svclab proxier run".
func NewRunCommand() *cobra.Command {
	opts := config.NewOptions()
	extra := &Extra{FullSyncPeriod: config.FullSyncPeriod, RuleDiffLimit: daemon.DefaultRuleDiffLimit}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the proxier daemon (a kube-proxy v1.37 replacement) on this node",
		Long: `Run the proxier daemon: it programs nftables or iptables rules for this node's
Services as kube-proxy v1.37 does, from an apiserver (--kubeconfig, or the
in-cluster config) or, with --objects, from a YAML file of Services,
EndpointSlices and Nodes (re-read when it changes or on SIGHUP).

It takes kube-proxy's flags and KubeProxyConfiguration file (--config), serves
/healthz and /livez on healthzBindAddress (0.0.0.0:10256), and /metrics,
/proxyMode, /configz, /events (sync events, NDJSON), /faults (teaching fault
switches) and /sync on metricsBindAddress (127.0.0.1:10249).`,
		Example: `  svclab proxier run --objects lab/proxier/testdata/demo.yaml --hostname-override test-node \
      --bind-address 192.168.0.2 --cluster-cidr 10.0.0.0/8
  svclab proxier run --config /var/lib/kube-proxy/config.conf --hostname-override "$NODE_NAME"
  curl -s 127.0.0.1:10249/proxyMode
  curl -sN 127.0.0.1:10249/events
  curl -s -XPOST -d '{"stopSyncing":true}' 127.0.0.1:10249/faults`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: false,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return Run(ctx, cmd, opts, extra, cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	opts.AddFlags(fl)
	fl.StringVar(&extra.Objects, "objects", "", "svclab: program rules from this YAML file of Services, EndpointSlices and Nodes instead of an apiserver; re-read when it changes or on SIGHUP")
	fl.StringSliceVar(&extra.ServiceCIDRs, "service-cidr", nil, "svclab: the ServiceCIDRs to use with --objects (traffic to unallocated ClusterIPs in them is dropped in nftables mode)")
	fl.DurationVar(&extra.FullSyncPeriod, "full-sync-period", extra.FullSyncPeriod, "svclab: how often a full resync rewrites every rule (kube-proxy: 1h)")
	fl.IntVar(&extra.RuleDiffLimit, "rule-diff-limit", extra.RuleDiffLimit, "svclab: most added/removed rules listed per sync event; negative disables rule diffs")
	fl.StringVar(&extra.ControlKey, "control-key", "", "svclab: a public key file; /faults and /sync then obey only requests signed with its private key, and the faults name themselves nowhere (no log line, metric or event)")
	return cmd
}

// Main is the proxier as the program kube-proxy (the proxier image's
// entry point, lab/roles): "svclab proxier run" with args, the arguments
// after argv[0]. It returns the exit code.
func Main(args []string) int {
	cmd := NewRunCommand()
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		return 1
	}
	return 0
}
