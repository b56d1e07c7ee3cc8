// Package run implements "svclab proxier run", the proxier daemon: it
// reads a KubeProxyConfiguration (--config) or kube-proxy's flags, says
// which mode it uses ("Using nftables Proxier"), programs rules for this
// node from an apiserver (--kubeconfig, or the in-cluster config) or from
// a YAML file of objects (--objects, re-read on change or SIGHUP), and
// serves /healthz and /livez (healthzBindAddress), the healthCheckNodePorts
// of eTP Local LoadBalancer Services, and /metrics, /proxyMode, /configz
// plus the teaching hooks /events, /faults and /sync (metricsBindAddress).
package run
