package faults

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/netcheck"
	"github.com/svclab/svclab/lab/proxier/deploy"
	proxierfaults "github.com/svclab/svclab/lab/proxier/faults"
	"github.com/svclab/svclab/lab/proxierctl"
	"github.com/svclab/svclab/lab/scenario"
)

// proxierStuck keeps the proxier on a node running but stops its syncs.
type proxierStuck struct{ scenario.FaultSpec }

func (f proxierStuck) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	node, err := nodeName(ctx, c, p, "node")
	if err != nil {
		return err
	}
	return proxierctl.SetFaults(ctx, c, node, proxierfaults.Patch{StopSyncing: ptr(true)})
}

func (f proxierStuck) Revert(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	node, err := nodeName(ctx, c, p, "node")
	if err != nil {
		return err
	}
	return proxierctl.SetFaults(ctx, c, node, proxierfaults.Patch{StopSyncing: ptr(false)})
}

// proxierDead takes the proxier off one node: the kube-proxy DaemonSet gets
// a node affinity that excludes the node, so its Pod there is deleted and
// not replaced. The proxier does not clean up when it stops, so the node
// keeps its last rules, which no longer follow any change.
type proxierDead struct{ scenario.FaultSpec }

func (f proxierDead) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	node, err := nodeName(ctx, c, p, "node")
	if err != nil {
		return err
	}
	generation, err := updateKubeProxy(ctx, c, func(ds *appsv1.DaemonSet) { avoidNode(&ds.Spec.Template.Spec, node) })
	if err != nil {
		return err
	}
	cs, err := c.Client()
	if err != nil {
		return err
	}
	// The DaemonSet controller must have seen the affinity before the Pod
	// is deleted: one that has not yet would put a new proxier (of the old
	// template) back on the node at once.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		ds, err := cs.AppsV1().DaemonSets(deploy.Namespace).Get(ctx, deploy.Name, metav1.GetOptions{})
		return err == nil && ds.Status.ObservedGeneration >= generation, nil
	})
	if err != nil {
		return fmt.Errorf("the DaemonSet controller did not take up the change to %s/%s within a minute: %w", deploy.Namespace, deploy.Name, err)
	}
	// Done when no proxier Pod is left on the node: the proxier dies at
	// once (no grace period), as a crashed or killed one does.
	zero := int64(0)
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(deploy.Namespace).List(ctx, metav1.ListOptions{LabelSelector: deploy.Selector, FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, nil
		}
		for _, pod := range pods.Items {
			_ = cs.CoreV1().Pods(deploy.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
		return len(pods.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("the kube-proxy Pod on node %s did not go away within a minute: %w", node, err)
	}
	// A Pod deleted without grace is gone from the API at once; its node
	// stops the container a moment later, and until then the proxier
	// still follows changes. Done when it no longer answers.
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := proxierctl.Mode(ctx, c, node)
		return err != nil, nil
	})
	if err != nil {
		return fmt.Errorf("the proxier on node %s still answers a minute after its Pod was deleted: %w", node, err)
	}
	return nil
}

func (f proxierDead) Revert(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	node, err := nodeName(ctx, c, p, "node")
	if err != nil {
		return err
	}
	if _, err := updateKubeProxy(ctx, c, func(ds *appsv1.DaemonSet) { allowNode(&ds.Spec.Template.Spec, node) }); err != nil {
		return err
	}
	// Done when a proxier runs on every node again, the node's included:
	// what comes next (a check, another fault) may need it.
	cs, err := c.Client()
	if err != nil {
		return err
	}
	if err := cluster.WaitDaemonSetRolledOut(ctx, cs, deploy.Namespace, deploy.Name, 2*time.Minute); err != nil {
		return fmt.Errorf("kube-proxy did not come back on every node: %w", err)
	}
	return nil
}

// updateKubeProxy changes the kube-proxy DaemonSet and returns its new
// generation.
func updateKubeProxy(ctx context.Context, c cluster.Cluster, mutate func(*appsv1.DaemonSet)) (int64, error) {
	cs, err := c.Client()
	if err != nil {
		return 0, err
	}
	var generation int64
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds, err := cs.AppsV1().DaemonSets(deploy.Namespace).Get(ctx, deploy.Name, metav1.GetOptions{})
		if err != nil {
			return getErr("DaemonSet", deploy.Namespace, deploy.Name, err)
		}
		mutate(ds)
		ds, err = cs.AppsV1().DaemonSets(deploy.Namespace).Update(ctx, ds, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("updating DaemonSet %s/%s: %w", deploy.Namespace, deploy.Name, err)
		}
		if err == nil {
			generation = ds.Generation
		}
		return err
	})
	return generation, err
}

