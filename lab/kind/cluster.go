package kind

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/nodetty"
	"github.com/svclab/svclab/lab/proxier/control"
	"github.com/svclab/svclab/lab/proxier/deploy"
)

// ClientFunc makes a clientset from a kubeconfig.
type ClientFunc func(kubeconfig []byte) (kubernetes.Interface, error)

func realClient(kubeconfig []byte) (kubernetes.Interface, error) {
	cfg, err := cluster.RESTConfigFromKubeconfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// Cluster is one of svclab's kind clusters.
type Cluster struct {
	name   string
	dir    string
	st     *State
	engine Engine
	client ClientFunc

	mu    sync.Mutex
	nodes []Node // cached: a cluster's nodes do not change
}

var _ cluster.Cluster = (*Cluster)(nil)

func (c *Cluster) Name() string { return c.name }

// KubeconfigPath is the cluster's own kubeconfig file.
func (c *Cluster) KubeconfigPath() string { return paths{c.dir}.kubeconfig() }

// Kubeconfig returns the kubeconfig kind wrote (client certificate, the API
// server on 127.0.0.1 verified against the cluster's CA).
func (c *Cluster) Kubeconfig() ([]byte, error) {
	data, err := os.ReadFile(c.KubeconfigPath())
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig of kind cluster %s: %w", c.name, err)
	}
	return data, nil
}

func (c *Cluster) server() (string, error) {
	data, err := c.Kubeconfig()
	if err != nil {
		return "", err
	}
	return serverOf(data)
}

// RESTConfig returns a client configuration for the cluster.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	data, err := c.Kubeconfig()
	if err != nil {
		return nil, err
	}
	return cluster.RESTConfigFromKubeconfig(data)
}

// Client returns a clientset for the cluster.
func (c *Cluster) Client() (kubernetes.Interface, error) {
	data, err := c.Kubeconfig()
	if err != nil {
		return nil, err
	}
	return c.client(data)
}

