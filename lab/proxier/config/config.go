package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
	netutils "k8s.io/utils/net"
	"sigs.k8s.io/yaml"
)

// Proxy modes.
const (
	ModeNFTables = "nftables"
	ModeIPTables = "iptables"
	// ModeIPVS is valid configuration (deprecated in v1.37, behind the
	// KubeProxyIPVS feature gate, on by default), but the proxier cannot
	// run it: like upstream on a kernel without IPVS, it cleans up the
	// nftables mode's rules and exits (see package run).
	ModeIPVS = "ipvs"
)

// DefaultMode is the mode used when none is configured: iptables, as
// upstream v1.37 on Linux. svclab's own clusters name their mode in the
// kube-proxy ConfigMap (lab/proxier/deploy), as the material recommends.
const DefaultMode = ModeIPTables

// Ports and defaults from upstream.
const (
	ProxyHealthzPort   = 10256
	ProxyStatusPort    = 10249
	DefaultSyncPeriod  = 30 * time.Second
	DefaultMinSyncPeri = time.Second
	// FullSyncPeriod is proxyutil.FullSyncPeriod.
	FullSyncPeriod = time.Hour
)

// APIVersion and Kind of the configuration file.
var (
	APIVersion = kubeproxyconfig.SchemeGroupVersion.String()
	Kind       = "KubeProxyConfiguration"
)

// Load decodes a KubeProxyConfiguration strictly (unknown fields are
// errors, as in upstream's strict decoder) and checks its apiVersion and
// kind. It does not apply defaults.
func Load(data []byte) (*kubeproxyconfig.KubeProxyConfiguration, error) {
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(data, &meta); err != nil {
		return nil, fmt.Errorf("failed to decode: %w", err)
	}
	if meta.APIVersion != APIVersion || meta.Kind != Kind {
		return nil, fmt.Errorf("failed to decode: want apiVersion %s kind %s, got apiVersion %q kind %q", APIVersion, Kind, meta.APIVersion, meta.Kind)
	}
	cfg := &kubeproxyconfig.KubeProxyConfiguration{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, fmt.Errorf("failed to decode: %w", err)
	}
	return cfg, nil
}

