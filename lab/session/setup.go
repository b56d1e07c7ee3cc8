package session

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/scenario"
)

// FieldManager is the server-side apply field manager of setup manifests.
const FieldManager = "svclab-setup"

// objects are every object of the scenario's setup manifests, in order.
func objects(s *scenario.Scenario) []scenario.Object {
	var out []scenario.Object
	for _, m := range s.Manifests {
		out = append(out, m.Objects...)
	}
	return out
}

// namespaces are the Namespaces that the setup manifests create.
func namespaces(s *scenario.Scenario) []string {
	var out []string
	for _, o := range objects(s) {
		if o.GVK.Kind == "Namespace" && o.GVK.Group == "" {
			out = append(out, o.Name)
		}
	}
	return out
}

// applier applies manifests with the dynamic client.
type applier struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	cs     kubernetes.Interface
}

func newApplier(c cluster.Cluster) (*applier, error) {
	objs, err := grade.NewObjects(c)
	if err != nil {
		return nil, err
	}
	cs, err := c.Client()
	if err != nil {
		return nil, err
	}
	return &applier{dyn: objs.Client, mapper: objs.Mapper, cs: cs}, nil
}

func (a *applier) resource(o scenario.Object) (dynamic.ResourceInterface, error) {
	m, err := a.mapper.RESTMapping(o.GVK.GroupKind(), o.GVK.Version)
	if err != nil {
		return nil, fmt.Errorf("the cluster serves no %s %s: %w", o.GVK.GroupVersion(), o.GVK.Kind, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return a.dyn.Resource(m.Resource).Namespace(o.Namespace), nil
	}
	return a.dyn.Resource(m.Resource), nil
}

// apply server-side applies o; after a Namespace it waits for the
// namespace's default ServiceAccount, without which Pods are refused.
func (a *applier) apply(ctx context.Context, file string, o scenario.Object) error {
	ri, err := a.resource(o)
	if err != nil {
		return fmt.Errorf("%s:%d: %w", file, o.Line, err)
	}
	force := true
	if _, err := ri.Patch(ctx, o.Name, types.ApplyPatchType, o.JSON, metav1.PatchOptions{FieldManager: FieldManager, Force: &force}); err != nil {
		return fmt.Errorf("%s:%d: applying %s %s: %w", file, o.Line, o.GVK.Kind, o.Name, err)
	}
	if o.GVK.Kind != "Namespace" {
		return nil
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := a.cs.CoreV1().ServiceAccounts(o.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s got no default ServiceAccount within 30s (is kube-controller-manager running?): %w", o.Name, err)
	}
	return nil
}

// remove deletes the objects of s that do not live in one of its
// namespaces, then the namespaces, with their Pods killed at once (no grace
// period). With wait it returns once the namespaces are gone.
func remove(ctx context.Context, a *applier, s *scenario.Scenario, waitGone bool) error {
	nss := namespaces(s)
	objs := objects(s)
	for i := len(objs) - 1; i >= 0; i-- {
		o := objs[i]
		if o.GVK.Kind == "Namespace" || slices.Contains(nss, o.Namespace) {
			continue
		}
		ri, err := a.resource(o)
		if err != nil {
			return err
		}
		if err := ri.Delete(ctx, o.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s: %w", o.GVK.Kind, o.Name, err)
		}
	}
	// A one-second grace period, not zero: a zero grace period removes
	// the Pod object before its node agent has stopped it, and the node
	// agent (lab/embedded/nodeagent) tracks Pods by namespace and name, so a Pod of
	// the same name created right after (the next run's client Pod) can
	// be caught by the old one's termination and stay Pending.
	one := int64(1)
	for _, ns := range nss {
		if _, err := a.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			continue
		}
		_ = a.cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &one}, metav1.ListOptions{})
		if err := a.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting namespace %s: %w", ns, err)
		}
	}
	if !waitGone {
		return nil
	}
	for _, ns := range nss {
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := a.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			return fmt.Errorf("namespace %s was not deleted within 2 minutes: %w", ns, err)
		}
	}
	return nil
}

// settle waits until the workloads of the setup manifests have rolled out:
// every Deployment, StatefulSet and DaemonSet runs its current template
// only, no Pod of the scenario's namespaces is terminating (it deletes
// terminating Pods without grace period), and, with ready, every workload
// and bare Pod is ready. On timeout it says what is still pending.
func settle(ctx context.Context, cs kubernetes.Interface, s *scenario.Scenario, ready bool, timeout time.Duration) error {
	var last []string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var pending []string
		defer func() {
			// The last round may be cut short, and near the deadline the
			// client's rate limiter refuses requests it cannot finish:
			// the round before says what is pending.
			dl, ok := ctx.Deadline()
			near := ok && time.Until(dl) < min(2*time.Second, timeout/4)
			if ctx.Err() == nil && (last == nil || !near) {
				last = pending
			}
		}()
		for _, o := range objects(s) {
			if msg := notSettled(ctx, cs, o, ready); msg != "" {
				pending = append(pending, msg)
			}
		}
		for _, ns := range namespaces(s) {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				pending = append(pending, fmt.Sprintf("listing the Pods of %s: %v", ns, err))
				continue
			}
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil {
					continue
				}
				// Replaced Pods would linger for their grace period (30
				// s for a PID 1 that ignores SIGTERM), serving as
				// terminating endpoints; end them now.
				zero := int64(0)
				_ = cs.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
				pending = append(pending, fmt.Sprintf("Pod %s/%s is terminating", ns, p.Name))
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("still waiting after %s: %s", timeout, strings.Join(last, "; "))
	}
	return nil
}

