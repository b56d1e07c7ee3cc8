// Package kind is svclab's kind backend: lab clusters as real kind clusters
// (sigs.k8s.io/kind used as a library, nodes as Docker containers) running
// the bundled proxier as the kube-proxy DaemonSet, for learners who want
// the clusters they would build at home.
//
// It needs neither a Docker installation of the user's nor a registry:
// package dockerd finds the user's Docker engine or starts svclab's own,
// and package nodeimage builds the node image (svclab/kind-node, Kubernetes
// v1.37.2 from svclab-kube) offline, both on demand during Create.
//
// It is kept thin over what the rest of svclab already does: the cluster
// shapes are kind configurations in kind-configs/, the proxier's objects come
// from lab/proxier/deploy, the images pods run are lab/images' images packed
// into an image archive by package ociimage and imported into every node with
// kind's loader (no docker build, no registry, so scenarios work offline).
//
// Node commands (NodeExec, svclab node exec|shell) run in each node's tools
// container: the lab's tools image under the node's containerd, in the
// node's network namespace, as an embedded node's node container — so
// graders, faults and learners find nft, conntrack and tcpdump on both
// backends (kind's node image has no nft).
//
// Everything that touches Docker or kind goes through Engine, a small
// interface with one real implementation (Docker's CLI for the checks,
// kind's library for the rest) and a hand-written fake in the tests.
//
// State lives in the state directory, apart from the embedded backend's:
//
//	kind/NAME/cluster.json      shape, node labels, proxier, who creates it
//	kind/NAME/kind-config.yaml  the configuration kind was given
//	kind/NAME/kubeconfig        the cluster's kubeconfig (kind writes it here;
//	                            ~/.kube/config is never touched)
//
// svclab's kind clusters are the kind clusters (found by kind's
// io.x-k8s.kind.cluster container label) that have such a directory; kind
// clusters made by hand are listed by kind, not by svclab, and never deleted
// by it. A cluster whose creation was cut short (svclab killed mid-create)
// is an orphan: Collect, which Create and DeleteAll run, deletes it.
package kind
