// Package metrics holds the proxier's Prometheus metrics: the kubeproxy_*
// metrics of kube-proxy v1.37 (pkg/proxy/metrics), registered per mode as
// upstream's RegisterMetrics does, plus svclab_proxier_* metrics for the
// teaching hooks (fault switches, skipped syncs, dropped events). Each
// daemon owns its own registry; nothing is global.
package metrics
