package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/proxier/healthcheck"
	"github.com/svclab/svclab/lab/scenario"
)

// hostnameLabel is the node label a Pod's nodeSelector or affinity uses to
// name one node.
const hostnameLabel = "kubernetes.io/hostname"

// zoneLabel is the well-known zone label of nodes.
const zoneLabel = "topology.kubernetes.io/zone"

// getErr words a failed Get for the scenario author or learner.
func getErr(kind, ns, name string, err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("there is no %s %s/%s: was the scenario's setup applied?", kind, ns, name)
	}
	return fmt.Errorf("reading %s %s/%s: %w", kind, ns, name, err)
}

// updateService reads the Service named by the service parameter, lets
// mutate change it and writes it back, retrying on conflicts.
func updateService(ctx context.Context, c cluster.Cluster, p scenario.Params, mutate func(*corev1.Service) error) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	ns, name := namespace(p), p.String("service", "")
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		svc, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return getErr("Service", ns, name, err)
		}
		if err := mutate(svc); err != nil {
			return fmt.Errorf("Service %s/%s: %w", ns, name, err)
		}
		if _, err := cs.CoreV1().Services(ns).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("updating Service %s/%s: %w", ns, name, err)
		}
		return nil
	})
}

// updateDeployment is updateService for the deployment parameter.
func updateDeployment(ctx context.Context, c cluster.Cluster, p scenario.Params, mutate func(*appsv1.Deployment) error) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	ns, name := namespace(p), p.String("deployment", "")
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return getErr("Deployment", ns, name, err)
		}
		if err := mutate(d); err != nil {
			return fmt.Errorf("Deployment %s/%s: %w", ns, name, err)
		}
		if _, err := cs.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("updating Deployment %s/%s: %w", ns, name, err)
		}
		return nil
	})
}

// findPort returns the index of the Service port numbered port, or of the
// first port when port is 0.
func findPort(svc *corev1.Service, port int) (int, error) {
	if len(svc.Spec.Ports) == 0 {
		return 0, fmt.Errorf("it has no ports")
	}
	if port == 0 {
		return 0, nil
	}
	var have []string
	for i, sp := range svc.Spec.Ports {
		if int(sp.Port) == port {
			return i, nil
		}
		have = append(have, fmt.Sprint(sp.Port))
	}
	return 0, fmt.Errorf("it has no port %d (its ports are %s)", port, strings.Join(have, ", "))
}

// selectorTypo changes one value of a Service's selector.
type selectorTypo struct{ scenario.FaultSpec }

func (f selectorTypo) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	return updateService(ctx, c, p, func(svc *corev1.Service) error {
		sel := svc.Spec.Selector
		if len(sel) == 0 {
			return fmt.Errorf("it has no selector: %s needs a Service that selects its Pods by label", f.Name())
		}
		keys := make([]string, 0, len(sel))
		for k := range sel {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		key := p.String("key", keys[0])
		right, ok := sel[key]
		if !ok {
			return fmt.Errorf("its selector has no key %q (it has %s)", key, strings.Join(keys, ", "))
		}
		wrong := p.String("value", swapLetters(right))
		if wrong == right {
			return fmt.Errorf("the wrong selector value %q is the right one", wrong)
		}
		sel[key] = wrong
		return nil
	})
}

// swapLetters swaps the last two different adjacent letters of s ("web"
// becomes "wbe"), or appends an "x" when there are none.
func swapLetters(s string) string {
	b := []byte(s)
	for i := len(b) - 2; i >= 0; i-- {
		if b[i] != b[i+1] {
			b[i], b[i+1] = b[i+1], b[i]
			return string(b)
		}
	}
	return s + "x"
}

// intOrString turns a parameter value (int or string) into an IntOrString.
func intOrString(v any) (intstr.IntOrString, error) {
	switch x := v.(type) {
	case int:
		return intstr.FromInt32(int32(x)), nil
	case string:
		return intstr.FromString(x), nil
	}
	return intstr.IntOrString{}, fmt.Errorf("%v is neither a port number nor a port name", v)
}

// targetPortMismatch points a Service port at a port the pods do not
// listen on.
type targetPortMismatch struct{ scenario.FaultSpec }

