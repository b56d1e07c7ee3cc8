// Package healthcheck is kube-proxy v1.37's health checking
// (pkg/proxy/healthcheck):
//
//   - ProxyHealthServer answers /livez (healthy unless a queued update is
//     older than the health timeout, 2×syncPeriod) and /healthz (also
//     requires the Node to be eligible: it exists, is not being deleted and
//     has no ToBeDeletedByClusterAutoscaler taint), with upstream's JSON
//     body and the kubeproxy_proxy_{healthz,livez}_total counters.
//   - ServiceHealthServer opens one listener per healthCheckNodePort of a
//     LoadBalancer Service with externalTrafficPolicy Local and reports the
//     number of local ready endpoints in JSON and in the
//     X-Load-Balancing-Endpoint-Weight header (200 if there are some and
//     the proxy is healthy, else 503).
package healthcheck
