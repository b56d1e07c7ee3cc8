// Package nodeimage builds svclab's kind node image offline: from Debian
// packages and svclab-kube (Kubernetes v1.37.2 built from its Go modules),
// with no registry and no docker build, so that the kind backend works on
// machines that cannot pull kindest/node.
//
// It follows kind's own node image (images/base and pkg/build/nodeimage):
//
//   - a root file system with systemd, containerd, runc, iptables,
//     nftables, conntrack and Debian's CNI plugins (debootstrap, a layer of
//     lab/images' store), trimmed of the systemd units a container does
//     not want;
//   - svclab's node files: an entrypoint preparing mounts, cgroups and the
//     node's identity for systemd, the kubelet's units, containerd's
//     configuration, /kind/version and the CNI (svclab's kindnet) and
//     storage manifests kind applies;
//   - svclab-kube as /usr/bin/kubelet, kubeadm and kubectl;
//   - in containerd's store (namespace k8s.io, pinned, not unpacked, as
//     kind imports them): the images `kubeadm config images list` names —
//     kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy,
//     etcd, CoreDNS, pause — and kindnetd, all svclab-kube under the
//     component's name on lab/images' tools layer.
//
// The three file-system layers are packed by lab/kind/ociimage into a base
// image that is loaded into the Docker engine; a build container of it
// runs containerd to import the component images, and is committed as the
// node image, like kind's build container. The result is saved to an
// archive in the cache named by a key of everything that went in, so the
// next Ensure only loads it (docker load) — or does nothing when the
// engine has it already.
package nodeimage