func (f targetPortMismatch) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	tp, err := intOrString(p["targetPort"])
	if err != nil {
		return fmt.Errorf("targetPort: %w", err)
	}
	return updateService(ctx, c, p, func(svc *corev1.Service) error {
		i, err := findPort(svc, p.Int("port", 0))
		if err != nil {
			return err
		}
		if svc.Spec.Ports[i].TargetPort == tp {
			return fmt.Errorf("port %d already targets %s", svc.Spec.Ports[i].Port, tp.String())
		}
		svc.Spec.Ports[i].TargetPort = tp
		return nil
	})
}

// portNameMismatch renames a port of a multi-port Service, or removes its
// name.
type portNameMismatch struct{ scenario.FaultSpec }

func (f portNameMismatch) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	return updateService(ctx, c, p, func(svc *corev1.Service) error {
		i, err := findPort(svc, p.Int("port", 0))
		if err != nil {
			return err
		}
		name := p.String("name", "")
		if name == "" && len(svc.Spec.Ports) > 1 {
			return fmt.Errorf("the API server requires a name on every port of a multi-port Service: give the fault a wrong name instead of removing it")
		}
		if svc.Spec.Ports[i].Name == name {
			return fmt.Errorf("port %d is already named %q", svc.Spec.Ports[i].Port, name)
		}
		svc.Spec.Ports[i].Name = name
		return nil
	})
}

// container returns the container named by the container parameter, or the
// first.
func container(spec *corev1.PodSpec, name string) (*corev1.Container, error) {
	if len(spec.Containers) == 0 {
		return nil, fmt.Errorf("its Pod template has no containers")
	}
	if name == "" {
		return &spec.Containers[0], nil
	}
	var names []string
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i], nil
		}
		names = append(names, spec.Containers[i].Name)
	}
	return nil, fmt.Errorf("its Pod template has no container %q (it has %s)", name, strings.Join(names, ", "))
}

// failingReadinessProbe gives a Deployment's pods a readiness probe on an
// HTTP path that does not exist. So that the rollout really replaces every
// Pod (the default strategy would keep the old ready Pods while the first
// new one never becomes ready), it also lets the rollout take every Pod
// down at once (maxUnavailable: 100%), as a hurried change would.
type failingReadinessProbe struct{ scenario.FaultSpec }

func (f failingReadinessProbe) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	path, port := p.String("path", "/not-ready"), p.Int("port", 0)
	return updateDeployment(ctx, c, p, func(d *appsv1.Deployment) error {
		ctr, err := container(&d.Spec.Template.Spec, p.String("container", ""))
		if err != nil {
			return err
		}
		switch {
		case ctr.ReadinessProbe != nil && ctr.ReadinessProbe.HTTPGet != nil && port != 0:
			if err := wrongProbePort(ctr, port); err != nil {
				return err
			}
		case ctr.ReadinessProbe != nil && ctr.ReadinessProbe.HTTPGet != nil:
			if ctr.ReadinessProbe.HTTPGet.Path == path {
				return fmt.Errorf("container %s's readiness probe already asks for %s", ctr.Name, path)
			}
			ctr.ReadinessProbe.HTTPGet.Path = path
		case len(ctr.Ports) > 0:
			ctr.ReadinessProbe = &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(ctr.Ports[0].ContainerPort)}},
				PeriodSeconds: 2,
			}
		default:
			return fmt.Errorf("container %s declares no port for an HTTP readiness probe", ctr.Name)
		}
		all := intstr.FromString("100%")
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &all}}
		return nil
	})
}

// scaleToZero scales a Deployment to zero replicas.
type scaleToZero struct{ scenario.FaultSpec }

func (f scaleToZero) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	return updateDeployment(ctx, c, p, func(d *appsv1.Deployment) error {
		if d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
			return fmt.Errorf("it has zero replicas already")
		}
		zero := int32(0)
		d.Spec.Replicas = &zero
		return nil
	})
}

// etpLocalSingleNode sets externalTrafficPolicy: Local and pins every
// replica to one node with a nodeSelector.
type etpLocalSingleNode struct{ scenario.FaultSpec }

func (f etpLocalSingleNode) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	node, err := nodeName(ctx, c, p, "node")
	if err != nil {
		return err
	}
	if err := updateService(ctx, c, p, func(svc *corev1.Service) error {
		if svc.Spec.Type != corev1.ServiceTypeNodePort && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			return fmt.Errorf("it is of type %s; externalTrafficPolicy only applies to NodePort and LoadBalancer Services", serviceType(svc))
		}
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		return nil
	}); err != nil {
		return err
	}
	return updateDeployment(ctx, c, p, func(d *appsv1.Deployment) error {
		if d.Spec.Template.Spec.NodeSelector == nil {
			d.Spec.Template.Spec.NodeSelector = map[string]string{}
		}
		d.Spec.Template.Spec.NodeSelector[hostnameLabel] = node
		return nil
	})
}