// LoadFile reads and decodes a configuration file.
func LoadFile(path string) (*kubeproxyconfig.KubeProxyConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := Load(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// Marshal encodes cfg as YAML (the form of kubeadm's config.conf).
func Marshal(cfg *kubeproxyconfig.KubeProxyConfiguration) ([]byte, error) {
	c := cfg.DeepCopy()
	c.APIVersion, c.Kind = APIVersion, Kind
	return yaml.Marshal(c)
}

// SetDefaults fills in upstream's defaults (SetDefaults_KubeProxyConfiguration)
// for the fields the proxier uses.
func SetDefaults(cfg *kubeproxyconfig.KubeProxyConfiguration) {
	cfg.APIVersion, cfg.Kind = APIVersion, Kind
	if cfg.BindAddress == "" {
		cfg.BindAddress = "0.0.0.0"
	}
	healthzHost, metricsHost := "0.0.0.0", "127.0.0.1"
	if ip := netutils.ParseIPSloppy(cfg.BindAddress); ip != nil && ip.To4() == nil {
		healthzHost, metricsHost = "[::]", "[::1]"
	}
	if cfg.HealthzBindAddress == "" {
		cfg.HealthzBindAddress = fmt.Sprintf("%s:%d", healthzHost, ProxyHealthzPort)
	} else {
		cfg.HealthzBindAddress = appendPortIfNeeded(cfg.HealthzBindAddress, ProxyHealthzPort)
	}
	if cfg.MetricsBindAddress == "" {
		cfg.MetricsBindAddress = fmt.Sprintf("%s:%d", metricsHost, ProxyStatusPort)
	} else {
		cfg.MetricsBindAddress = appendPortIfNeeded(cfg.MetricsBindAddress, ProxyStatusPort)
	}
	for _, m := range []*metav1.Duration{&cfg.IPTables.SyncPeriod, &cfg.NFTables.SyncPeriod, &cfg.IPVS.SyncPeriod} {
		if m.Duration == 0 {
			m.Duration = DefaultSyncPeriod
		}
	}
	for _, m := range []*metav1.Duration{&cfg.IPTables.MinSyncPeriod, &cfg.NFTables.MinSyncPeriod} {
		if m.Duration == 0 {
			m.Duration = DefaultMinSyncPeri
		}
	}
	if cfg.IPTables.LocalhostNodePorts == nil {
		cfg.IPTables.LocalhostNodePorts = ptrTo(true)
	}
	if cfg.IPTables.MasqueradeBit == nil {
		cfg.IPTables.MasqueradeBit = ptrTo[int32](14)
	}
	if cfg.NFTables.MasqueradeBit == nil {
		cfg.NFTables.MasqueradeBit = ptrTo[int32](14)
	}
	if cfg.ConfigSyncPeriod.Duration == 0 {
		cfg.ConfigSyncPeriod.Duration = 15 * time.Minute
	}
	if cfg.ClientConnection.ContentType == "" {
		cfg.ClientConnection.ContentType = "application/vnd.kubernetes.protobuf"
	}
	if cfg.ClientConnection.QPS == 0 {
		cfg.ClientConnection.QPS = 5
	}
	if cfg.ClientConnection.Burst == 0 {
		cfg.ClientConnection.Burst = 10
	}
}

// appendPortIfNeeded is proxyutil.AppendPortIfNeeded.
func appendPortIfNeeded(addr string, port int32) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	ip := netutils.ParseIPSloppy(addr)
	if ip == nil {
		return addr
	}
	if ip.To4() != nil {
		return fmt.Sprintf("%s:%d", ip, port)
	}
	return fmt.Sprintf("[%s]:%d", ip, port)
}

func ptrTo[T any](v T) *T { return &v }

// Resolved is the configuration the daemon runs with.
type Resolved struct {
	Mode               string
	HostnameOverride   string
	Kubeconfig         string
	BindAddress        net.IP
	HealthzBindAddress string
	MetricsBindAddress string
	SyncPeriod         time.Duration
	MinSyncPeriod      time.Duration
	MasqueradeAll      bool
	MasqueradeBit      int
	ClusterCIDRs       []string
	NodePortAddresses  []string
	LocalhostNodePorts bool
	TCPBeLiberal       bool
	Verbosity          int
}

// Resolve validates a defaulted configuration and picks the fields of its
// mode, as the v1alpha1 → internal conversion does (syncPeriod,
// minSyncPeriod and masqueradeAll come from the mode's section).
func Resolve(cfg *kubeproxyconfig.KubeProxyConfiguration) (*Resolved, error) {
	mode := string(cfg.Mode)
	if mode == "" {
		mode = DefaultMode
	}
	r := &Resolved{
		Mode:               mode,
		HostnameOverride:   strings.TrimSpace(cfg.HostnameOverride),
		Kubeconfig:         cfg.ClientConnection.Kubeconfig,
		HealthzBindAddress: cfg.HealthzBindAddress,
		MetricsBindAddress: cfg.MetricsBindAddress,
		NodePortAddresses:  cfg.NodePortAddresses,
		TCPBeLiberal:       cfg.Conntrack.TCPBeLiberal,
		Verbosity:          int(cfg.Logging.Verbosity),
	}
	var errs []error
	switch mode {
	case ModeNFTables:
		r.SyncPeriod, r.MinSyncPeriod = cfg.NFTables.SyncPeriod.Duration, cfg.NFTables.MinSyncPeriod.Duration
		r.MasqueradeAll = cfg.NFTables.MasqueradeAll
		r.MasqueradeBit = int(derefInt32(cfg.NFTables.MasqueradeBit, 14))
	case ModeIPTables:
		r.SyncPeriod, r.MinSyncPeriod = cfg.IPTables.SyncPeriod.Duration, cfg.IPTables.MinSyncPeriod.Duration
		r.MasqueradeAll = cfg.IPTables.MasqueradeAll
		r.MasqueradeBit = int(derefInt32(cfg.IPTables.MasqueradeBit, 14))
		r.LocalhostNodePorts = cfg.IPTables.LocalhostNodePorts == nil || *cfg.IPTables.LocalhostNodePorts
	case ModeIPVS:
		// The v1alpha1 conversion takes ipvs mode's periods from the ipvs
		// section, as it does for the other modes.
		r.SyncPeriod, r.MinSyncPeriod = cfg.IPVS.SyncPeriod.Duration, cfg.IPVS.MinSyncPeriod.Duration
		r.MasqueradeAll = cfg.IPTables.MasqueradeAll
		r.MasqueradeBit = int(derefInt32(cfg.IPTables.MasqueradeBit, 14))
	default:
		errs = append(errs, fmt.Errorf("mode: unknown proxy mode %q: must be iptables, ipvs, nftables or blank (blank means the best-available proxy [currently iptables])", mode))
	}
	if r.SyncPeriod <= 0 {
		errs = append(errs, fmt.Errorf("syncPeriod: must be greater than 0, got %v", r.SyncPeriod))
	}
	if r.MinSyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("minSyncPeriod: must be greater than or equal to 0, got %v", r.MinSyncPeriod))
	}
	// As upstream's validation: a sync runner whose retry and resync
	// period is shorter than its minimum interval makes no sense.
	if r.SyncPeriod > 0 && r.MinSyncPeriod > r.SyncPeriod {
		errs = append(errs, fmt.Errorf("syncPeriod: must be greater than or equal to minSyncPeriod (%v), got %v", r.MinSyncPeriod, r.SyncPeriod))
	}
	if r.MasqueradeBit < 0 || r.MasqueradeBit > 31 {
		errs = append(errs, fmt.Errorf("masqueradeBit: must be within the range [0, 31], got %d", r.MasqueradeBit))
	}
	if cfg.BindAddress != "" {
		if r.BindAddress = netutils.ParseIPSloppy(cfg.BindAddress); r.BindAddress == nil {
			errs = append(errs, fmt.Errorf("bindAddress: %q is not a valid IP address", cfg.BindAddress))
		}
	}
	for name, addr := range map[string]string{"healthzBindAddress": r.HealthzBindAddress, "metricsBindAddress": r.MetricsBindAddress} {
		if addr == "" {
			continue
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q must be IP:port: %w", name, addr, err))
			continue
		}
		if host != "" && netutils.ParseIPSloppy(host) == nil {
			errs = append(errs, fmt.Errorf("%s: %q is not an IP address", name, host))
		}
		if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			errs = append(errs, fmt.Errorf("%s: bad port %q", name, port))
		}
	}
	// v1alpha1 carries the (comma-separated) CIDRs in clusterCIDR.
	for _, c := range strings.Split(cfg.ClusterCIDR, ",") {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		if _, _, err := netutils.ParseCIDRSloppy(c); err != nil {
			errs = append(errs, fmt.Errorf("clusterCIDR: %q: %w", c, err))
			continue
		}
		r.ClusterCIDRs = append(r.ClusterCIDRs, c)
	}
	if len(r.ClusterCIDRs) > 2 {
		errs = append(errs, fmt.Errorf("clusterCIDR: at most one CIDR per family, got %v", r.ClusterCIDRs))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("invalid KubeProxyConfiguration: %w", err)
	}
	return r, nil
}