// allowNode removes what avoidNode added, and the affinity altogether when
// nothing else is left in it.
func allowNode(spec *corev1.PodSpec, node string) {
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil || spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return
	}
	req := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	empty := true
	for i := range req.NodeSelectorTerms {
		t := &req.NodeSelectorTerms[i]
		t.MatchExpressions = slices.DeleteFunc(t.MatchExpressions, func(r corev1.NodeSelectorRequirement) bool {
			return r.Key == hostnameLabel && r.Operator == corev1.NodeSelectorOpNotIn && slices.Equal(r.Values, []string{node})
		})
		if len(t.MatchExpressions) > 0 || len(t.MatchFields) > 0 {
			empty = false
		}
	}
	if !empty {
		return
	}
	spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = nil
	if len(spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		spec.Affinity.NodeAffinity = nil
	}
	if *spec.Affinity == (corev1.Affinity{}) {
		spec.Affinity = nil
	}
}

// staleUDPConntrackDNS switches off the proxier's UDP conntrack cleanup on
// the node(s), sends a DNS query from each node from a fixed source port
// (as a resolver that reuses its socket does) until a CoreDNS Pod on another
// node answers, and deletes the CoreDNS Pods that answered: their conntrack
// entries stay, pinning that client port to a Pod IP that no longer exists
// until the entry expires (30 s without traffic; a client that keeps asking
// keeps it alive).
type staleUDPConntrackDNS struct{ scenario.FaultSpec }

// dnsClientPort is the source port of the pinned DNS flow.
const dnsClientPort = 53535

var conntrackReplySrcRE = regexp.MustCompile(`src=(\S+) dst=\S+ sport=\d+ dport=\d+ src=(\S+)`)

func (f staleUDPConntrackDNS) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	nodes, err := nodesOrAll(ctx, c, p)
	if err != nil {
		return err
	}
	cs, err := c.Client()
	if err != nil {
		return err
	}
	dns, err := cs.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		return getErr("Service", "kube-system", "kube-dns", err)
	}
	podIPs := map[string]bool{}
	for _, n := range nodes {
		if err := proxierctl.SetFaults(ctx, c, n.Name, proxierfaults.Patch{SkipConntrackCleanup: ptr(true)}); err != nil {
			return err
		}
		ip, err := pinDNSFlow(ctx, c, cs, n.Name, dns.Spec.ClusterIP)
		if err != nil {
			return err
		}
		podIPs[ip] = true
	}
	pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil {
		return fmt.Errorf("listing the CoreDNS Pods: %w", err)
	}
	zero := int64(0)
	staleNode := map[string]string{} // dead address → its node
	for _, pod := range pods.Items {
		if !podIPs[pod.Status.PodIP] {
			continue
		}
		staleNode[pod.Status.PodIP] = pod.Spec.NodeName
		if err := cs.CoreV1().Pods("kube-system").Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting CoreDNS Pod %s: %w", pod.Name, err)
		}
		// Nodes hand out Pod addresses round-robin (the node agent as
		// host-local IPAM does), so the replacement gets a fresh address
		// and the dead one stays unused.
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		if err != nil {
			return false, nil
		}
		// Every replica must run on a fresh address: a replica on a dead
		// one would end the staleness.
		want := int32(1)
		if d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{}); err == nil && d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		var running int32
		for _, pod := range pods.Items {
			if pod.DeletionTimestamp != nil || pod.Status.PodIP == "" {
				continue
			}
			if staleNode[pod.Status.PodIP] != "" {
				_ = cs.CoreV1().Pods("kube-system").Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
				continue
			}
			if pod.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running < want {
			return false, nil
		}
		// A Pod deleted without grace is gone from the API at once, but
		// its node tears it down a moment later, and until then it still
		// answers the pinned flow: wait until no node routes to a dead
		// address any more (its veth is gone).
		for ip, node := range staleNode {
			out, err := run(ctx, c, node, "ip", "-o", "route", "show", ip+"/32")
			if err != nil || strings.TrimSpace(out) != "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("no replacement CoreDNS Pod with a new address came up within 2 minutes: %w", err)
	}
	return nil
}