func serviceType(svc *corev1.Service) corev1.ServiceType {
	if svc.Spec.Type == "" {
		return corev1.ServiceTypeClusterIP
	}
	return svc.Spec.Type
}

// itpLocalNoLocalReplica sets internalTrafficPolicy: Local and keeps every
// replica off one node with a required node affinity.
type itpLocalNoLocalReplica struct{ scenario.FaultSpec }

func (f itpLocalNoLocalReplica) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	node, err := nodeName(ctx, c, p, "node")
	if err != nil {
		return err
	}
	if err := updateService(ctx, c, p, func(svc *corev1.Service) error {
		if svc.Spec.Type == corev1.ServiceTypeExternalName {
			return fmt.Errorf("it is an ExternalName Service, which has no traffic policies")
		}
		local := corev1.ServiceInternalTrafficPolicyLocal
		svc.Spec.InternalTrafficPolicy = &local
		return nil
	}); err != nil {
		return err
	}
	return updateDeployment(ctx, c, p, func(d *appsv1.Deployment) error {
		avoidNode(&d.Spec.Template.Spec, node)
		return nil
	})
}

// avoidNode adds a required node affinity that keeps the pod off node,
// ANDed into every existing term.
func avoidNode(spec *corev1.PodSpec, node string) {
	req := corev1.NodeSelectorRequirement{Key: hostnameLabel, Operator: corev1.NodeSelectorOpNotIn, Values: []string{node}}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil || len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchExpressions = append(terms[i].MatchExpressions, req)
	}
}

// trafficDistribution sets a Service's trafficDistribution and optionally
// removes a node's zone label, so that the Service's endpoints on that
// node carry no zone and no hint.
type trafficDistribution struct{ scenario.FaultSpec }

func (f trafficDistribution) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	mode := p.String("mode", "")
	setMode := func(m *string) error {
		return updateService(ctx, c, p, func(svc *corev1.Service) error {
			svc.Spec.TrafficDistribution = m
			return nil
		})
	}
	if p.String("node", "") == "" {
		return setMode(&mode)
	}
	node, err := nodeName(ctx, c, p, "node")
	if err != nil {
		return err
	}
	cs, err := c.Client()
	if err != nil {
		return err
	}
	// The label goes first: the EndpointSlice controller reads a node's
	// zone when it writes an endpoint, and the Service's change makes it
	// write them.
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, zoneLabel)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("removing the zone label of node %s: %w", node, err)
	}
	if err := setMode(&mode); err != nil {
		return err
	}
	// Its informers may still have had the label: until the node's
	// endpoints have lost their zone, the Service's change is made again.
	ns, svc := namespace(p), p.String("service", "")
	first := true
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		zoned, err := endpointsZoned(ctx, cs, ns, svc, node)
		if err != nil || !zoned {
			return !zoned, err
		}
		if first {
			first = false
			return false, nil
		}
		if err := setMode(nil); err != nil {
			return false, err
		}
		return false, setMode(&mode)
	})
	if err != nil {
		return fmt.Errorf("waiting for the endpoints of Service %s/%s on node %s to lose their zone: %w", ns, svc, node, err)
	}
	return nil
}

// endpointsZoned tells whether any endpoint of Service ns/svc on node has a
// zone or a hint.
func endpointsZoned(ctx context.Context, cs kubernetes.Interface, ns, svc, node string) (bool, error) {
	slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return false, fmt.Errorf("listing the EndpointSlices of Service %s/%s: %w", ns, svc, err)
	}
	for _, sl := range slices.Items {
		for _, ep := range sl.Endpoints {
			if ep.NodeName != nil && *ep.NodeName == node && (ep.Zone != nil || ep.Hints != nil) {
				return true, nil
			}
		}
	}
	return false, nil
}

// sessionAffinitySNAT sets ClientIP session affinity.
type sessionAffinitySNAT struct{ scenario.FaultSpec }

func (f sessionAffinitySNAT) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	return updateService(ctx, c, p, func(svc *corev1.Service) error {
		if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
			return fmt.Errorf("it has ClientIP session affinity already")
		}
		svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		return nil
	})
}

