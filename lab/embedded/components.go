//go:build linux

package embedded

import (
	"fmt"
	"path/filepath"

	"github.com/svclab/svclab/lab/cluster"
)

const (
	etcdClientPort        = 2379
	etcdPeerPort          = 2380
	controllerManagerPort = 10257
	schedulerPort         = 10259
)

// Component is one control-plane process: how to run it and how to tell it
// is healthy.
type Component struct {
	Name string
	// After names the component that must be healthy before this one
	// starts.
	After string
	// Args follow the component name on svclab-kube's command line, or,
	// for Self components, argv[0].
	Args []string
	// Self components are this executable re-executed (argv[0] Argv0) in
	// the host's namespaces, rather than svclab-kube in the control
	// plane's network namespace (APISpec).
	Self  bool
	Argv0 string
	// Health is an HTTPS URL (HTTP with HealthSocket) that answers 200
	// when the component is healthy. It is asked from inside the control
	// plane's network namespace (on its loopback, where the components
	// other than the API server listen), trusting HealthCA and presenting
	// the HealthCert client certificate (a pki base name; empty for none).
	Health     string
	HealthCert string
	// HealthCA is the pki base name of the CA that signed the serving
	// certificate.
	HealthCA string
	// HealthSocket, when set, is the Unix socket Health is asked on.
	HealthSocket string
}