// pinDNSFlow sends DNS queries from node's port dnsClientPort to the
// kube-dns ClusterIP until conntrack has the flow DNATed to a CoreDNS Pod
// on another node, and returns that Pod's address. The Pod must be remote:
// the flow from a node is masqueraded, and the kernel flushes masqueraded
// entries whose output device goes away — deleting a Pod on the same node
// removes its veth and the stale entry with it.
func pinDNSFlow(ctx context.Context, c cluster.Cluster, cs kubernetes.Interface, node, clusterIP string) (string, error) {
	port := fmt.Sprint(dnsClientPort)
	for attempt := 0; attempt < 3; attempt++ {
		pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		if err != nil {
			return "", fmt.Errorf("listing the CoreDNS Pods: %w", err)
		}
		remote := map[string]bool{}
		var local []string
		for _, pod := range pods.Items {
			switch {
			case pod.DeletionTimestamp != nil || pod.Status.PodIP == "" || pod.Status.Phase != corev1.PodRunning:
			case pod.Spec.NodeName == node:
				local = append(local, pod.Name)
			default:
				remote[pod.Status.PodIP] = true
			}
		}
		if len(remote) == 0 {
			// Every CoreDNS Pod runs on this node: move one away.
			if err := moveCoreDNSPod(ctx, cs, local); err != nil {
				return "", err
			}
			continue
		}
		// Load balancing is random: ask afresh until a remote Pod answers.
		// The port may be held for a moment: by the node's own resolver
		// between its queries, or by one of a scenario set up just before
		// whose Pod is still going away.
		busyUntil := time.Now().Add(30 * time.Second)
		for try := 0; try < 30; try++ {
			_, _ = run(ctx, c, node, "conntrack", "-D", "-p", "udp", "--orig-dst", clusterIP, "--orig-port-src", port)
			err := dnsQueryFrom(ctx, c, node, dnsClientPort, clusterIP)
			if errors.Is(err, syscall.EADDRINUSE) && time.Now().Before(busyUntil) {
				try--
				select {
				case <-ctx.Done():
					return "", ctx.Err()
				case <-time.After(500 * time.Millisecond):
				}
				continue
			}
			if err != nil {
				return "", fmt.Errorf("asking DNS from node %s: %w", node, err)
			}
			out, err := run(ctx, c, node, "conntrack", "-L", "-p", "udp", "--orig-dst", clusterIP, "--orig-port-src", port)
			if err != nil {
				return "", fmt.Errorf("reading the conntrack table of node %s: %w", node, err)
			}
			for _, m := range conntrackReplySrcRE.FindAllStringSubmatch(out, -1) {
				if remote[m[2]] {
					return m[2], nil
				}
			}
		}
	}
	return "", fmt.Errorf("could not pin the DNS flow from port %d on node %s to a CoreDNS Pod on another node: no conntrack entry for it appeared", dnsClientPort, node)
}

// dnsQueryFrom asks the DNS server at ip for kubernetes.default from node,
// from sourcePort: with svclab's own query in the node's network namespace
// where the cluster allows it, else with dig on the node.
func dnsQueryFrom(ctx context.Context, c cluster.Cluster, node string, sourcePort int, ip string) error {
	const name = "kubernetes.default.svc.cluster.local"
	nc, ok := c.(cluster.NetnsCluster)
	if !ok {
		_, err := run(ctx, c, node, "dig", "+time=2", "+tries=1", "-b", "0.0.0.0#"+strconv.Itoa(sourcePort), "@"+ip, name)
		return err
	}
	ns, err := nc.NodeNetns(node)
	if err != nil {
		return err
	}
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = netcheck.Lookup(qctx, ns, net.JoinHostPort(ip, "53"), name, sourcePort)
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return nil // no answer is an answer here: the entry is made either way
	}
	return err
}

// moveCoreDNSPod deletes one of the named CoreDNS Pods and waits until its
// Deployment runs all its replicas again, in the hope that the scheduler
// places the replacement elsewhere.
func moveCoreDNSPod(ctx context.Context, cs kubernetes.Interface, names []string) error {
	if len(names) == 0 {
		return fmt.Errorf("no CoreDNS Pod is running: kubectl -n kube-system get pods -l k8s-app=kube-dns -o wide")
	}
	if err := cs.CoreV1().Pods("kube-system").Delete(ctx, names[0], metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting CoreDNS Pod %s: %w", names[0], err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		if err != nil {
			return false, nil
		}
		var running int32
		for _, pod := range pods.Items {
			if pod.Name != names[0] && pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" {
				running++
			}
		}
		return running >= want, nil
	})
	if err != nil {
		return fmt.Errorf("CoreDNS did not come back within 2 minutes after moving Pod %s: %w", names[0], err)
	}
	return nil
}