// statefulSetNotReadyPeers turns publishNotReadyAddresses off on the
// headless Service of a StatefulSet.
type statefulSetNotReadyPeers struct{ scenario.FaultSpec }

func (f statefulSetNotReadyPeers) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	ns, name := namespace(p), p.String("statefulset", "")
	sts, err := cs.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return getErr("StatefulSet", ns, name, err)
	}
	if svc := p.String("service", ""); sts.Spec.ServiceName != svc {
		return fmt.Errorf("StatefulSet %s/%s names Service %q as its serviceName, not %q", ns, name, sts.Spec.ServiceName, svc)
	}
	if err := updateService(ctx, c, p, func(svc *corev1.Service) error {
		if svc.Spec.ClusterIP != corev1.ClusterIPNone {
			return fmt.Errorf("it is not headless (clusterIP: None); a StatefulSet's peers find each other through a headless Service")
		}
		svc.Spec.PublishNotReadyAddresses = false
		return nil
	}); err != nil {
		return err
	}
	// Running Pods that are ready keep their DNS records; the deadlock
	// shows once they restart, as after a node reboot or an upgrade.
	sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	if err != nil {
		return fmt.Errorf("StatefulSet %s/%s: %w", ns, name, err)
	}
	zero := int64(0)
	if err := cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{LabelSelector: sel.String()}); err != nil {
		return fmt.Errorf("restarting the Pods of StatefulSet %s/%s: %w", ns, name, err)
	}
	return nil
}

// headlessConfusion recreates a Service as headless (clusterIP: None), or a
// headless one with a ClusterIP: clusterIP cannot change in place.
type headlessConfusion struct{ scenario.FaultSpec }

func (f headlessConfusion) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	ns, name := namespace(p), p.String("service", "")
	svc, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return getErr("Service", ns, name, err)
	}
	if serviceType(svc) != corev1.ServiceTypeClusterIP {
		return fmt.Errorf("Service %s/%s is of type %s; only a ClusterIP Service can be headless", ns, name, serviceType(svc))
	}
	next := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace, Labels: svc.Labels, Annotations: svc.Annotations},
		Spec:       *svc.Spec.DeepCopy(),
	}
	next.Spec.ClusterIPs = nil
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		next.Spec.ClusterIP = ""
	} else {
		next.Spec.ClusterIP = corev1.ClusterIPNone
	}
	if err := recreateService(ctx, cs, svc, next); err != nil {
		return err
	}
	return nil
}

// recreateService deletes svc and creates next in its place.
func recreateService(ctx context.Context, cs kubernetes.Interface, svc, next *corev1.Service) error {
	uid := svc.UID
	if err := cs.CoreV1().Services(svc.Namespace).Delete(ctx, svc.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
		return fmt.Errorf("deleting Service %s/%s to recreate it: %w", svc.Namespace, svc.Name, err)
	}
	if _, err := cs.CoreV1().Services(svc.Namespace).Create(ctx, next, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("recreating Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

// externalName turns a Service into an ExternalName Service. Its ports
// stay; what made it a virtual IP (clusterIP, IP families, traffic
// policies) goes, as the API requires.
type externalName struct{ scenario.FaultSpec }

func (f externalName) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	return updateService(ctx, c, p, func(svc *corev1.Service) error {
		name := p.String("externalName", "")
		if svc.Spec.Type == corev1.ServiceTypeExternalName {
			if svc.Spec.ExternalName == name {
				return fmt.Errorf("it aliases %s already", name)
			}
			svc.Spec.ExternalName = name
			return nil
		}
		if svc.Spec.Type != "" && svc.Spec.Type != corev1.ServiceTypeClusterIP {
			return fmt.Errorf("it is of type %s; the fault turns a ClusterIP Service into an ExternalName one, or changes the name an ExternalName Service aliases", svc.Spec.Type)
		}
		svc.Spec.Type = corev1.ServiceTypeExternalName
		svc.Spec.ExternalName = name
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
		svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy = nil, nil
		svc.Spec.InternalTrafficPolicy = nil
		svc.Spec.SessionAffinity = corev1.ServiceAffinityNone
		return nil
	})
}

// defaultDeny adds a NetworkPolicy that denies all ingress in a namespace.
type defaultDeny struct{ scenario.FaultSpec }

// defaultDenyName is the name of the NetworkPolicy defaultDeny creates.
const defaultDenyName = "default-deny-ingress"

func (f defaultDeny) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	ns := namespace(p)
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: defaultDenyName, Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	if _, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating NetworkPolicy %s/%s: %w", ns, defaultDenyName, err)
	}
	return nil
}