// Components returns the control plane of st in start order, with every
// file path inside the cluster's state directory dir. All but the API
// server listen on the control plane's loopback only, in a network
// namespace of svclab's (APISpec): nothing of the lab reaches etcd, its
// peer port or the components' health ports.
func Components(st *State, dir string) []Component {
	p := paths{dir}
	pki := func(name string) string { return filepath.Join(p.pki(), name) }
	ip := st.API.IP
	const loopback = "127.0.0.1"
	etcdClient := fmt.Sprintf("https://%s:%d", loopback, etcdClientPort)
	etcdPeer := fmt.Sprintf("https://%s:%d", loopback, etcdPeerPort)
	comps := []Component{
		{
			Name: "etcd",
			Args: []string{
				"--name=etcd",
				"--data-dir=" + p.etcdData(),
				"--listen-client-urls=" + etcdClient,
				"--advertise-client-urls=" + etcdClient,
				"--listen-peer-urls=" + etcdPeer,
				"--initial-advertise-peer-urls=" + etcdPeer,
				"--initial-cluster=etcd=" + etcdPeer,
				// The lab's objects take at most its store: past it
				// etcd refuses writes (watchStore tells the learner and
				// frees the space once objects are deleted).
				fmt.Sprintf("--quota-backend-bytes=%d", st.Limits.store()),
				"--cert-file=" + pki("etcd-server.crt"),
				"--key-file=" + pki("etcd-server.key"),
				"--trusted-ca-file=" + pki(etcdCAFile+".crt"),
				"--client-cert-auth=true",
				// The peer port too speaks TLS and asks for etcd-ca's
				// certificates: whatever reaches the control plane's
				// loopback (a webhook URL of the learner's, say) cannot
				// hand etcd raft messages.
				"--peer-cert-file=" + pki("etcd-server.crt"),
				"--peer-key-file=" + pki("etcd-server.key"),
				"--peer-trusted-ca-file=" + pki(etcdCAFile+".crt"),
				"--peer-client-cert-auth=true",
				// What etcd keeps on the host's disk besides its store:
				// two log segments (64 MiB each) and two snapshots.
				"--max-wals=2",
				"--max-snapshots=2",
				// The raft log kept in memory between snapshots: etcd's
				// defaults (10000 + 5000 entries) suit a busy production
				// cluster, not an idle lab one.
				"--snapshot-count=2000",
				"--snapshot-catchup-entries=1000",
				// A lab cluster trades crash durability for speed: its
				// data is thrown away with the cluster anyway.
				"--unsafe-no-fsync=true",
				"--log-level=warn",
			},
			Health:     etcdClient + "/health",
			HealthCert: "apiserver-etcd-client",
			HealthCA:   etcdCAFile,
		},
		{
			Name:  "kube-apiserver",
			After: "etcd",
			Args: []string{
				"--advertise-address=" + ip,
				"--bind-address=0.0.0.0",
				fmt.Sprintf("--secure-port=%d", apiserverPort),
				"--cert-dir=" + filepath.Join(p.pki(), "apiserver-generated"),
				"--etcd-servers=" + etcdClient,
				"--etcd-cafile=" + pki(etcdCAFile+".crt"),
				"--etcd-certfile=" + pki("apiserver-etcd-client.crt"),
				"--etcd-keyfile=" + pki("apiserver-etcd-client.key"),
				"--client-ca-file=" + pki(caFile+".crt"),
				"--tls-cert-file=" + pki("apiserver.crt"),
				"--tls-private-key-file=" + pki("apiserver.key"),
				"--kubelet-client-certificate=" + pki("apiserver-kubelet-client.crt"),
				"--kubelet-client-key=" + pki("apiserver-kubelet-client.key"),
				// The node agents are verified against the authority that
				// signs them alone, not the one the lab's CSRs go to.
				"--kubelet-certificate-authority=" + pki(kubeletCAFile+".crt"),
				// A node is reached at the address svclab gave it, never
				// by a name resolved on the host's resolver (a Node a
				// learner makes up could name anything).
				"--kubelet-preferred-address-types=InternalIP",
				"--requestheader-client-ca-file=" + pki(frontProxyCAFile+".crt"),
				"--requestheader-allowed-names=front-proxy-client",
				"--requestheader-extra-headers-prefix=X-Remote-Extra-",
				"--requestheader-group-headers=X-Remote-Group",
				"--requestheader-username-headers=X-Remote-User",
				"--proxy-client-cert-file=" + pki("front-proxy-client.crt"),
				"--proxy-client-key-file=" + pki("front-proxy-client.key"),
				"--service-cluster-ip-range=" + st.ServiceCIDR,
				"--service-node-port-range=" + cluster.DefaultNodePortRange,
				"--service-account-issuer=https://kubernetes.default.svc." + cluster.DefaultDNSDomain,
				"--service-account-key-file=" + pki("sa.pub"),
				"--service-account-signing-key-file=" + pki("sa.key"),
				"--authorization-mode=Node,RBAC",
				"--enable-admission-plugins=NodeRestriction",
				"--allow-privileged=true",
				"--profiling=false",
			},
			Health:   fmt.Sprintf("https://%s:%d/readyz", loopback, apiserverPort),
			HealthCA: serverCAFile,
		},
		{
			Name:  "kube-controller-manager",
			After: "kube-apiserver",
			Args: []string{
				"--kubeconfig=" + p.config("controller-manager.conf"),
				// No delegated authentication or authorization: the
				// lab's API server (its webhooks and aggregated APIs
				// reach this loopback) and certificates the lab can get
				// signed are answered nothing but /healthz, /readyz and
				// /livez, whatever RBAC the learner writes.
				"--bind-address=" + loopback,
				fmt.Sprintf("--secure-port=%d", controllerManagerPort),
				"--tls-cert-file=" + pki("controller-manager-serving.crt"),
				"--tls-private-key-file=" + pki("controller-manager-serving.key"),
				// Pods verify the API server with kube-root-ca.crt: the
				// authority of its serving certificate.
				"--root-ca-file=" + pki(serverCAFile+".crt"),
				"--service-account-private-key-file=" + pki("sa.key"),
				"--use-service-account-credentials=true",
				// What the lab's approved CSRs are signed with: the
				// authority of the API server's clients, trusted for
				// nothing svclab relies on.
				"--cluster-signing-cert-file=" + pki(caFile+".crt"),
				"--cluster-signing-key-file=" + pki(caFile+".key"),
				"--cluster-name=" + st.Name,
				"--allocate-node-cidrs=true",
				"--cluster-cidr=" + st.PodCIDR,
				fmt.Sprintf("--node-cidr-mask-size=%d", cluster.DefaultNodeCIDRMask),
				"--service-cluster-ip-range=" + st.ServiceCIDR,
				"--controllers=*,bootstrapsigner,tokencleaner",
				"--leader-elect=true",
				leaseDuration, renewDeadline, retryPeriod,
				"--profiling=false",
			},
			Health:   fmt.Sprintf("https://%s:%d/healthz", loopback, controllerManagerPort),
			HealthCA: serverCAFile,
		},
		{
			Name:  "kube-scheduler",
			After: "kube-apiserver",
			Args: []string{
				"--kubeconfig=" + p.config("scheduler.conf"),
				// As the controller-manager: health endpoints only.
				"--bind-address=" + loopback,
				fmt.Sprintf("--secure-port=%d", schedulerPort),
				"--tls-cert-file=" + pki("scheduler-serving.crt"),
				"--tls-private-key-file=" + pki("scheduler-serving.key"),
				"--leader-elect=true",
				leaseDuration, renewDeadline, retryPeriod,
				"--profiling=false",
			},
			Health:   fmt.Sprintf("https://%s:%d/healthz", loopback, schedulerPort),
			HealthCA: serverCAFile,
		},
	}
	comps = append(comps, NodeAgentsComponent(dir))
	if st.LB != nil {
		comps = append(comps, LoadBalancerComponent(dir))
	}
	return comps
}

// Leader election of kube-controller-manager and kube-scheduler: they keep
// their Leases in kube-system as kubeadm's do, but a lab has one instance
// of each, so the leader renews every 10 s instead of every 2 s (upstream's
// 15s/10s/2s made those two Lease writes most of an idle lab's API
// traffic). A restarted component waits at most the lease duration.
const (
	leaseDuration = "--leader-elect-lease-duration=30s"
	renewDeadline = "--leader-elect-renew-deadline=20s"
	retryPeriod   = "--leader-elect-retry-period=10s"
)

// nodeAgentsName is the component that runs every node's agent.
const nodeAgentsName = "kubelet"

// NodeAgentsComponent runs the agents (kubelets) of all the cluster's nodes
// in one process: each node still has its own kubelet endpoint, Node, Lease
// and pods, and its agent can be stopped on its own (Cluster.StopNodeAgent).
// Its health is the process's, on a Unix socket.
func NodeAgentsComponent(dir string) Component {
	return Component{
		Name:         nodeAgentsName,
		After:        "kube-apiserver",
		Self:         true,
		Argv0:        NodeAgentArg0,
		Args:         []string{dir},
		Health:       "http://node-agents/healthz",
		HealthSocket: paths{dir}.agentsSocket(),
	}
}

func nodeContainerID(node string) string { return "node-" + node }