// addressHoldLabel marks the placeholder Pods that earlier versions of
// staleUDPConntrackDNS started to keep a dead CoreDNS Pod's address from
// being handed out again (when nodes handed out the lowest free address);
// Revert still removes any that a cluster kept.
const addressHoldLabel = "svclab.dev/address-hold"

// releaseAddresses deletes the placeholder Pods.
func releaseAddresses(ctx context.Context, cs kubernetes.Interface) error {
	pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: addressHoldLabel})
	if err != nil {
		return fmt.Errorf("listing the address placeholders: %w", err)
	}
	zero := int64(0)
	for _, pod := range pods.Items {
		if err := cs.CoreV1().Pods("kube-system").Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting address placeholder %s: %w", pod.Name, err)
		}
	}
	return nil
}

func (f staleUDPConntrackDNS) Revert(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	nodes, err := nodesOrAll(ctx, c, p)
	if err != nil {
		return err
	}
	cs, err := c.Client()
	if err != nil {
		return err
	}
	if err := releaseAddresses(ctx, cs); err != nil {
		return err
	}
	for _, n := range nodes {
		if err := proxierctl.SetFaults(ctx, c, n.Name, proxierfaults.Patch{SkipConntrackCleanup: ptr(false)}); err != nil {
			return err
		}
	}
	return nil
}

// ruleDeleted deletes the rules that send a Service's ClusterIP traffic to
// its endpoints on one node, as someone "cleaning up" by hand would. The
// proxier's partial syncs do not notice; its next full resync restores them.
type ruleDeleted struct{ scenario.FaultSpec }

func (f ruleDeleted) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	node, err := nodeName(ctx, c, p, "node")
	if err != nil {
		return err
	}
	cs, err := c.Client()
	if err != nil {
		return err
	}
	ns, name := namespace(p), p.String("service", "")
	svc, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return getErr("Service", ns, name, err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return fmt.Errorf("Service %s/%s has no ClusterIP, so no proxy rules to delete", ns, name)
	}
	mode, err := proxierctl.Mode(ctx, c, node)
	if err != nil {
		return err
	}
	if mode == scenario.ProxyModeNFTables {
		for _, sp := range svc.Spec.Ports {
			elem := fmt.Sprintf("{ %s . %s . %d }", svc.Spec.ClusterIP, strings.ToLower(string(sp.Protocol)), sp.Port)
			// The Service may be seconds old: give the node's proxier
			// time to sync it before deleting its element.
			var err error
			for try := 0; try < 40; try++ {
				if _, err = run(ctx, c, node, "nft", "delete", "element", "ip", "kube-proxy", "service-ips", elem); err == nil {
					break
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(500 * time.Millisecond):
				}
			}
			if err != nil {
				return fmt.Errorf("deleting %s from the service-ips map on node %s (has the proxier synced the Service?): %w", elem, node, err)
			}
		}
		return nil
	}
	save, err := run(ctx, c, node, "iptables-save", "-t", "nat")
	if err != nil {
		return fmt.Errorf("reading the nat table of node %s: %w", node, err)
	}
	rules := iptablesServiceRules(save, svc)
	if len(rules) == 0 {
		return fmt.Errorf("node %s has no KUBE-SERVICES rule for Service %s/%s (has the proxier synced it?)", node, ns, name)
	}
	for _, r := range rules {
		// iptables-save quotes comments for the shell.
		if _, err := run(ctx, c, node, "bash", "-c", "iptables -t nat -D "+strings.TrimPrefix(r, "-A ")); err != nil {
			return fmt.Errorf("deleting %q on node %s: %w", r, node, err)
		}
	}
	return nil
}