func derefInt32(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// Options are kube-proxy's command-line flags.
type Options struct {
	ConfigFile     string
	WriteConfigTo  string
	cfg            kubeproxyconfig.KubeProxyConfiguration
	hostname       string
	clusterCIDRs   string
	syncPeriod     time.Duration
	minSyncPeriod  time.Duration
	localhostNPs   bool
	masqueradeBit  int32
	verbosity      int32
	bindAddress    string
	healthzAddress string
	metricsAddress string
	mode           string
}

// NewOptions returns options with kube-proxy's flag defaults.
func NewOptions() *Options {
	return &Options{
		syncPeriod:    DefaultSyncPeriod,
		minSyncPeriod: DefaultMinSyncPeri,
		localhostNPs:  true,
		masqueradeBit: 14,
	}
}

// AddFlags registers kube-proxy's flags (the ones the proxier implements).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "The path to the configuration file.")
	fs.StringVar(&o.WriteConfigTo, "write-config-to", o.WriteConfigTo, "If set, write the default configuration values to this file and exit.")
	fs.StringVar(&o.cfg.ClientConnection.Kubeconfig, "kubeconfig", "", "Path to kubeconfig file with authorization information (the master location can be overridden by the master flag).")
	fs.StringVar(&o.hostname, "hostname-override", "", "If non-empty, will be used as the name of the Node that kube-proxy is running on. If unset, the node name is assumed to be the same as the node's hostname.")
	fs.StringVar(&o.bindAddress, "bind-address", "", "Overrides kube-proxy's idea of what its node's primary IP is. This parameter is ignored if a config file is specified by --config.")
	fs.StringVar(&o.healthzAddress, "healthz-bind-address", "", "The IP address and port for the health check server to serve on, defaulting to \"0.0.0.0:10256\". This parameter is ignored if a config file is specified by --config.")
	fs.StringVar(&o.metricsAddress, "metrics-bind-address", "", "The IP address and port for the metrics server to serve on, defaulting to \"127.0.0.1:10249\". This parameter is ignored if a config file is specified by --config.")
	fs.StringVar(&o.mode, "proxy-mode", "", "Which proxy mode to use: 'iptables' (the default on Linux) or 'nftables'. This parameter is ignored if a config file is specified by --config.")
	fs.StringVar(&o.clusterCIDRs, "cluster-cidr", "", "The CIDR range of the pods in the cluster (a comma-separated dual-stack pair at most). Traffic from outside it to ClusterIPs is masqueraded. This parameter is ignored if a config file is specified by --config.")
	fs.StringSliceVar(&o.cfg.NodePortAddresses, "nodeport-addresses", nil, "A list of CIDR ranges that contain valid node IPs, or alternatively, the single string 'primary'. If set, connections to NodePort services will only be accepted on node IPs in one of the indicated ranges. This parameter is ignored if a config file is specified by --config.")
	fs.BoolVar(&o.cfg.IPTables.MasqueradeAll, "masquerade-all", false, "SNAT all traffic sent via Service cluster IPs. This parameter is ignored if a config file is specified by --config.")
	fs.Int32Var(&o.masqueradeBit, "iptables-masquerade-bit", o.masqueradeBit, "The bit of the fwmark space to mark packets requiring SNAT with. Must be within the range [0, 31].")
	fs.BoolVar(&o.localhostNPs, "iptables-localhost-nodeports", o.localhostNPs, "If false, kube-proxy will disable the legacy behavior of allowing NodePort services to be accessed via localhost. (iptables mode and IPv4 only.)")
	fs.DurationVar(&o.syncPeriod, "iptables-sync-period", o.syncPeriod, "An interval (e.g. '5s', '1m', '2h22m') indicating how frequently various re-synchronizing and cleanup operations are performed. Must be greater than 0.")
	fs.DurationVar(&o.minSyncPeriod, "iptables-min-sync-period", o.minSyncPeriod, "The minimum period between rule resyncs (e.g. '5s', '1m', '2h22m'). A value of 0 means every Service or EndpointSlice change will result in an immediate resync.")
	fs.BoolVar(&o.cfg.Conntrack.TCPBeLiberal, "conntrack-tcp-be-liberal", false, "Enable liberal mode for tracking TCP packets (drops the ctstate INVALID rule in iptables mode).")
	fs.Int32VarP(&o.verbosity, "v", "v", 0, "number for the log level verbosity (4 and above log debug messages)")
}