func notSettled(ctx context.Context, cs kubernetes.Interface, o scenario.Object, ready bool) string {
	ns, name := o.Namespace, o.Name
	switch o.Typed.(type) {
	case *appsv1.Deployment:
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Sprintf("Deployment %s/%s: %v", ns, name, err)
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		st := d.Status
		switch {
		case st.ObservedGeneration < d.Generation:
			return fmt.Sprintf("Deployment %s/%s: the controller has not seen the last change", ns, name)
		case (st.UpdatedReplicas != want || st.Replicas != want) && (ready || !rolloutStuck(ctx, cs, d)):
			return fmt.Sprintf("Deployment %s/%s: %d of %d replicas updated, %d in all", ns, name, st.UpdatedReplicas, want, st.Replicas)
		case ready && st.AvailableReplicas != want:
			return fmt.Sprintf("Deployment %s/%s: %d of %d replicas available%s", ns, name, st.AvailableReplicas, want, podTrouble(ctx, cs, ns, d.Spec.Selector))
		}
	case *appsv1.StatefulSet:
		sts, err := cs.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Sprintf("StatefulSet %s/%s: %v", ns, name, err)
		}
		want := int32(1)
		if sts.Spec.Replicas != nil {
			want = *sts.Spec.Replicas
		}
		if sts.Status.ObservedGeneration < sts.Generation || sts.Status.UpdatedReplicas != want || (ready && sts.Status.ReadyReplicas != want) {
			return fmt.Sprintf("StatefulSet %s/%s: %d of %d replicas ready%s", ns, name, sts.Status.ReadyReplicas, want, podTrouble(ctx, cs, ns, sts.Spec.Selector))
		}
	case *appsv1.DaemonSet:
		ds, err := cs.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Sprintf("DaemonSet %s/%s: %v", ns, name, err)
		}
		st := ds.Status
		if st.ObservedGeneration < ds.Generation || st.UpdatedNumberScheduled != st.DesiredNumberScheduled || (ready && st.NumberReady != st.DesiredNumberScheduled) {
			return fmt.Sprintf("DaemonSet %s/%s: %d of %d Pods ready%s", ns, name, st.NumberReady, st.DesiredNumberScheduled, podTrouble(ctx, cs, ns, ds.Spec.Selector))
		}
	case *corev1.Pod:
		if !ready {
			return ""
		}
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Sprintf("Pod %s/%s: %v", ns, name, err)
		}
		if !podReady(p) {
			where := ""
			if p.Spec.NodeName != "" {
				where = " on " + p.Spec.NodeName
			}
			return fmt.Sprintf("Pod %s/%s is %s%s%s", ns, name, p.Status.Phase, where, waitingReason(p))
		}
	}
	return ""
}

// rolloutStuck tells whether a Deployment's rollout can go no further on
// its own: new Pods exist, all of the Deployment's Pods run, and the new
// ones do not become ready (a fault may leave a rollout so, with the old
// Pods still serving).
func rolloutStuck(ctx context.Context, cs kubernetes.Interface, d *appsv1.Deployment) bool {
	if d.Status.UpdatedReplicas < 1 || d.Status.UnavailableReplicas < 1 {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return false
	}
	pods, err := cs.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil || len(pods.Items) == 0 {
		return false
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			return false
		}
		for _, c := range p.Status.ContainerStatuses {
			// A Pod that started a moment ago may just not have passed
			// its first probe yet.
			if c.State.Running == nil || (!c.Ready && time.Since(c.State.Running.StartedAt.Time) < stuckAfter) {
				return false
			}
		}
	}
	return true
}

// stuckAfter is how long a running container must have stayed unready
// for its rollout to count as stuck.
const stuckAfter = 15 * time.Second

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitingReason says why p's first troubled container does not run or is
// not ready: what it waits for, and how often it ended and how last.
func waitingReason(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		var why []string
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			why = append(why, w.Reason)
		}
		if cs.RestartCount > 0 {
			last := ""
			if t := cs.LastTerminationState.Terminated; t != nil {
				last = fmt.Sprintf(", last with exit code %d", t.ExitCode)
			}
			why = append(why, fmt.Sprintf("restarted %d times%s", cs.RestartCount, last))
		}
		if len(why) > 0 {
			return " (" + cs.Name + ": " + strings.Join(why, ", ") + ")"
		}
	}
	return ""
}

// podTrouble names the first not-ready Pod of a workload and why.
func podTrouble(ctx context.Context, cs kubernetes.Interface, ns string, sel *metav1.LabelSelector) string {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return ""
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: s.String()})
	if err != nil {
		return ""
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !podReady(p) && p.DeletionTimestamp == nil {
			on := ""
			if p.Spec.NodeName != "" {
				on = " on " + p.Spec.NodeName
			}
			return fmt.Sprintf(" (Pod %s%s is %s%s)", p.Name, on, p.Status.Phase, waitingReason(p))
		}
	}
	return ""
}
