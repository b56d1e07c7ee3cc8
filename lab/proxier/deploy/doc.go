// Package deploy generates the objects that run the proxier in a cluster
// the way kubeadm runs kube-proxy, so that kube-proxy commands from the CKA
// material work verbatim: a hostNetwork DaemonSet "kube-proxy" in
// kube-system (label k8s-app=kube-proxy) started with
// --config=/var/lib/kube-proxy/config.conf --hostname-override=$(NODE_NAME),
// the ConfigMap "kube-proxy" holding config.conf (a KubeProxyConfiguration
// marshalled in full, as kubeadm writes it) and kubeconfig.conf, the
// ServiceAccount "kube-proxy", the ClusterRoleBinding
// "kubeadm:node-proxier" to system:node-proxier, and kubeadm's Role and
// RoleBinding that let joining nodes read the ConfigMap.
package deploy