// Nodes lists the cluster's nodes, control plane first, with their
// addresses on Docker's kind network and the labels their shape gives them.
func (c *Cluster) Nodes(ctx context.Context) ([]cluster.Node, error) {
	list, err := c.engine.Nodes(ctx, c.name)
	if err != nil {
		return nil, fmt.Errorf("listing the nodes of kind cluster %s: %w", c.name, err)
	}
	var out []cluster.Node
	for _, n := range list {
		role, err := n.Role()
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name(), err)
		}
		if role != string(cluster.RoleControlPlane) && role != string(cluster.RoleWorker) {
			continue // kind's external load balancer
		}
		ip, err := n.IP()
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name(), err)
		}
		out = append(out, cluster.Node{Name: n.Name(), Role: cluster.Role(role), IP: ip, Labels: c.st.NodeLabels[n.Name()]})
	}
	order := cluster.NodeNames(c.name, len(out))
	slices.SortFunc(out, func(a, b cluster.Node) int {
		ia, ib := slices.Index(order, a.Name), slices.Index(order, b.Name)
		if ia != ib {
			return ia - ib
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// node finds a node by name. Graders run many commands: the nodes are
// listed (docker ps) once, and again only for a name not seen.
func (c *Cluster) node(ctx context.Context, name string) (Node, error) {
	c.mu.Lock()
	for _, n := range c.nodes {
		if n.Name() == name {
			c.mu.Unlock()
			return n, nil
		}
	}
	c.mu.Unlock()
	list, err := c.engine.Nodes(ctx, c.name)
	if err != nil {
		return nil, fmt.Errorf("listing the nodes of kind cluster %s: %w", c.name, err)
	}
	c.mu.Lock()
	c.nodes = list
	c.mu.Unlock()
	var names []string
	for _, n := range list {
		if n.Name() == name {
			return n, nil
		}
		names = append(names, n.Name())
	}
	slices.Sort(names)
	return nil, fmt.Errorf("kind cluster %s has no node %q; its nodes are %s", c.name, name, strings.Join(names, ", "))
}

// NodeExec runs cmd on the node through kind's node API (docker exec), in
// the node's tools container (see NodeToolsContainer).
func (c *Cluster) NodeExec(ctx context.Context, node string, cmd []string, stdio cluster.Stdio) error {
	if len(cmd) == 0 {
		return errors.New("no command to run")
	}
	n, err := c.node(ctx, node)
	if err != nil {
		return err
	}
	return n.Exec(ctx, inNodeTools(cmd), stdio)
}

var _ cluster.NodeTerminaler = (*Cluster)(nil)

// ttyNode is a Node that runs a command behind a terminal its caller
// makes: the command's standard streams are the terminal, and so is the
// controlling terminal it passes on into the node (docker exec -it).
type ttyNode interface {
	TTYCommand(ctx context.Context, argv []string) *exec.Cmd
}

// TTYCommand is `docker exec -it` of argv on the node, to start behind a
// terminal of svclab's (package nodetty): the docker command on this
// machine holds that terminal, and the node's command gets one of
// Docker's, which follows its size.
func (d dockerNode) TTYCommand(ctx context.Context, argv []string) *exec.Cmd {
	return exec.CommandContext(ctx, "docker", append([]string{"exec", "--privileged", "-it", d.Name()}, argv...)...)
}

// NodeTerminal runs cmd on the node as NodeExec does, behind a terminal of
// svclab's: docker exec -it runs under it, and ctr task exec --tty in the
// node's tools container, each passing the terminal's size on.
func (c *Cluster) NodeTerminal(ctx context.Context, node string, cmd []string, size cluster.TerminalSize) (cluster.Terminal, error) {
	if len(cmd) == 0 {
		return nil, errors.New("no command to run")
	}
	n, err := c.node(ctx, node)
	if err != nil {
		return nil, err
	}
	tn, ok := n.(ttyNode)
	if !ok {
		return nil, fmt.Errorf("node %s of kind cluster %s cannot open a terminal", node, c.name)
	}
	b := make([]byte, 6)
	rand.Read(b)
	id := "svclab-tty-" + hex.EncodeToString(b)
	x := tn.TTYCommand(ctx, append([]string{"ctr", "-n", ctrNamespace, "task", "exec", "--tty", "--exec-id", id, NodeToolsContainer}, cmd...))
	t, err := nodetty.Start(x, size, nodetty.Options{Hangup: func() {
		// The node's command outlives the docker exec that started it:
		// it runs under containerd, which hangs it up only when told.
		hctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Exec(hctx, []string{"ctr", "-n", ctrNamespace, "task", "kill", "--exec-id", id, "--signal", "SIGHUP", NodeToolsContainer}, cluster.Stdio{})
	}})
	if err != nil {
		return nil, fmt.Errorf("opening a terminal on node %s: %w", node, err)
	}
	return t, nil
}

// LoadImages imports the image archive at path into every node.
func (c *Cluster) loadArchive(ctx context.Context, path string) error {
	list, err := c.engine.Nodes(ctx, c.name)
	if err != nil {
		return err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, n := range list {
		if role, _ := n.Role(); role != string(cluster.RoleControlPlane) && role != string(cluster.RoleWorker) {
			continue
		}
		wg.Go(func() {
			err := func() error {
				f, err := os.Open(path)
				if err != nil {
					return err
				}
				defer f.Close()
				return n.LoadImageArchive(ctx, f)
			}()
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("loading images into node %s: %w", n.Name(), err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// proxierObjects are the bundled proxier's objects for this cluster, from
// lab/proxier/deploy as on embedded clusters; the image is only in the
// nodes, never pulled.
func (c *Cluster) proxierObjects() ([]runtime.Object, error) {
	pub, err := c.controlKey()
	if err != nil {
		return nil, err
	}
	objs, err := deploy.Objects(deploy.Options{
		Image:       c.st.ProxierImage,
		Command:     []string{"/usr/local/bin/kube-proxy"},
		APIServer:   "https://" + c.name + "-control-plane:6443",
		ClusterCIDR: cluster.DefaultPodCIDR,
		Mode:        c.st.Proxier,
		ControlKey:  control.EncodePublic(pub),
	})
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if ds, ok := o.(*appsv1.DaemonSet); ok {
			for i := range ds.Spec.Template.Spec.Containers {
				ds.Spec.Template.Spec.Containers[i].ImagePullPolicy = corev1.PullNever
			}
		}
	}
	return objs, nil
}

// controlKey is the public half of the key the bundled proxiers obey on
// their teaching hooks (/faults, /sync), made with the cluster's first
// proxier: its private half stays in svclab's state directory, so that a
// learner on a node can neither poke the hooks nor read a fault in the
// proxier's logs (they are covert with a key), as on embedded clusters.
func (c *Cluster) controlKey() (ed25519.PublicKey, error) {
	path := paths{c.dir}.controlKey()
	k, err := control.ReadPrivateFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return control.WriteKeyPair(path)
	}
	if err != nil {
		return nil, fmt.Errorf("the proxiers' control key: %w", err)
	}
	return k.Public().(ed25519.PublicKey), nil
}

// ProxierControlKey is the key svclab signs its requests to the bundled
// proxiers' teaching hooks with (control.Keyed).
func (c *Cluster) ProxierControlKey() (ed25519.PrivateKey, error) {
	if c.st.Proxier == "" {
		return nil, errors.New("this cluster runs kind's own kube-proxy, which has none of svclab's teaching hooks: create it with --proxy-mode or a shape of the bundled proxier")
	}
	k, err := control.ReadPrivateFile(paths{c.dir}.controlKey())
	if err != nil {
		return nil, fmt.Errorf("the proxiers' control key: %w", err)
	}
	return k, nil
}

// installProxier creates (or replaces) the bundled proxier's objects.
func (c *Cluster) installProxier(ctx context.Context) error {
	if c.st.ProxierImage == "" {
		return errors.New("the bundled proxier's image is not loaded")
	}
	client, err := c.Client()
	if err != nil {
		return err
	}
	objs, err := c.proxierObjects()
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := apply(ctx, client, o); err != nil {
			return err
		}
	}
	return nil
}

// apply creates o, or updates it when it exists.
func apply(ctx context.Context, cs kubernetes.Interface, o runtime.Object) error {
	var err error
	create := metav1.CreateOptions{}
	update := metav1.UpdateOptions{}
	switch o := o.(type) {
	case *corev1.ServiceAccount:
		if _, err = cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, create); apierrors.IsAlreadyExists(err) {
			_, err = cs.CoreV1().ServiceAccounts(o.Namespace).Update(ctx, o, update)
		}
	case *corev1.ConfigMap:
		if _, err = cs.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, create); apierrors.IsAlreadyExists(err) {
			_, err = cs.CoreV1().ConfigMaps(o.Namespace).Update(ctx, o, update)
		}
	case *rbacv1.ClusterRoleBinding:
		if _, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, o, create); apierrors.IsAlreadyExists(err) {
			_, err = cs.RbacV1().ClusterRoleBindings().Update(ctx, o, update)
		}
	case *rbacv1.Role:
		if _, err = cs.RbacV1().Roles(o.Namespace).Create(ctx, o, create); apierrors.IsAlreadyExists(err) {
			_, err = cs.RbacV1().Roles(o.Namespace).Update(ctx, o, update)
		}
	case *rbacv1.RoleBinding:
		if _, err = cs.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, create); apierrors.IsAlreadyExists(err) {
			_, err = cs.RbacV1().RoleBindings(o.Namespace).Update(ctx, o, update)
		}
	case *appsv1.DaemonSet:
		if _, err = cs.AppsV1().DaemonSets(o.Namespace).Create(ctx, o, create); apierrors.IsAlreadyExists(err) {
			_, err = cs.AppsV1().DaemonSets(o.Namespace).Update(ctx, o, update)
		}
	default:
		return fmt.Errorf("cannot apply a %T", o)
	}
	if err != nil {
		return fmt.Errorf("creating %s: %w", o.GetObjectKind().GroupVersionKind().Kind, err)
	}
	return nil
}

// waitReady waits until every node is Ready, kube-proxy runs on each and
// CoreDNS is available.
func (c *Cluster) waitReady(ctx context.Context, deadline time.Time) error {
	client, err := c.Client()
	if err != nil {
		return err
	}
	want, err := c.Nodes(ctx)
	if err != nil {
		return err
	}
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		pending := c.pending(ctx, client, len(want))
		if pending == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready in time: %s (see 'svclab kubectl --name %s get pods -n kube-system')", pending, c.name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// pending says what is not ready yet, or "".
func (c *Cluster) pending(ctx context.Context, client kubernetes.Interface, nodes int) string {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "the API server does not answer: " + err.Error()
	}
	var notReady []string
	for _, n := range list.Items {
		ready := false
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			notReady = append(notReady, n.Name)
		}
	}
	switch {
	case len(list.Items) < nodes:
		return fmt.Sprintf("%d of %d nodes registered", len(list.Items), nodes)
	case len(notReady) > 0:
		return "nodes not Ready: " + strings.Join(notReady, ", ")
	}
	ds, err := client.AppsV1().DaemonSets(deploy.Namespace).Get(ctx, deploy.Name, metav1.GetOptions{})
	if err != nil {
		return "kube-proxy: " + err.Error()
	}
	if ds.Status.DesiredNumberScheduled < int32(nodes) || ds.Status.NumberReady < ds.Status.DesiredNumberScheduled {
		return fmt.Sprintf("kube-proxy ready on %d of %d nodes", ds.Status.NumberReady, nodes)
	}
	dns, err := client.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		return "CoreDNS: " + err.Error()
	}
	if dns.Status.AvailableReplicas < 1 {
		return "CoreDNS is not available"
	}
	return ""
}