func (f defaultDeny) Revert(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	ns := namespace(p)
	err = cs.NetworkingV1().NetworkPolicies(ns).Delete(ctx, defaultDenyName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting NetworkPolicy %s/%s: %w", ns, defaultDenyName, err)
	}
	return nil
}

// trafficPolicy sets a Service's externalTrafficPolicy and/or
// internalTrafficPolicy.
type trafficPolicy struct{ scenario.FaultSpec }

func (f trafficPolicy) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	ext, in := p.String("external", ""), p.String("internal", "")
	if ext == "" && in == "" {
		return fmt.Errorf("%s needs external, internal or both", f.Name())
	}
	return updateService(ctx, c, p, func(svc *corev1.Service) error {
		if svc.Spec.Type == corev1.ServiceTypeExternalName {
			return fmt.Errorf("it is an ExternalName Service, which has no traffic policies")
		}
		if ext != "" {
			if svc.Spec.Type != corev1.ServiceTypeNodePort && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
				return fmt.Errorf("it is of type %s; externalTrafficPolicy only applies to NodePort and LoadBalancer Services", serviceType(svc))
			}
			if string(svc.Spec.ExternalTrafficPolicy) == ext {
				return fmt.Errorf("its externalTrafficPolicy is %s already", ext)
			}
			svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicy(ext)
		}
		if in != "" {
			if svc.Spec.InternalTrafficPolicy != nil && string(*svc.Spec.InternalTrafficPolicy) == in {
				return fmt.Errorf("its internalTrafficPolicy is %s already", in)
			}
			pol := corev1.ServiceInternalTrafficPolicy(in)
			svc.Spec.InternalTrafficPolicy = &pol
		}
		return nil
	})
}

// stuckRollout rolls a Deployment out to a template whose readiness probe
// asks for a path the application does not serve: the first new Pod never
// becomes ready, and the default rolling update (maxUnavailable 25%, which
// rounds down to 0 for few replicas) keeps every old Pod serving. The new
// revision is told apart by its version label.
type stuckRollout struct{ scenario.FaultSpec }

func (f stuckRollout) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	version, path, port := p.String("version", "v2"), p.String("path", "/ready"), p.Int("port", 0)
	return updateDeployment(ctx, c, p, func(d *appsv1.Deployment) error {
		ctr, err := container(&d.Spec.Template.Spec, p.String("container", ""))
		if err != nil {
			return err
		}
		if ctr.ReadinessProbe == nil || ctr.ReadinessProbe.HTTPGet == nil {
			return fmt.Errorf("container %s has no HTTP readiness probe to break", ctr.Name)
		}
		if port != 0 {
			if err := wrongProbePort(ctr, port); err != nil {
				return err
			}
			path = ctr.ReadinessProbe.HTTPGet.Path
		} else if ctr.ReadinessProbe.HTTPGet.Path == path {
			return fmt.Errorf("container %s's readiness probe already asks for %s", ctr.Name, path)
		}
		if d.Spec.Template.Labels["version"] == version {
			return fmt.Errorf("its Pod template is labelled version=%s already", version)
		}
		if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
			return fmt.Errorf("it uses the Recreate strategy; a stalled rolling update needs RollingUpdate")
		}
		ctr.ReadinessProbe.HTTPGet.Path = path
		d.Spec.Template.Labels["version"] = version
		return nil
	})
}

// rolloutRestart restarts a Deployment's Pods the way kubectl rollout
// restart does, with a restartedAt annotation on the Pod template.
type rolloutRestart struct{ scenario.FaultSpec }

func (f rolloutRestart) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	return updateDeployment(ctx, c, p, func(d *appsv1.Deployment) error {
		if d.Spec.Template.Annotations == nil {
			d.Spec.Template.Annotations = map[string]string{}
		}
		d.Spec.Template.Annotations[cluster.RestartedAtAnnotation] = time.Now().Format(time.RFC3339)
		return nil
	})
}

// scaleDeployment scales a Deployment to the replicas parameter, as an
// autoscaler or a traffic peak would.
type scaleDeployment struct{ scenario.FaultSpec }