// Revert restarts the proxier on the node: its first sync after a start
// is a full one, which restores the deleted rules. It returns once the new
// proxier answers.
func (f ruleDeleted) Revert(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	node, err := nodeName(ctx, c, p, "node")
	if err != nil {
		return err
	}
	cs, err := c.Client()
	if err != nil {
		return err
	}
	pods, err := cs.CoreV1().Pods(deploy.Namespace).List(ctx, metav1.ListOptions{LabelSelector: deploy.Selector, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return fmt.Errorf("listing the kube-proxy Pods: %w", err)
	}
	old := map[string]bool{}
	zero := int64(0)
	for _, pod := range pods.Items {
		old[pod.Name] = true
		if err := cs.CoreV1().Pods(deploy.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("restarting kube-proxy on node %s: %w", node, err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(deploy.Namespace).List(ctx, metav1.ListOptions{LabelSelector: deploy.Selector, FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, nil
		}
		for _, pod := range pods.Items {
			if !old[pod.Name] && pod.Status.Phase == corev1.PodRunning {
				_, err := proxierctl.Mode(ctx, c, node)
				return err == nil, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("kube-proxy on node %s did not come back within a minute: %w", node, err)
	}
	return nil
}

// iptablesServiceRules are the KUBE-SERVICES rules of svc's cluster IP in
// iptables-save output.
func iptablesServiceRules(save string, svc *corev1.Service) []string {
	var out []string
	for _, line := range strings.Split(save, "\n") {
		if !strings.HasPrefix(line, "-A KUBE-SERVICES ") {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			id := svc.Namespace + "/" + svc.Name
			if sp.Name != "" {
				id += ":" + sp.Name
			}
			if strings.Contains(line, `"`+id+` cluster IP"`) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}

// ipForwardOff turns IPv4 forwarding off on a node.
type ipForwardOff struct{ scenario.FaultSpec }

func (f ipForwardOff) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	return setSysctl(ctx, c, p, "net.ipv4.ip_forward", "0")
}

func (f ipForwardOff) Revert(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	return setSysctl(ctx, c, p, "net.ipv4.ip_forward", "1")
}

func setSysctl(ctx context.Context, c cluster.Cluster, p scenario.Params, key, value string) error {
	node, err := nodeName(ctx, c, p, "node")
	if err != nil {
		return err
	}
	if _, err := run(ctx, c, node, "sysctl", "-w", key+"="+value); err != nil {
		return fmt.Errorf("setting %s=%s on node %s: %w", key, value, node, err)
	}
	return nil
}

// nodePortPrimaryIPOnly gives a node a second address on its fabric
// interface. nftables mode answers NodePorts on the node's primary address
// only (nodePortAddresses: primary), iptables mode on every address.
type nodePortPrimaryIPOnly struct{ scenario.FaultSpec }

func (f nodePortPrimaryIPOnly) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	node, iface, addr, err := f.target(ctx, c, p)
	if err != nil {
		return err
	}
	if _, err := run(ctx, c, node, "ip", "addr", "add", addr, "dev", iface); err != nil {
		return fmt.Errorf("adding address %s to %s on node %s: %w", addr, iface, node, err)
	}
	return nil
}

func (f nodePortPrimaryIPOnly) Revert(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	node, iface, addr, err := f.target(ctx, c, p)
	if err != nil {
		return err
	}
	if _, err := run(ctx, c, node, "ip", "addr", "del", addr, "dev", iface); err != nil {
		return fmt.Errorf("removing address %s from %s on node %s: %w", addr, iface, node, err)
	}
	return nil
}

var ipAddrRE = regexp.MustCompile(`^\d+:\s+(\S+)\s+inet\s+(\S+)`)

// target finds the node, its fabric interface (the one holding its
// InternalIP) and the second address: the address parameter, or the node's
// address plus 100 in the last octet, in the same prefix.
func (f nodePortPrimaryIPOnly) target(ctx context.Context, c cluster.Cluster, p scenario.Params) (node, iface, addr string, err error) {
	nodes, err := nodesOrAll(ctx, c, p)
	if err != nil {
		return "", "", "", err
	}
	n := nodes[0]
	out, err := run(ctx, c, n.Name, "ip", "-o", "-4", "addr", "show")
	if err != nil {
		return "", "", "", fmt.Errorf("listing the addresses of node %s: %w", n.Name, err)
	}
	var primary netip.Prefix
	for _, line := range strings.Split(out, "\n") {
		m := ipAddrRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		pfx, err := netip.ParsePrefix(m[2])
		if err == nil && pfx.Addr().String() == n.IP {
			iface, primary = m[1], pfx
			break
		}
	}
	if iface == "" {
		return "", "", "", fmt.Errorf("node %s has no interface with its address %s", n.Name, n.IP)
	}
	if a := p.String("address", ""); a != "" {
		pfx, err := netip.ParsePrefix(a)
		if err != nil {
			return "", "", "", fmt.Errorf("address %q: write it in CIDR form, such as 172.29.1.104/24: %w", a, err)
		}
		return n.Name, iface, pfx.String(), nil
	}
	b := primary.Addr().As4()
	b[3] += 100
	return n.Name, iface, netip.PrefixFrom(netip.AddrFrom4(b), primary.Bits()).String(), nil
}

// Tables of the emulating dataplane faults, in the node's network
// namespace. A lab node is a network namespace, and the kernel lets only
// the host's initial namespace set net.netfilter.nf_conntrack_max or put
// veths on a bridge without hairpin mode; these tables reproduce what the
// learner would see (connections dropped) with rules that name what they
// stand for.
const (
	conntrackTable = ConntrackTable
	hairpinTable   = "svclab-no-hairpin"
)

// ConntrackTable is the inet table of conntrack-table-small.
const ConntrackTable = "svclab-conntrack-max"

// conntrackTableSmall caps the number of connections a node tracks: once
// max connections are tracked, new ones (forwarded to or from Pods, or made
// by the node itself) are dropped, as a full conntrack table drops them
// ("nf_conntrack: table full, dropping packet"); the connections already
// tracked go on working. One rule in chain capacity counts for both hooks, so
// the node's own connections and those it forwards fill one table.
type conntrackTableSmall struct{ scenario.FaultSpec }

func (f conntrackTableSmall) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	node, err := nodeName(ctx, c, p, "node")
	if err != nil {
		return err
	}
	if _, err := run(ctx, c, node, "bash", "-c", "nft -f - <<'EOF'\n"+conntrackMaxScript(p.Int("max", defaultConntrackMax))+"EOF\n"); err != nil {
		return fmt.Errorf("capping the conntrack table of node %s: %w", node, err)
	}
	return nil
}

// conntrackMaxScript is the nft script of the conntrack-table-small table.
// The count is of the connections the rule has seen and conntrack still
// holds, closed TCP connections aside (nft's connlimit), which fill the
// table as real ones do; the chains run after conntrack (priority -200).
func conntrackMaxScript(max int) string {
	return fmt.Sprintf(`table inet %[1]s {
	comment "emulates net.netfilter.nf_conntrack_max=%[2]d: new connections beyond %[2]d tracked ones are dropped"
	chain prerouting {
		type filter hook prerouting priority mangle - 10; policy accept;
		jump capacity
	}
	chain output {
		type filter hook output priority mangle - 10; policy accept;
		jump capacity
	}
	chain capacity {
		ct state new ct count over %[2]d counter drop comment "nf_conntrack: table full, dropping packet"
	}
}
`, conntrackTable, max)
}

// defaultConntrackMax is the cap of conntrack-table-small without max.
const defaultConntrackMax = 64

// conntrackFillTimeout bounds how long Settle waits for the capped table
// to fill.
const conntrackFillTimeout = 2 * time.Minute

// Settle waits until the capped table is full: its rule has dropped a new
// connection. The scenario's workloads fill it as they connect, and Pods
// that have just started may take a while (waitFull: false skips this,
// for a table that the learner is to fill).
func (f conntrackTableSmall) Settle(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	if !p.Bool("waitFull", true) {
		return nil
	}
	node, err := nodeName(ctx, c, p, "node")
	if err != nil {
		return err
	}
	max := p.Int("max", defaultConntrackMax)
	var last string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, conntrackFillTimeout, true, func(ctx context.Context) (bool, error) {
		out, err := run(ctx, c, node, "nft", "list", "chain", "inet", conntrackTable, "capacity")
		if err != nil {
			last = err.Error()
			return false, nil
		}
		dropped, ok := capacityDrops(out)
		if !ok {
			return false, fmt.Errorf("chain capacity of table inet %s on node %s has no counter: %q", conntrackTable, node, out)
		}
		return dropped > 0, nil
	})
	switch {
	case err == nil:
		return nil
	case !wait.Interrupted(err) || ctx.Err() != nil:
		return err
	case last != "":
		return fmt.Errorf("node %s's conntrack table (capped at %d connections) did not fill within %s: %s", node, max, conntrackFillTimeout, last)
	default:
		return fmt.Errorf("node %s's conntrack table (capped at %d connections) did not fill within %s: the scenario's workloads open fewer connections through the node", node, max, conntrackFillTimeout)
	}
}

var capacityCounterRE = regexp.MustCompile(`ct count over \d+ counter packets (\d+)`)

// capacityDrops reads how many packets the capacity rule has dropped.
func capacityDrops(chain string) (int, bool) {
	m := capacityCounterRE.FindStringSubmatch(chain)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// ConntrackLimit is what limits the connections a node tracks.
type ConntrackLimit struct {
	// Max is the limit in effect: the kernel's nf_conntrack_max, or the
	// stand-in's cap when that is lower.
	Max int
	// Sysctl is net.netfilter.nf_conntrack_max as the node reads it (the
	// machine's: only the host's initial namespace may set it).
	Sysctl int
	// Count is net.netfilter.nf_conntrack_count, the node's entries.
	Count int
	// Capped is set when the stand-in table caps the node below Sysctl.
	Capped bool
}

var ctCountOverRE = regexp.MustCompile(`ct count over (\d+)`)

// ConntrackMax reads how many connections node may track: the sysctl and,
// where the conntrack-table-small table is in place, its lowest cap (a
// learner may have changed the rule or added others).
func ConntrackMax(ctx context.Context, c cluster.Cluster, node string) (ConntrackLimit, error) {
	out, err := run(ctx, c, node, "sh", "-c", "cat /proc/sys/net/netfilter/nf_conntrack_max /proc/sys/net/netfilter/nf_conntrack_count; nft list table inet "+conntrackTable+" 2>/dev/null || true")
	if err != nil {
		return ConntrackLimit{}, fmt.Errorf("reading the conntrack limit of node %s: %w", node, err)
	}
	return parseConntrackMax(out)
}

func parseConntrackMax(out string) (ConntrackLimit, error) {
	lines := strings.SplitN(out, "\n", 3)
	if len(lines) < 2 {
		return ConntrackLimit{}, fmt.Errorf("unexpected answer %q", out)
	}
	var l ConntrackLimit
	var err error
	if l.Sysctl, err = strconv.Atoi(strings.TrimSpace(lines[0])); err != nil {
		return l, fmt.Errorf("nf_conntrack_max: %w", err)
	}
	if l.Count, err = strconv.Atoi(strings.TrimSpace(lines[1])); err != nil {
		return l, fmt.Errorf("nf_conntrack_count: %w", err)
	}
	l.Max = l.Sysctl
	if len(lines) == 3 {
		for _, m := range ctCountOverRE.FindAllStringSubmatch(lines[2], -1) {
			if n, err := strconv.Atoi(m[1]); err == nil && n < l.Max {
				l.Max, l.Capped = n, true
			}
		}
	}
	return l, nil
}

func (f conntrackTableSmall) Revert(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	node, err := nodeName(ctx, c, p, "node")
	if err != nil {
		return err
	}
	return deleteTable(ctx, c, node, "inet", conntrackTable)
}

// deleteTable deletes an nft table on node; a table that is gone already
// is fine (the learner may have deleted it).
func deleteTable(ctx context.Context, c cluster.Cluster, node, family, table string) error {
	if _, err := run(ctx, c, node, "bash", "-c", fmt.Sprintf("! nft list table %s %s >/dev/null 2>&1 || nft delete table %s %s", family, table, family, table)); err != nil {
		return fmt.Errorf("deleting table %s %s on node %s: %w", family, table, node, err)
	}
	return nil
}

// hairpin drops the packets a node would send back to the Pod they came
// from, as a bridge port without hairpin mode does: a Pod that reaches its
// own Service and is load-balanced to itself gets no answer, while every
// other client is unaffected. It holds for every Pod of the node(s), those
// created later included (deleting the Pods does not get round it): a
// forwarded packet records its source twice in a set, and one whose
// destination (after the Service's DNAT, before masquerade) is its source
// is dropped — nft cannot compare two fields of a packet, a set lookup of
// the pair can.
type hairpin struct{ scenario.FaultSpec }

// hairpinScript is the fault's table.
const hairpinScript = `table inet ` + hairpinTable + ` {
	comment "emulates Pod veths on a bridge without hairpin mode: a packet never goes back to the Pod it came from"
	set self {
		type ipv4_addr . ipv4_addr
		flags dynamic,timeout
		timeout 10m
		size 65536
	}
	chain forward {
		type filter hook forward priority filter - 10; policy accept;
		update @self { ip saddr . ip saddr }
		ip saddr . ip daddr @self counter drop comment "no hairpin"
	}
}
`

func (f hairpin) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	nodes, err := nodesOrAll(ctx, c, p)
	if err != nil {
		return err
	}
	cs, err := c.Client()
	if err != nil {
		return err
	}
	ns, name := namespace(p), p.String("service", "")
	if _, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		return getErr("Service", ns, name, err)
	}
	eps, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + name})
	if err != nil {
		return fmt.Errorf("listing the EndpointSlices of Service %s/%s: %w", ns, name, err)
	}
	hasEndpoint := map[string]bool{}
	for _, s := range eps.Items {
		for _, ep := range s.Endpoints {
			if ep.NodeName != nil && len(ep.Addresses) > 0 {
				hasEndpoint[*ep.NodeName] = true
			}
		}
	}
	covered := 0
	for _, n := range nodes {
		if !hasEndpoint[n.Name] {
			continue
		}
		if _, err := run(ctx, c, n.Name, "bash", "-c", "nft -f - <<'EOF'\n"+hairpinScript+"EOF\n"); err != nil {
			return fmt.Errorf("turning hairpin off on node %s: %w", n.Name, err)
		}
		covered++
	}
	if covered == 0 {
		return fmt.Errorf("Service %s/%s has no endpoints on the node(s) to break hairpin traffic for", ns, name)
	}
	return nil
}

func (f hairpin) Revert(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	nodes, err := nodesOrAll(ctx, c, p)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range nodes {
		errs = append(errs, deleteTable(ctx, c, n.Name, "inet", hairpinTable))
	}
	return errors.Join(errs...)
}

func ptr[T any](v T) *T { return &v }

// outsideRoute routes a CIDR of the network outside the cluster (the lab's
// load balancer's namespace, where outside clients stand) through one
// node, as a router's static route or a BGP speaker that advertises the
// Service range to the network would.
type outsideRoute struct{ scenario.FaultSpec }

func (f outsideRoute) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	ns, cidr, via, err := f.target(ctx, c, p)
	if err != nil {
		return err
	}
	if _, err := cluster.NetnsOutput(ctx, ns, "the network outside the cluster", "ip", "route", "replace", cidr, "via", via); err != nil {
		return fmt.Errorf("routing %s through %s outside the cluster: %w", cidr, via, err)
	}
	return nil
}

