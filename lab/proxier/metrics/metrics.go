package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/svclab/svclab/lab/proxier/nfacct"
)

const subsystem = "kubeproxy"

// alpha prefixes a help text the way component-base does for ALPHA metrics.
func alpha(help string) string { return "[ALPHA] " + help }

// syncBuckets is metrics.ExponentialBuckets(0.001, 2, 15).
var syncBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)

// networkProgrammingBuckets are upstream's merged linear buckets: 0.25s,
// 0.5s, 1..59s, 60..115s by 5s, 120..300s by 30s.
func networkProgrammingBuckets() []float64 {
	var b []float64
	b = append(b, prometheus.LinearBuckets(0.25, 0.25, 2)...)
	b = append(b, prometheus.LinearBuckets(1, 1, 59)...)
	b = append(b, prometheus.LinearBuckets(60, 5, 12)...)
	b = append(b, prometheus.LinearBuckets(120, 30, 7)...)
	return b
}

// Metrics are the proxier's metrics and the registry that exports them.
// Fields for the other mode are registered nowhere but are safe to use.
type Metrics struct {
	Registry *prometheus.Registry

	SyncProxyRulesLatency         *prometheus.HistogramVec
	SyncFullProxyRulesLatency     *prometheus.HistogramVec
	SyncPartialProxyRulesLatency  *prometheus.HistogramVec
	SyncProxyRulesLastTimestamp   *prometheus.GaugeVec
	SyncProxyRulesLastQueued      *prometheus.GaugeVec
	NetworkProgrammingLatency     *prometheus.HistogramVec
	EndpointChangesPending        prometheus.Gauge
	EndpointChangesTotal          prometheus.Counter
	ServiceChangesPending         prometheus.Gauge
	ServiceChangesTotal           prometheus.Counter
	NoLocalEndpointsTotal         *prometheus.GaugeVec
	IPTablesRestoreFailures       *prometheus.CounterVec
	IPTablesPartialRestoreFailure *prometheus.CounterVec
	IPTablesRulesTotal            *prometheus.GaugeVec
	IPTablesRulesLastSync         *prometheus.GaugeVec
	NFTablesSyncFailures          *prometheus.CounterVec
	NFTablesCleanupFailures       *prometheus.CounterVec
	ProxyHealthzTotal             *prometheus.CounterVec
	ProxyLivezTotal               *prometheus.CounterVec
	ConntrackReconcileLatency     *prometheus.HistogramVec
	ConntrackDeletedEntries       *prometheus.CounterVec

	// svclab teaching metrics.
	FaultActive        *prometheus.GaugeVec
	FaultSyncInterval  prometheus.Gauge
	SyncsSkipped       *prometheus.CounterVec
	SyncFailures       *prometheus.CounterVec
	EventsDropped      prometheus.Counter
	ServicesOmitted    prometheus.Gauge
	ConntrackSkipped   *prometheus.CounterVec
	ObjectsFileReloads *prometheus.CounterVec
}