func (f scaleDeployment) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	n := int32(p.Int("replicas", 0))
	return updateDeployment(ctx, c, p, func(d *appsv1.Deployment) error {
		if d.Spec.Replicas != nil && *d.Spec.Replicas == n {
			return fmt.Errorf("it has %d replicas already", n)
		}
		d.Spec.Replicas = &n
		return nil
	})
}

// abruptShutdown removes what keeps a Deployment's Pods serving while they
// terminate: the containers' preStop hooks and an agnhost --delay-shutdown;
// and it sets the grace period to one second.
type abruptShutdown struct{ scenario.FaultSpec }

func (f abruptShutdown) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	return updateDeployment(ctx, c, p, func(d *appsv1.Deployment) error {
		spec := &d.Spec.Template.Spec
		changed := spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds != 1
		one := int64(1)
		spec.TerminationGracePeriodSeconds = &one
		for i := range spec.Containers {
			ctr := &spec.Containers[i]
			if ctr.Lifecycle != nil && ctr.Lifecycle.PreStop != nil {
				ctr.Lifecycle.PreStop, changed = nil, true
				if ctr.Lifecycle.PostStart == nil && ctr.Lifecycle.StopSignal == nil {
					ctr.Lifecycle = nil
				}
			}
			args := slices.DeleteFunc(slices.Clone(ctr.Args), func(a string) bool { return strings.HasPrefix(a, "--delay-shutdown") })
			if len(args) != len(ctr.Args) {
				ctr.Args, changed = args, true
			}
		}
		if !changed {
			return fmt.Errorf("its Pods already stop at once: no preStop hook, no --delay-shutdown, a one-second grace period")
		}
		return nil
	})
}

// wrongProbePort points ctr's HTTP readiness probe at port, which must not
// be one the container declares.
func wrongProbePort(ctr *corev1.Container, port int) error {
	for _, cp := range ctr.Ports {
		if int(cp.ContainerPort) == port {
			return fmt.Errorf("container %s listens on port %d; the readiness probe must ask a port where nothing listens", ctr.Name, port)
		}
	}
	ctr.ReadinessProbe.HTTPGet.Port = intstr.FromInt32(int32(port))
	return nil
}

// topologyModeAnnotation is the annotation of Topology Aware Routing.
const topologyModeAnnotation = "service.kubernetes.io/topology-mode"

// topologyModeSettleTimeout bounds how long Settle waits for the
// EndpointSlice controller to take the hints off.
const topologyModeSettleTimeout = time.Minute

// topologyModeAnnotationFault annotates a Service with
// service.kubernetes.io/topology-mode. The EndpointSlice controller then
// ignores the Service's trafficDistribution and lets its topology cache
// decide the hints; where its safeguards trip (too few endpoints for the
// zones' share of CPU, nodes without a zone or CPU), it removes them all.
type topologyModeAnnotationFault struct{ scenario.FaultSpec }

func (f topologyModeAnnotationFault) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	value := p.String("value", "Auto")
	return updateService(ctx, c, p, func(svc *corev1.Service) error {
		if svc.Annotations[topologyModeAnnotation] == value {
			return fmt.Errorf("it has the annotation %s=%s already", topologyModeAnnotation, value)
		}
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		svc.Annotations[topologyModeAnnotation] = value
		return nil
	})
}

// Settle waits until no endpoint of the Service's EndpointSlices carries a
// hint: the controller has reconciled the Service under the annotation and
// its safeguards turned the hints off.
func (f topologyModeAnnotationFault) Settle(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	ns, name := namespace(p), p.String("service", "")
	hinted := 0
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, topologyModeSettleTimeout, true, func(ctx context.Context) (bool, error) {
		n, err := hintedEndpoints(ctx, cs, ns, name)
		if err != nil {
			return false, err
		}
		hinted = n
		return n == 0, nil
	})
	switch {
	case err == nil:
		return nil
	case wait.Interrupted(err) && ctx.Err() == nil:
		return fmt.Errorf("%d endpoint(s) of Service %s/%s still carry hints %s after the annotation %s: the controller's safeguards did not turn Topology Aware Routing off (kubectl -n %s get events --field-selector involvedObject.name=%s)",
			hinted, ns, name, topologyModeSettleTimeout, topologyModeAnnotation, ns, name)
	default:
		return err
	}
}