// forwardBlock is a Corefile's forward directive, with its block if any.
var forwardBlock = regexp.MustCompile(`(?m)^[ \t]*forward[ \t][^\n{]*(\{[^}]*\})?[ \t]*\n`)

// ConfineCorefile removes the forward directive from a Corefile: lab DNS
// answers from the cluster or says NXDOMAIN, it never asks resolvers
// outside (svclab-kube's CoreDNS has no forward plugin).
func ConfineCorefile(corefile string) string {
	return forwardBlock.ReplaceAllString(corefile, "")
}

// confineCoreDNS makes kubeadm's CoreDNS configuration the lab's (no
// forwarding) and restarts CoreDNS's pods, which cannot start with a
// plugin svclab-kube's CoreDNS does not have.
func (c *Cluster) confineCoreDNS(ctx context.Context) error {
	client, err := c.Client()
	if err != nil {
		return err
	}
	cms := client.CoreV1().ConfigMaps("kube-system")
	cm, err := cms.Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("CoreDNS's configuration: %w", err)
	}
	confined := ConfineCorefile(cm.Data["Corefile"])
	if confined == cm.Data["Corefile"] {
		return nil
	}
	cm.Data["Corefile"] = confined
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating CoreDNS's configuration: %w", err)
	}
	err = client.CoreV1().Pods("kube-system").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil {
		return fmt.Errorf("restarting CoreDNS: %w", err)
	}
	return nil
}

// Backend is "kind": scenarios that need the embedded backend refuse kind
// clusters (session.CheckBackend).
func (c *Cluster) Backend() string { return BackendName }