// New creates the metrics of mode ("nftables" or "iptables") in a fresh
// registry, together with the Go runtime and process collectors that
// kube-proxy's legacy registry exports.
func New(mode string) *Metrics {
	family := []string{"ip_family"}
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		SyncProxyRulesLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: subsystem, Name: "sync_proxy_rules_duration_seconds",
			Help: alpha("SyncProxyRules latency in seconds"), Buckets: syncBuckets,
		}, family),
		SyncFullProxyRulesLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: subsystem, Name: "sync_full_proxy_rules_duration_seconds",
			Help: alpha("SyncProxyRules latency in seconds for full resyncs"), Buckets: syncBuckets,
		}, family),
		SyncPartialProxyRulesLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: subsystem, Name: "sync_partial_proxy_rules_duration_seconds",
			Help: alpha("SyncProxyRules latency in seconds for partial resyncs"), Buckets: syncBuckets,
		}, family),
		SyncProxyRulesLastTimestamp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: subsystem, Name: "sync_proxy_rules_last_timestamp_seconds",
			Help: alpha("The last time proxy rules were successfully synced"),
		}, family),
		SyncProxyRulesLastQueued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: subsystem, Name: "sync_proxy_rules_last_queued_timestamp_seconds",
			Help: alpha("The last time a sync of proxy rules was queued"),
		}, family),
		NetworkProgrammingLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: subsystem, Name: "network_programming_duration_seconds",
			Help: alpha("In Cluster Network Programming Latency in seconds"), Buckets: networkProgrammingBuckets(),
		}, family),
		EndpointChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: subsystem, Name: "sync_proxy_rules_endpoint_changes_pending",
			Help: alpha("Pending proxy rules Endpoint changes"),
		}),
		EndpointChangesTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: subsystem, Name: "sync_proxy_rules_endpoint_changes_total",
			Help: alpha("Cumulative proxy rules Endpoint changes"),
		}),
		ServiceChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: subsystem, Name: "sync_proxy_rules_service_changes_pending",
			Help: alpha("Pending proxy rules Service changes"),
		}),
		ServiceChangesTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: subsystem, Name: "sync_proxy_rules_service_changes_total",
			Help: alpha("Cumulative proxy rules Service changes"),
		}),
		NoLocalEndpointsTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: subsystem, Name: "sync_proxy_rules_no_local_endpoints_total",
			Help: alpha("Number of services with a Local traffic policy and no endpoints"),
		}, []string{"traffic_policy", "ip_family"}),
		IPTablesRestoreFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: subsystem, Name: "sync_proxy_rules_iptables_restore_failures_total",
			Help: alpha("Cumulative proxy iptables restore failures"),
		}, family),
		IPTablesPartialRestoreFailure: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: subsystem, Name: "sync_proxy_rules_iptables_partial_restore_failures_total",
			Help: alpha("Cumulative proxy iptables partial restore failures"),
		}, family),
		IPTablesRulesTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: subsystem, Name: "sync_proxy_rules_iptables_total",
			Help: alpha("Total number of iptables rules owned by kube-proxy"),
		}, []string{"table", "ip_family"}),
		IPTablesRulesLastSync: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: subsystem, Name: "sync_proxy_rules_iptables_last",
			Help: alpha("Number of iptables rules written by kube-proxy in last sync"),
		}, []string{"table", "ip_family"}),
		NFTablesSyncFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: subsystem, Name: "sync_proxy_rules_nftables_sync_failures_total",
			Help: alpha("Cumulative proxy nftables sync failures"),
		}, family),
		NFTablesCleanupFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: subsystem, Name: "sync_proxy_rules_nftables_cleanup_failures_total",
			Help: alpha("Cumulative proxy nftables cleanup failures"),
		}, family),
		ProxyHealthzTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: subsystem, Name: "proxy_healthz_total",
			Help: alpha("Cumulative proxy healthz HTTP status"),
		}, []string{"code"}),
		ProxyLivezTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: subsystem, Name: "proxy_livez_total",
			Help: alpha("Cumulative proxy livez HTTP status"),
		}, []string{"code"}),
		ConntrackReconcileLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: subsystem, Name: "conntrack_reconciler_sync_duration_seconds",
			Help: alpha("ReconcileConntrackFlowsLatency latency in seconds"), Buckets: syncBuckets,
		}, family),
		ConntrackDeletedEntries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: subsystem, Name: "conntrack_reconciler_deleted_entries_total",
			Help: alpha("Cumulative conntrack flows deleted by conntrack reconciler"),
		}, family),

		FaultActive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "svclab", Subsystem: "proxier", Name: "fault_active",
			Help: "1 if the teaching fault switch is on, 0 if off",
		}, []string{"fault"}),
		FaultSyncInterval: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "svclab", Subsystem: "proxier", Name: "fault_sync_interval_seconds",
			Help: "Minimum seconds between syncs forced by the sync-every fault (0 when off)",
		}),
		SyncsSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "svclab", Subsystem: "proxier", Name: "syncs_skipped_total",
			Help: "Syncs that were due but skipped, by reason (a fault switch)",
		}, []string{"reason"}),
		SyncFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "svclab", Subsystem: "proxier", Name: "sync_failures_total",
			Help: "Failed syncs by stage (model, apply); the previous good ruleset stays in place",
		}, []string{"stage", "mode"}),
		EventsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "svclab", Subsystem: "proxier", Name: "events_dropped_total",
			Help: "Sync events not delivered to a slow subscriber",
		}),
		ServicesOmitted: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "svclab", Subsystem: "proxier", Name: "omitted_service_ports",
			Help: "Service ports left out of the rules by the omit-service fault",
		}),
		ConntrackSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "svclab", Subsystem: "proxier", Name: "conntrack_cleanups_skipped_total",
			Help: "UDP conntrack cleanups that were required but skipped by the fault switch",
		}, family),
		ObjectsFileReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "svclab", Subsystem: "proxier", Name: "objects_file_reloads_total",
			Help: "Reloads of the --objects file, by result",
		}, []string{"result"}),
	}

	reg := m.Registry
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The metrics every mode registers (RegisterMetrics).
	reg.MustRegister(
		m.SyncProxyRulesLatency, m.SyncProxyRulesLastQueued, m.SyncProxyRulesLastTimestamp,
		m.EndpointChangesPending, m.EndpointChangesTotal, m.ServiceChangesPending, m.ServiceChangesTotal,
		m.ProxyHealthzTotal, m.ProxyLivezTotal, m.NetworkProgrammingLatency, m.NoLocalEndpointsTotal,
	)
	switch mode {
	case "iptables":
		reg.MustRegister(m.SyncFullProxyRulesLatency, m.SyncPartialProxyRulesLatency,
			m.IPTablesRestoreFailures, m.IPTablesPartialRestoreFailure, m.IPTablesRulesTotal, m.IPTablesRulesLastSync,
			m.ConntrackReconcileLatency, m.ConntrackDeletedEntries)
	case "nftables":
		reg.MustRegister(m.SyncFullProxyRulesLatency, m.SyncPartialProxyRulesLatency,
			m.NFTablesSyncFailures, m.NFTablesCleanupFailures,
			m.ConntrackReconcileLatency, m.ConntrackDeletedEntries)
	}
	reg.MustRegister(m.FaultActive, m.FaultSyncInterval, m.SyncsSkipped, m.SyncFailures, m.EventsDropped,
		m.ServicesOmitted, m.ConntrackSkipped, m.ObjectsFileReloads)
	return m
}