// hintedEndpoints counts the endpoints of Service ns/name that carry
// topology hints.
func hintedEndpoints(ctx context.Context, cs kubernetes.Interface, ns, name string) (int, error) {
	slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return 0, fmt.Errorf("listing the EndpointSlices of Service %s/%s: %w", ns, name, err)
	}
	n := 0
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			if ep.Hints != nil && (len(ep.Hints.ForZones) > 0 || len(ep.Hints.ForNodes) > 0) {
				n++
			}
		}
	}
	return n, nil
}

// labelClientBackendTimeout bounds how long the fault waits for the
// client's log to name a Pod of the Service.
const labelClientBackendTimeout = 90 * time.Second

// labelClientBackend labels the Pod of a Service that answers a client
// Pod, as a monitoring system flags a hot replica. The client prints what
// the Service answers (agnhost netexec's /hostname: the Pod's name); the
// fault reads the client's log for the last line that names one of the
// Service's Pods. With ClientIP session affinity that Pod is the one the
// client is pinned to.
type labelClientBackend struct{ scenario.FaultSpec }

func (f labelClientBackend) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	key, value, ok := strings.Cut(p.String("label", "load=high"), "=")
	if !ok || key == "" {
		return fmt.Errorf("label: %q is not key=value", p.String("label", ""))
	}
	cs, err := c.Client()
	if err != nil {
		return err
	}
	ns, name, client := namespace(p), p.String("service", ""), p.String("client", "")
	svc, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return getErr("Service", ns, name, err)
	}
	if len(svc.Spec.Selector) == 0 {
		return fmt.Errorf("Service %s/%s has no selector: %s labels one of the Pods it selects", ns, name, f.Name())
	}
	var backend, last string
	err = wait.PollUntilContextTimeout(ctx, time.Second, labelClientBackendTimeout, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		names := map[string]bool{}
		for _, pod := range pods.Items {
			if pod.DeletionTimestamp == nil {
				names[pod.Name] = true
			}
		}
		tail := int64(50)
		out, err := cs.CoreV1().Pods(ns).GetLogs(client, &corev1.PodLogOptions{TailLines: &tail}).DoRaw(ctx)
		if err != nil {
			last = fmt.Sprintf("reading the log of Pod %s/%s: %v", ns, client, err)
			return false, nil
		}
		backend = lastNamed(string(out), names)
		if backend == "" {
			last = fmt.Sprintf("the log of Pod %s/%s names no Pod of Service %s yet", ns, client, name)
		}
		return backend != "", nil
	})
	if err != nil {
		return fmt.Errorf("finding the Pod that answers %s/%s (%s): %w", ns, client, last, err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{key: value}}})
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, backend, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("labelling Pod %s/%s %s=%s: %w", ns, backend, key, value, err)
	}
	return nil
}

// lastNamed is the last line of log that is one of names.
func lastNamed(log string, names map[string]bool) string {
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); names[l] {
			return l
		}
	}
	return ""
}

// nodeMarkedForDeletion leaves the cluster autoscaler's
// ToBeDeletedByClusterAutoscaler taint on a node, as an autoscaler that
// stopped halfway through a scale-down does: nothing new is scheduled
// there, and kube-proxy on the node answers /healthz with 503 (KEP-3836)
// so that load balancers drain it — for good, since nobody deletes it.
type nodeMarkedForDeletion struct{ scenario.FaultSpec }

func (f nodeMarkedForDeletion) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	node, err := nodeName(ctx, c, p, "node")
	if err != nil {
		return err
	}
	return updateNode(ctx, c, node, func(n *corev1.Node) {
		if !slices.ContainsFunc(n.Spec.Taints, isToBeDeleted) {
			// The autoscaler's value is the time it decided, in seconds.
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: healthcheck.ToBeDeletedTaint,
				Value: fmt.Sprint(time.Now().Unix()), Effect: corev1.TaintEffectNoSchedule})
		}
	})
}

// Revert takes the taint off: it outlives the scenario's namespaces.
func (f nodeMarkedForDeletion) Revert(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	node, err := nodeName(ctx, c, p, "node")
	if err != nil {
		return err
	}
	return updateNode(ctx, c, node, func(n *corev1.Node) {
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, isToBeDeleted)
	})
}

func isToBeDeleted(t corev1.Taint) bool { return t.Key == healthcheck.ToBeDeletedTaint }

// updateNode changes a Node, retrying on conflicts (the node agent
// updates its Node's status all the time).
func updateNode(ctx context.Context, c cluster.Cluster, name string, mutate func(*corev1.Node)) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading node %s: %w", name, err)
		}
		mutate(n)
		_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}
