//go:build linux

package embedded

import (
	"fmt"
	"path/filepath"

	"github.com/svclab/svclab/lab/cluster"
)

const (
	etcdClientPort        = 2379
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
	// the host's namespaces, rather than svclab-kube in the control-plane
	// node's network namespace.
	Self  bool
	Argv0 string
	// Path, when set, runs that program with Args (in the host's
	// namespaces) instead.
	Path string
	// Health is an HTTPS URL (HTTP with HealthSocket) that answers 200
	// when the component is healthy. It is probed from the host with the cluster CA and the
	// HealthCert client certificate (a pki base name; empty for none).
	Health     string
	HealthCert string
	// HealthCA is the pki base name of the CA that signed the serving
	// certificate.
	HealthCA string
	// HealthSocket, when set, is the Unix socket Health is asked on.
	HealthSocket string
}

// Components returns the control plane of st in start order, with every
// file path inside the cluster's state directory dir.
func Components(st *State, dir string) []Component {
	p := paths{dir}
	pki := func(name string) string { return filepath.Join(p.pki(), name) }
	cp := st.ControlPlane()
	ip := cp.IP
	etcdPeer := "http://127.0.0.1:2380"
	comps := []Component{
		{
			Name: "etcd",
			Args: []string{
				"--name=" + cp.Name,
				"--data-dir=" + p.etcdData(),
				fmt.Sprintf("--listen-client-urls=https://127.0.0.1:%d,https://%s:%d", etcdClientPort, ip, etcdClientPort),
				fmt.Sprintf("--advertise-client-urls=https://%s:%d", ip, etcdClientPort),
				"--listen-peer-urls=" + etcdPeer,
				"--initial-advertise-peer-urls=" + etcdPeer,
				"--initial-cluster=" + cp.Name + "=" + etcdPeer,
				"--listen-metrics-urls=http://127.0.0.1:2381",
				"--cert-file=" + pki("etcd-server.crt"),
				"--key-file=" + pki("etcd-server.key"),
				"--trusted-ca-file=" + pki("etcd-ca.crt"),
				"--client-cert-auth=true",
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
			Health:     fmt.Sprintf("https://%s:%d/health", ip, etcdClientPort),
			HealthCert: "apiserver-etcd-client",
			HealthCA:   "etcd-ca",
		},
		{
			Name:  "kube-apiserver",
			After: "etcd",
			Args: []string{
				"--advertise-address=" + ip,
				"--bind-address=0.0.0.0",
				fmt.Sprintf("--secure-port=%d", apiserverPort),
				"--cert-dir=" + filepath.Join(p.pki(), "apiserver-generated"),
				fmt.Sprintf("--etcd-servers=https://127.0.0.1:%d", etcdClientPort),
				"--etcd-cafile=" + pki("etcd-ca.crt"),
				"--etcd-certfile=" + pki("apiserver-etcd-client.crt"),
				"--etcd-keyfile=" + pki("apiserver-etcd-client.key"),
				"--client-ca-file=" + pki("ca.crt"),
				"--tls-cert-file=" + pki("apiserver.crt"),
				"--tls-private-key-file=" + pki("apiserver.key"),
				"--kubelet-client-certificate=" + pki("apiserver-kubelet-client.crt"),
				"--kubelet-client-key=" + pki("apiserver-kubelet-client.key"),
				"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
				"--requestheader-client-ca-file=" + pki("front-proxy-ca.crt"),
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
			Health:   fmt.Sprintf("https://%s:%d/readyz", ip, apiserverPort),
			HealthCA: "ca",
		},
		{
			Name:  "kube-controller-manager",
			After: "kube-apiserver",
			Args: []string{
				"--kubeconfig=" + p.config("controller-manager.conf"),
				"--authentication-kubeconfig=" + p.config("controller-manager.conf"),
				"--authorization-kubeconfig=" + p.config("controller-manager.conf"),
				"--bind-address=0.0.0.0",
				fmt.Sprintf("--secure-port=%d", controllerManagerPort),
				"--tls-cert-file=" + pki("controller-manager-serving.crt"),
				"--tls-private-key-file=" + pki("controller-manager-serving.key"),
				"--client-ca-file=" + pki("ca.crt"),
				"--requestheader-client-ca-file=" + pki("front-proxy-ca.crt"),
				"--root-ca-file=" + pki("ca.crt"),
				"--service-account-private-key-file=" + pki("sa.key"),
				"--use-service-account-credentials=true",
				"--cluster-signing-cert-file=" + pki("ca.crt"),
				"--cluster-signing-key-file=" + pki("ca.key"),
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
			Health:   fmt.Sprintf("https://%s:%d/healthz", ip, controllerManagerPort),
			HealthCA: "ca",
		},
		{
			Name:  "kube-scheduler",
			After: "kube-apiserver",
			Args: []string{
				"--kubeconfig=" + p.config("scheduler.conf"),
				"--authentication-kubeconfig=" + p.config("scheduler.conf"),
				"--authorization-kubeconfig=" + p.config("scheduler.conf"),
				"--bind-address=0.0.0.0",
				fmt.Sprintf("--secure-port=%d", schedulerPort),
				"--tls-cert-file=" + pki("scheduler-serving.crt"),
				"--tls-private-key-file=" + pki("scheduler-serving.key"),
				"--client-ca-file=" + pki("ca.crt"),
				"--requestheader-client-ca-file=" + pki("front-proxy-ca.crt"),
				"--leader-elect=true",
				leaseDuration, renewDeadline, retryPeriod,
				"--profiling=false",
			},
			Health:   fmt.Sprintf("https://%s:%d/healthz", ip, schedulerPort),
			HealthCA: "ca",
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
