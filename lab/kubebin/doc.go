// Package kubebin builds and finds svclab-kube, the multi-call binary that
// holds the real Kubernetes components (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubectl, kube-proxy, CoreDNS)
// built from the Go module in lab/kube.
//
// The binary is built once into a per-user cache directory keyed by the
// Kubernetes version and a hash of the module's sources, and reused after
// that. A cold build compiles a few thousand packages and takes 15 to 35
// minutes on two cores, so the build reports its progress as it goes.
package kubebin
