//go:build linux

package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded/netpol"
	"github.com/svclab/svclab/lab/embedded/nodeagent"
	"github.com/svclab/svclab/lab/images"
)

// podNetnsPrefix starts the network namespace names of cluster's pods.
func podNetnsPrefix(clusterName string) string { return netnsPrefix + clusterName + "-pod-" }

func (p paths) node(name string) string         { return filepath.Join(p.nodes(), name) }
func (p paths) nodeBundle(name string) string   { return filepath.Join(p.node(name), "node-container") }
func (p paths) nodeRuncRoot(name string) string { return filepath.Join(p.node(name), "node-runc") }

// nodeContainer is node name's own container.
func (p paths) nodeContainer(name string) nodeagent.NodeContainer {
	return nodeagent.NodeContainer{RuncRoot: p.nodeRuncRoot(name), Bundle: p.nodeBundle(name), ID: nodeContainerID(name)}
}

// exits holds the exit codes of containers the supervisor reaped for a
// node agent that had died (see nodeagent.ReapOrphans).
func (p paths) exits() string { return filepath.Join(p.dir, "exits") }

// prepareNodeContainers writes each node's own container bundle on the
// node image (tools and svclab-kube).
func prepareNodeContainers(st *State, dir string, store *images.Store) error {
	img, err := imageResolver{store}.Resolve(images.ImageNode)
	if err != nil {
		return fmt.Errorf("the nodes' filesystem image: %w", err)
	}
	pa := paths{dir}
	for _, n := range st.Nodes {
		if err := os.MkdirAll(pa.nodeRuncRoot(n.Name), 0o700); err != nil {
			return err
		}
		if err := nodeagent.PrepareNodeContainer(pa.nodeContainer(n.Name), img, "/run/netns/"+n.Netns, n.Name, nodeCgroup(st.Name, n.Name), st.isolation(dir)); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	return nil
}

// nodeAgentConfig is the agent configuration of node n.
func nodeAgentConfig(st *State, dir string, n NodeSpec) nodeagent.Config {
	pa := paths{dir}
	return nodeagent.Config{
		NodeName:       n.Name,
		NodeIP:         n.IP,
		Netns:          n.Netns,
		Kubeconfig:     pa.config("node-" + n.Name + ".conf"),
		ServingCert:    filepath.Join(pa.pki(), "node-"+n.Name+"-serving.crt"),
		ServingKey:     filepath.Join(pa.pki(), "node-"+n.Name+"-serving.key"),
		ClientCA:       filepath.Join(pa.pki(), kubeletCAFile+".crt"),
		StateDir:       pa.node(n.Name),
		PodNetnsPrefix: podNetnsPrefix(st.Name),
		ClusterDNS:     cluster.DefaultClusterDNS,
		DNSDomain:      cluster.DefaultDNSDomain,
		ExitsDir:       pa.exits(),
		NodeContainer:  pa.nodeContainer(n.Name),
		Marker:         EnvClusterDir + "=" + dir,
		CgroupParent:   nodeCgroup(st.Name, n.Name),
		Isolation:      st.isolation(dir),
		Logs:           st.Limits.Logs,
	}
}

// agentsSocket is where the node agents' process answers its health.
func (p paths) agentsSocket() string { return filepath.Join(p.dir, "node-agents.sock") }

// policyPath is where the node agents' socket tells how far a node's
// NetworkPolicy agent has got (?node=NAME: a netpol.Synced).
const policyPath = "/netpol-synced"

// agentStopped marks a node whose agent is stopped (StopNodeAgent).
func (p paths) agentStopped(node string) string { return filepath.Join(p.node(node), "agent-stopped") }

// agentRestartDelay is how long a node's agent that failed waits before it
// runs again.
const agentRestartDelay = 2 * time.Second

// runNodeAgents is the re-executed node agents' main: every node's agent
// in this one process, each started and stopped on its own as the node's
// agent-stopped mark comes and goes.
func runNodeAgents(dir string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	pa := paths{dir}
	st, err := loadState(pa)
	if err != nil {
		log.Error("cannot read the cluster state", "err", err)
		return 1
	}
	exe, _ := os.Executable()
	store := images.NewStore(st.ImagesDir, images.Options{SvclabBin: exe, KubeBin: st.KubeBin, Logger: log})
	os.Remove(pa.agentsSocket())
	l, err := net.Listen("unix", pa.agentsSocket())
	if err != nil {
		log.Error("opening the health socket", "err", err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })
	policy := map[string]*netpol.Progress{}
	for _, n := range st.Nodes {
		policy[n.Name] = &netpol.Progress{}
	}
	mux.HandleFunc("GET "+policyPath, func(w http.ResponseWriter, r *http.Request) {
		p, ok := policy[r.URL.Query().Get("node")]
		if !ok {
			http.Error(w, "no such node", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(p.Get())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	defer srv.Close()
	go watchLimits(ctx, st, pa, log)
	go podRoutes(ctx, st, pa, log)
	var wg sync.WaitGroup
	mounts := nodeagent.NewMountBudget(nodeagent.DefaultMountBudget)
	for _, n := range st.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := nodeAgentConfig(st, dir, n)
			cfg.Mounts, cfg.Policy = mounts, policy[n.Name]
			runNodeAgent(ctx, pa, cfg, imageResolver{store}, log.With("node", n.Name))
		}()
	}
	wg.Wait()
	return 0
}

// runNodeAgent runs one node's agent until ctx ends, but not while the
// node's agent is marked stopped; an agent that fails runs again.
func runNodeAgent(ctx context.Context, pa paths, cfg nodeagent.Config, img nodeagent.Images, log *slog.Logger) {
	stopped := func() bool {
		_, err := os.Stat(pa.agentStopped(cfg.NodeName))
		return err == nil
	}
	wait := func(ctx context.Context, d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	for ctx.Err() == nil {
		if stopped() {
			wait(ctx, agentPoll)
			continue
		}
		nctx, cancel := context.WithCancel(ctx)
		go func() {
			for !stopped() && wait(nctx, agentPoll) {
			}
			cancel()
		}()
		err := nodeagent.Run(nctx, cfg, img, log)
		stoppedNow := nctx.Err() != nil && ctx.Err() == nil
		cancel()
		switch {
		case ctx.Err() != nil:
		case stoppedNow:
			log.Info("node agent stopped")
		default:
			log.Error("node agent failed; running it again", "err", err, "in", agentRestartDelay)
			wait(ctx, agentRestartDelay)
		}
	}
}

// podRoutes keeps the control plane's routes to every node's Pod CIDR
// (via that node), so that the API server reaches Pods (its proxy, exec
// through the nodes is direct) and answers Pods that reach it.
func podRoutes(ctx context.Context, st *State, pa paths, log *slog.Logger) {
	cfg, err := clientcmd.BuildConfigFromFlags("", pa.config("node-"+st.ControlPlane().Name+".conf"))
	if err == nil {
		var client kubernetes.Interface
		if client, err = kubernetes.NewForConfig(cfg); err == nil {
			nodeagent.PodRoutes(ctx, client, st.API.Netns, st.ownPodRoute, log.With("routes", "control plane"))
			return
		}
	}
	log.Error("the control plane's routes to the Pods", "err", err)
}

// ownPodRoute tells whether the control plane may route cidr via ip for
// Node node: node is one of the cluster's, at its own address, and cidr
// is a node's share of the cluster's Pod range.
func (s *State) ownPodRoute(node string, ip netip.Addr, cidr netip.Prefix) bool {
	n, ok := s.Node(node)
	pods, err := netip.ParsePrefix(s.PodCIDR)
	return ok && err == nil && n.IP == ip.String() && cidr.Bits() == cluster.DefaultNodeCIDRMask &&
		pods.Bits() <= cidr.Bits() && pods.Contains(cidr.Addr())
}

// agentPoll is how often a node's agent-stopped mark is looked at.
const agentPoll = 250 * time.Millisecond

// imageResolver adapts the image store to what the node agent needs.
type imageResolver struct{ s *images.Store }

func (r imageResolver) Resolve(ref string) (nodeagent.Image, error) {
	img, err := r.s.Resolve(ref)
	if err != nil {
		if errors.Is(err, images.ErrNotFound) {
			return nodeagent.Image{}, fmt.Errorf("%w: %w", nodeagent.ErrImageNotFound, err)
		}
		return nodeagent.Image{}, err
	}
	return nodeagent.Image{Name: img.Name, Layers: img.Layers, Entrypoint: img.Entrypoint, Cmd: img.Cmd, Env: img.Env, WorkingDir: img.WorkingDir, StopSignal: img.StopSignal}, nil
}

// nodeAgentRBAC lets node agents watch what a kubelet and kindnet watch
// together: ConfigMaps, Secrets and Services for pods' environment, and
// all Nodes for the routes to their pod CIDRs. The Node authorizer alone
// allows a node only its own objects.
func nodeAgentRBAC(ctx context.Context, client kubernetes.Interface) error {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "svclab:node-agent", Labels: map[string]string{"app.kubernetes.io/managed-by": "svclab"}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes", "configmaps", "secrets", "services"}, Verbs: []string{"get", "list", "watch"}},
			// NetworkPolicy enforcement (package netpol) follows every
			// Pod, Namespace and NetworkPolicy, and reports policies it
			// cannot enforce as events.
			{APIGroups: []string{""}, Resources: []string{"pods", "namespaces"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "svclab:node-agent", Labels: role.Labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: "system:nodes"}},
	}
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// markNodes does what kubeadm does after the kubelets register: the
// control-plane node gets its role label and, when there are workers, the
// NoSchedule taint (a kubelet may not set these on itself). The cluster
// shape's node labels (zones) are applied here too, once, as "kubectl
// label" would: a node agent that registered with them would put them back
// on every status update (virtual-kubelet's three-way patch), undoing a
// learner's or a fault's "kubectl label node … zone-".
func markNodes(ctx context.Context, client kubernetes.Interface, st *State) error {
	for _, n := range st.Nodes {
		if len(n.Labels) == 0 {
			continue
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": n.Labels}})
		if err != nil {
			return err
		}
		if _, err := client.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("labelling node %s: %w", n.Name, err)
		}
	}
	cp := st.ControlPlane()
	taints := ""
	if len(st.Nodes) > 1 {
		taints = `,"spec":{"taints":[{"key":"node-role.kubernetes.io/control-plane","effect":"NoSchedule"}]}`
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":"","node.kubernetes.io/exclude-from-external-load-balancers":""}}%s}`, taints)
	_, err := client.CoreV1().Nodes().Patch(ctx, cp.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// waitNodesReady waits until every node of st is registered and Ready.
func waitNodesReady(ctx context.Context, client kubernetes.Interface, st *State, deadline time.Time) error {
	for {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		ready := map[string]bool{}
		if err == nil {
			for _, n := range nodes.Items {
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && n.Spec.PodCIDR != "" {
						ready[n.Name] = true
					}
				}
			}
		}
		var missing []string
		for _, n := range st.Nodes {
			if !ready[n.Name] {
				missing = append(missing, n.Name)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nodes not Ready in time: %v (see logs/%s.log)", missing, nodeAgentsName)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// isolation is what every container of the cluster in dir shares (see
// nodeagent.Isolation).
func (s *State) isolation(dir string) nodeagent.Isolation {
	iso := nodeagent.Isolation{Userns: paths{dir}.userns(), RunDir: runDir(s.Name)}
	if s.IDs != nil {
		iso.IDs = s.IDs.Range
	}
	return iso
}
