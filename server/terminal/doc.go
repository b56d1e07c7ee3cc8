// Package terminal bridges the browser terminal to a shell on a lab
// cluster's node: bash run with cluster.Cluster's NodeExec (in the node's
// own filesystem and network namespace, never on the server's host) behind
// a pseudo-terminal made on the node by script(1), so that line editing,
// job control, Ctrl-C and window resizes work.
//
// The control-plane tab gets kubectl: svclab-kube, which the nodes' images
// of both backends hold already (copied into a node that lacks it, once),
// with a kubeconfig for the cluster, bash completion and the alias k.
package terminal