// Covert stops exporting the teaching metrics that name or count fault
// switches (svclab_proxier_fault_active and the like): a lab's faults must
// look like the failures they stand for, which no metric names.
func (m *Metrics) Covert() {
	for _, c := range []prometheus.Collector{m.FaultActive, m.FaultSyncInterval, m.SyncsSkipped, m.ServicesOmitted, m.ConntrackSkipped} {
		m.Registry.Unregister(c)
	}
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// SinceInSeconds is the time since start in seconds.
func SinceInSeconds(start time.Time) float64 {
	return time.Since(start).Seconds()
}

// SetFault exports a fault switch (faults.Gauges).
func (m *Metrics) SetFault(name string, on bool) {
	v := 0.0
	if on {
		v = 1
	}
	m.FaultActive.WithLabelValues(name).Set(v)
}

// SetSyncInterval exports the sync-every fault's interval (faults.Gauges).
func (m *Metrics) SetSyncInterval(seconds int) { m.FaultSyncInterval.Set(float64(seconds)) }

// PacketCounter reads the packet count of a named nfacct counter.
type PacketCounter func(name string) (uint64, error)

// nfacctCollector is upstream's nfacctMetricCollector: a counter metric
// read from an nfacct counter at every scrape (absent while it cannot be
// read).
type nfacctCollector struct {
	desc    *prometheus.Desc
	counter string
	read    PacketCounter
	onError func(counter string, err error)
}

func (c *nfacctCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *nfacctCollector) Collect(ch chan<- prometheus.Metric) {
	packets, err := c.read(c.counter)
	if err != nil {
		if c.onError != nil {
			c.onError(c.counter, err)
		}
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(packets))
}

// RegisterNFAcct registers the iptables mode's nfacct-backed metrics,
// kubeproxy_iptables_ct_state_invalid_dropped_packets_total and
// kubeproxy_iptables_localhost_nodeports_accepted_packets_total, read with
// read at every scrape; onError (may be nil) hears of failed reads.
func (m *Metrics) RegisterNFAcct(read PacketCounter, onError func(counter string, err error)) {
	m.Registry.MustRegister(
		&nfacctCollector{
			desc: prometheus.NewDesc("kubeproxy_iptables_ct_state_invalid_dropped_packets_total",
				alpha("packets dropped by iptables to work around conntrack problems"), nil, nil),
			counter: nfacct.CTStateInvalidDropped, read: read, onError: onError,
		},
		&nfacctCollector{
			desc: prometheus.NewDesc("kubeproxy_iptables_localhost_nodeports_accepted_packets_total",
				alpha("Number of packets accepted on nodeports of loopback interface"), nil, nil),
			counter: nfacct.LocalhostNodePortsAccepted, read: read, onError: onError,
		},
	)
}
