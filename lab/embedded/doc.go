// Package embedded is svclab's default cluster backend: a real Kubernetes
// control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler from svclab-kube) with nodes as Linux network namespaces,
// so every packet, rule and conntrack entry is real kernel state and no
// Docker is needed.
//
// Each cluster gets its own fabric (network.go): a bridge svlbrN for the
// /24 172.29.N.0/24 in a network namespace of its own
// (svclab-<cluster>-fabric, the host's, br_netfilter off, routing nothing),
// one network namespace per node (svclab-<node>) linked to it by a veth,
// and nft tables there that keep each port to its own addresses. Nodes
// have no default route, so nothing in a cluster reaches beyond the
// machine or into another cluster. The host is not on the bridge: it
// reaches the API server over a link of its own to the control plane's
// namespace (svlbrN on the host), and nodes and Pods from inside their
// namespaces.
//
// Everything of a lab that a learner reaches runs in the lab's own user
// namespace (package userns: a machine-wide range of host ids per lab), so
// that root in a node shell or a privileged Pod is an unprivileged id on
// the host: the nodes' and Pods' network namespaces are owned by it, the
// containers join it (their image layers idmapped into it, their mounts
// made by the node agent from descriptors it resolved), node commands
// enter it. Its processes share the lab's cgroup limits (package cgroups).
// svclab's own code reaches a lab's dataplane from outside (NodeNetns,
// PodNetns: package nsenter), never through the lab's binaries. The
// containers' root filesystems are mounted under /run/svclab/labs/NAME,
// where the lab's ids may search; the state directory stays root's.
//
// The control plane is svclab's, not the lab's: etcd, the API server, the
// controller-manager and the scheduler run in a network namespace of
// svclab's own on the fabric (APISpec), where only the API server's port
// is open to the lab, with a PKI whose authorities each sign one kind of
// certificate (pki.go), so that nothing the lab can get signed passes for
// the API server or a node agent. Every host resource a lab can consume is
// bounded per lab (Limits): its cgroup (the control plane's too), etcd's
// quota (store.go), a disk of its own (disk.go), rotated logs
// (complog.go), the gateway's view of the lab's addresses (network.go).
//
// The control plane runs as processes supervised by a per-cluster daemon
// (this binary re-executed as "svclab-supervisor"; lab/roles runs it and
// the other re-executed processes by their argv[0]), which restarts crashed
// components with backoff and records their state in status.json. Every
// process is marked with SVCLAB_CLUSTER_DIR so that Delete and Sweep find
// them even after a crash of svclab itself; only the host root's count (a
// lab's processes, which run as its ids, cannot forge a marker).
//
// The nodes' agents (package nodeagent, which enforces NetworkPolicy with
// package netpol) run in one more supervised process ("kubelet"): each
// node keeps its own kubelet endpoint, Node, Lease and pods, and its agent
// can be stopped and started on its own
// (Cluster.StopNodeAgent), as stopping the kubelet service on a kind node:
// the node's containers run on, and the node-lifecycle controller, with
// upstream's defaults (node-monitor-grace-period 50s, unreachable taints,
// eviction after the pods' tolerationSeconds), takes it from there.
// Containers run detached from their agent; the supervisor is the child
// subreaper that reaps those of an agent that died and records their exit
// codes (exits/) for the restarted agent, which adopts them.
//
// An idle cluster is kept light on purpose: GOGC=50 for every Go process,
// a short etcd raft log, no process left per container, leader election
// renewed every 10 s, health checks on kept connections, and node commands
// entered with nsenter rather than runc exec.
//
// State lives under the state directory (/var/lib/svclab for root):
//
//	clusters/NAME/cluster.json   layout: nodes, IPs, bridge, fabric index
//	clusters/NAME/pki/           CA, etcd CA, serving and client certificates
//	clusters/NAME/kubeconfig     admin kubeconfig (client certificate)
//	clusters/NAME/config/        component kubeconfigs
//	clusters/NAME/etcd/          etcd data
//	clusters/NAME/logs/          one log per component and the supervisor's
//	clusters/NAME/disk.img       the lab's disk, mounted on nodes/
//	clusters/NAME/nodes/NODE/    the node's agent state, pods and own container
//	clusters/NAME/exits/         exit codes of containers of a dead agent
//	clusters/NAME/status.json    the supervisor's view of the components
//	clusters/NAME/userns         the pin of the lab's user namespace
//
// The backend is made of Linux, and so are most of its files (build tag
// linux). On other systems (macOS, where svclab runs the kind backend) the
// package keeps its API for the commands: New returns a Provider that has
// no clusters and makes none (ErrNeedsLinux), Preflight reports
// ErrNeedsLinux, and so do the roles of its processes; the limits, state layout, PKI and
// kubeconfigs build everywhere (provider_other.go).
package embedded
