// Package config reads the proxier's configuration the way kube-proxy
// v1.37 does: a KubeProxyConfiguration file (kubeproxy.config.k8s.io/
// v1alpha1, the config.conf of kubeadm's kube-proxy ConfigMap) given with
// --config, or kube-proxy's command-line flags when there is no file.
// With --config the file wins, except for --hostname-override and the
// log verbosity (--v), exactly as upstream. Defaults are upstream's
// (SetDefaults_KubeProxyConfiguration), an empty mode included: it means
// iptables, as on Linux upstream. svclab's clusters name their mode
// (nftables unless asked otherwise) in the ConfigMap they write.
package config
