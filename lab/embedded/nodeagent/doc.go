// Package nodeagent is the kubelet of an embedded node. One agent runs per
// node (several may share a process): it registers the Node (addresses,
// capacity, kubelet endpoint, Ready condition, Lease heartbeats), programs
// the node's routes to the other nodes' pod CIDRs (as kindnet does), gives
// each pod bound to the node a network namespace with a veth and an address
// from the node's pod CIDR, and runs the pod's containers with runc. It
// serves the kubelet API (exec, attach, logs, port-forward) on the node's
// address, port 10250, with a certificate signed by the cluster CA.
//
// Containers run detached (runc create and start; no process per container
// besides the container's own) and outlive their agent, as under
// containerd: an agent that restarts, or starts again after a stop, adopts the pods its
// node runs, with their addresses, restart counts and readiness, so neither
// clients nor EndpointSlices notice. The agent also keeps the node's own
// container (node shells) running.
//
// The agent runs in the host's namespaces and reaches into the node's
// network namespace by name (ip -n, setns for its listener), so that the
// namespaces it creates for pods are visible to the host and can always be
// swept. What it makes for the lab, it makes for the lab's user namespace
// (Isolation): pods' network namespaces owned by it, containers joining
// it, root filesystems over idmapped image layers, and every mount into a
// container done by the agent before runc starts it, from files opened
// with their links confined (mounts.go), so that the kernel locks them.
//
// The agent is root on the host, and it takes nothing the API server hands
// it on trust: whoever writes the cluster's etcd can hand it any object.
// Every Pod first passes, on the agent's side, the checks the API server
// itself applies to what the agent turns into paths, files, mounts,
// arguments, environments and rules, with bounds on how much of the host
// one Pod may take (validate.go); a Pod that fails is reported Failed
// (InvalidPod) and never run, and names in kubelet API requests are
// checked likewise. What the agent then makes of a Pod under the node's
// state directory it reaches from a descriptor of that directory, through
// no symlink (podfs.go): were a name to slip through, or the lab, whose ids
// own parts of those trees, to plant a link, a host-root write, chown or
// chmod still would not land outside.
//
// The agent is Linux's (runc, namespaces, openat2, the new mount API):
// its files build on Linux only. Elsewhere (macOS, where svclab runs the
// kind backend) the package holds only LogLimits, which the lab's limit
// flags name on every system.
package nodeagent
