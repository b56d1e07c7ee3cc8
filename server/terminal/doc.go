// Package terminal bridges the browser terminal to a shell on a lab
// cluster's node: bash run with the backend's NodeTerminal (in the node's
// own filesystem and network namespace, never on the server's host)
// behind a pseudo-terminal that the server makes and holds, as `docker
// exec -t` does, so that line editing, job control, Ctrl-C and window
// resizes work. The shell has a session of its own whose controlling
// terminal that is; a resize is an ioctl on the server's side, and closing
// the terminal hangs the shell's session up.
//
// The control-plane tab gets kubectl: svclab-kube, which the nodes' images
// of both backends hold already (copied into a node that lacks it, once),
// with a kubeconfig for the cluster, bash completion and the alias k.
package terminal
