//go:build linux

package embedded

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded/hostexec"
	"github.com/svclab/svclab/lab/embedded/nodeagent"
	"github.com/svclab/svclab/lab/embedded/nsenter"
)

var _ cluster.NetnsCluster = (*Cluster)(nil)

// NodeNetns returns node's network namespace, entered from the host.
func (c *Cluster) NodeNetns(node string) (cluster.Netns, error) {
	n, ok := c.st.Node(node)
	if !ok {
		return nil, fmt.Errorf("cluster %s has no node %q", c.st.Name, node)
	}
	return c.netns(n.Netns)
}

// PodNetns returns the network namespace of pod, entered from the host: its
// node's for a hostNetwork Pod. The namespace's name follows from the
// Pod's UID and the cluster's name, so no Pod object can name another
// lab's.
func (c *Cluster) PodNetns(pod *corev1.Pod) (cluster.Netns, error) {
	namespace, name := pod.Namespace, pod.Name
	if pod.Status.Phase != corev1.PodRunning || pod.Spec.NodeName == "" {
		return nil, fmt.Errorf("Pod %s/%s is %s, not running", namespace, name, pod.Status.Phase)
	}
	if pod.Spec.HostNetwork {
		return c.NodeNetns(pod.Spec.NodeName)
	}
	if _, ok := c.st.Node(pod.Spec.NodeName); !ok {
		return nil, fmt.Errorf("Pod %s/%s runs on %q, which is not a node of cluster %s", namespace, name, pod.Spec.NodeName, c.st.Name)
	}
	return c.netns(nodeagent.PodNetnsName(podNetnsPrefix(c.st.Name), string(pod.UID)))
}

var _ cluster.LoadBalancerCluster = (*Cluster)(nil)

// OutsideNetns returns the load balancer's network namespace, the host's
// own (no user namespace of the lab's).
func (c *Cluster) OutsideNetns() (cluster.Netns, string, error) {
	lb := c.st.LB
	if lb == nil {
		return nil, "", fmt.Errorf("cluster %s was made before labs had a load balancer: delete it and create it again", c.st.Name)
	}
	path := filepath.Join("/run/netns", lb.Netns)
	if _, err := os.Stat(path); err != nil {
		return nil, "", fmt.Errorf("the load balancer's network namespace %s is gone: %w", lb.Netns, err)
	}
	return nsenter.Netns{Path: path}, lb.IP, nil
}

// LoadBalancerRoutes reads the load balancer's routes.
func (c *Cluster) LoadBalancerRoutes(ctx context.Context) (map[string][]string, error) {
	if c.st.LB == nil {
		return nil, fmt.Errorf("cluster %s was made before labs had a load balancer: delete it and create it again", c.st.Name)
	}
	routes, err := routePlane{netns: c.st.LB.Netns, r: hostexec.Exec{}}.Routes(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for a, nodes := range routes {
		to := []string{}
		for _, n := range nodes {
			to = append(to, n.String())
		}
		out[a.String()] = to
	}
	return out, nil
}

func (c *Cluster) netns(name string) (cluster.Netns, error) {
	path := filepath.Join("/run/netns", name)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("the network namespace %s is gone: %w", name, err)
	}
	procs, err := readersCgroup(c.st)
	if err != nil {
		return nil, fmt.Errorf("the cgroup of svclab's readers of lab %s: %w", c.st.Name, err)
	}
	return nsenter.Netns{Path: path, Userns: paths{c.dir}.userns(), Cgroup: procs}, nil
}
