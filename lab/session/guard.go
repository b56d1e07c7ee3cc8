package session

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/proxier/deploy"
)

// The cluster-wide objects a scenario may change outside its namespaces:
// kube-proxy's ConfigMap and DaemonSet (a mode switch, a proxier taken off
// a node), CoreDNS's ConfigMap and Deployment, and the nodes' labels and
// taints (zone labels).
const (
	systemNamespace = "kube-system"
	coreDNSName     = "coredns"
)

// guard is the state of those objects when a session started.
type guard struct {
	proxyConfig   map[string]string
	proxyTemplate *corev1.PodSpec
	dnsConfig     map[string]string
	dnsTemplate   *corev1.PodSpec
	dnsReplicas   *int32
	nodes         map[string]nodeState
}

type nodeState struct {
	labels map[string]string
	taints []corev1.Taint
}

// recordGuard reads the guarded objects; one that does not exist is not
// guarded.
func recordGuard(ctx context.Context, cs kubernetes.Interface) (*guard, error) {
	g := &guard{nodes: map[string]nodeState{}}
	cm, err := cs.CoreV1().ConfigMaps(systemNamespace).Get(ctx, deploy.Name, metav1.GetOptions{})
	if err == nil {
		g.proxyConfig = cm.Data
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", systemNamespace, deploy.Name, err)
	}
	ds, err := cs.AppsV1().DaemonSets(systemNamespace).Get(ctx, deploy.Name, metav1.GetOptions{})
	if err == nil {
		g.proxyTemplate = ds.Spec.Template.Spec.DeepCopy()
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading DaemonSet %s/%s: %w", systemNamespace, deploy.Name, err)
	}
	cm, err = cs.CoreV1().ConfigMaps(systemNamespace).Get(ctx, coreDNSName, metav1.GetOptions{})
	if err == nil {
		g.dnsConfig = cm.Data
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", systemNamespace, coreDNSName, err)
	}
	d, err := cs.AppsV1().Deployments(systemNamespace).Get(ctx, coreDNSName, metav1.GetOptions{})
	if err == nil {
		g.dnsTemplate, g.dnsReplicas = d.Spec.Template.Spec.DeepCopy(), d.Spec.Replicas
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading Deployment %s/%s: %w", systemNamespace, coreDNSName, err)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the nodes: %w", err)
	}
	for _, n := range nodes.Items {
		g.nodes[n.Name] = nodeState{labels: maps.Clone(n.Labels), taints: slices.Clone(n.Spec.Taints)}
	}
	return g, nil
}

// restore puts back what changed since recordGuard and waits for
// kube-proxy and CoreDNS to run their restored configuration.
func (g *guard) restore(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) error {
	var errs []error
	proxyConfigChanged, err := restoreConfigMap(ctx, cs, deploy.Name, g.proxyConfig)
	errs = append(errs, err)
	proxyRollout, err := restoreDaemonSet(ctx, cs, deploy.Name, g.proxyTemplate)
	errs = append(errs, err)
	dnsConfigChanged, err := restoreConfigMap(ctx, cs, coreDNSName, g.dnsConfig)
	errs = append(errs, err)
	dnsRollout, err := restoreDeployment(ctx, cs, coreDNSName, g.dnsTemplate, g.dnsReplicas)
	errs = append(errs, err)
	errs = append(errs, g.restoreNodes(ctx, cs))
	// A changed configuration with an unchanged Pod template: restart the
	// Pods so that they read the restored configuration at once.
	if proxyConfigChanged && !proxyRollout {
		errs = append(errs, deletePods(ctx, cs, deploy.Selector))
	}
	if dnsConfigChanged && !dnsRollout {
		errs = append(errs, deletePods(ctx, cs, "k8s-app=kube-dns"))
	}
	// Wait even when nothing was restored here: a fault's Revert or the
	// learner may have started a rollout that the next scenario must not
	// run into.
	if g.proxyTemplate != nil {
		errs = append(errs, cluster.WaitDaemonSetRolledOut(ctx, cs, systemNamespace, deploy.Name, timeout))
	}
	if g.dnsTemplate != nil {
		errs = append(errs, cluster.WaitDeploymentRolledOut(ctx, cs, systemNamespace, coreDNSName, timeout))
	}
	return errors.Join(errs...)
}

func restoreConfigMap(ctx context.Context, cs kubernetes.Interface, name string, data map[string]string) (changed bool, err error) {
	if data == nil {
		return false, nil
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cs.CoreV1().ConfigMaps(systemNamespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			changed = true
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: systemNamespace}, Data: data}
			_, err = cs.CoreV1().ConfigMaps(systemNamespace).Create(ctx, cm, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		if maps.Equal(cm.Data, data) {
			return nil
		}
		changed = true
		cm.Data = data
		_, err = cs.CoreV1().ConfigMaps(systemNamespace).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return changed, fmt.Errorf("restoring ConfigMap %s/%s: %w", systemNamespace, name, err)
	}
	return changed, nil
}

func restoreDaemonSet(ctx context.Context, cs kubernetes.Interface, name string, spec *corev1.PodSpec) (changed bool, err error) {
	if spec == nil {
		return false, nil
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds, err := cs.AppsV1().DaemonSets(systemNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if equality.Semantic.DeepEqual(ds.Spec.Template.Spec, *spec) {
			return nil
		}
		changed = true
		ds.Spec.Template.Spec = *spec.DeepCopy()
		_, err = cs.AppsV1().DaemonSets(systemNamespace).Update(ctx, ds, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return changed, fmt.Errorf("restoring DaemonSet %s/%s: %w", systemNamespace, name, err)
	}
	return changed, nil
}

func restoreDeployment(ctx context.Context, cs kubernetes.Interface, name string, spec *corev1.PodSpec, replicas *int32) (changed bool, err error) {
	if spec == nil {
		return false, nil
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := cs.AppsV1().Deployments(systemNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		sameReplicas := (replicas == nil) == (d.Spec.Replicas == nil) && (replicas == nil || *replicas == *d.Spec.Replicas)
		if equality.Semantic.DeepEqual(d.Spec.Template.Spec, *spec) && sameReplicas {
			return nil
		}
		changed = true
		d.Spec.Template.Spec, d.Spec.Replicas = *spec.DeepCopy(), replicas
		_, err = cs.AppsV1().Deployments(systemNamespace).Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return changed, fmt.Errorf("restoring Deployment %s/%s: %w", systemNamespace, name, err)
	}
	return changed, nil
}

func (g *guard) restoreNodes(ctx context.Context, cs kubernetes.Interface) error {
	var errs []error
	for name, want := range g.nodes {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			if maps.Equal(n.Labels, want.labels) && equality.Semantic.DeepEqual(n.Spec.Taints, want.taints) {
				return nil
			}
			n.Labels, n.Spec.Taints = maps.Clone(want.labels), slices.Clone(want.taints)
			_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("restoring the labels and taints of node %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func deletePods(ctx context.Context, cs kubernetes.Interface, selector string) error {
	zero := int64(0)
	if err := cs.CoreV1().Pods(systemNamespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{LabelSelector: selector}); err != nil {
		return fmt.Errorf("restarting the Pods %s in %s: %w", selector, systemNamespace, err)
	}
	return nil
}