// Complete builds the configuration: from the --config file (flags other
// than --hostname-override and --v are ignored, as upstream) or from the
// flags, then applies defaults.
func (o *Options) Complete(fs *pflag.FlagSet) (*kubeproxyconfig.KubeProxyConfiguration, error) {
	var cfg *kubeproxyconfig.KubeProxyConfiguration
	if o.ConfigFile != "" {
		c, err := LoadFile(o.ConfigFile)
		if err != nil {
			return nil, err
		}
		cfg = c
		if fs.Changed("v") {
			cfg.Logging.Verbosity = uint32ToVerbosity(o.verbosity)
		}
	} else {
		c := o.cfg.DeepCopy()
		c.Mode = kubeproxyconfig.ProxyMode(o.mode)
		c.BindAddress = o.bindAddress
		c.HealthzBindAddress = o.healthzAddress
		c.MetricsBindAddress = o.metricsAddress
		c.Logging.Verbosity = uint32ToVerbosity(o.verbosity)
		c.IPTables.LocalhostNodePorts = ptrTo(o.localhostNPs)
		c.IPTables.MasqueradeBit = ptrTo(o.masqueradeBit)
		c.NFTables.MasqueradeBit = ptrTo(o.masqueradeBit)
		c.NFTables.MasqueradeAll = c.IPTables.MasqueradeAll
		if fs.Changed("cluster-cidr") {
			c.ClusterCIDR = o.clusterCIDRs
		}
		cfg = c
	}
	if o.hostname != "" {
		cfg.HostnameOverride = o.hostname
	}
	SetDefaults(cfg)
	if o.ConfigFile == "" {
		// Upstream defaults the configuration before applying flags, so a
		// flag can set a period to 0 (a config file cannot: 0 means unset).
		cfg.IPTables.SyncPeriod.Duration, cfg.NFTables.SyncPeriod.Duration = o.syncPeriod, o.syncPeriod
		cfg.IPTables.MinSyncPeriod.Duration, cfg.NFTables.MinSyncPeriod.Duration = o.minSyncPeriod, o.minSyncPeriod
	}
	return cfg, nil
}

func uint32ToVerbosity(v int32) logsapi.VerbosityLevel {
	if v < 0 {
		v = 0
	}
	return logsapi.VerbosityLevel(v)
}

// WriteDefaults writes the defaulted configuration to path (--write-config-to).
func WriteDefaults(path string, cfg *kubeproxyconfig.KubeProxyConfiguration) error {
	data, err := Marshal(cfg)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	return nil
}