func (f outsideRoute) Revert(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	ns, cidr, via, err := f.target(ctx, c, p)
	if err != nil {
		return err
	}
	if _, err := cluster.NetnsOutput(ctx, ns, "the network outside the cluster", "ip", "route", "del", cidr, "via", via); err != nil && !strings.Contains(err.Error(), "No such process") {
		return fmt.Errorf("removing the route of %s through %s outside the cluster: %w", cidr, via, err)
	}
	return nil
}

// target finds the outside network's namespace, the CIDR (default: the
// Service range) and the address of the node it goes through.
func (f outsideRoute) target(ctx context.Context, c cluster.Cluster, p scenario.Params) (cluster.Netns, string, string, error) {
	lb, ok := c.(cluster.LoadBalancerCluster)
	if !ok {
		return nil, "", "", fmt.Errorf("%s needs a cluster with a network outside it (embedded clusters)", f.Name())
	}
	ns, _, err := lb.OutsideNetns()
	if err != nil {
		return nil, "", "", fmt.Errorf("entering the network outside cluster %s: %w", c.Name(), err)
	}
	cidr := p.String("cidr", cluster.DefaultServiceCIDR)
	if _, err := netip.ParsePrefix(cidr); err != nil {
		return nil, "", "", fmt.Errorf("cidr %q: write it in CIDR form, such as 10.96.0.0/16: %w", cidr, err)
	}
	node, err := nodeName(ctx, c, p, "node")
	if err != nil {
		return nil, "", "", err
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, "", "", fmt.Errorf("listing the nodes of cluster %s: %w", c.Name(), err)
	}
	for _, n := range nodes {
		if n.Name == node {
			return ns, cidr, n.IP, nil
		}
	}
	return nil, "", "", fmt.Errorf("cluster %s has no node %s", c.Name(), node)
}
