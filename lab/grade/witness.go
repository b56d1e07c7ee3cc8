package grade

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/scenario"
)

// witnessImage is what a witness Pod runs: the image the scenarios' own
// clients use, on every backend.
const witnessImage = "busybox:1.36"

// witnessStart bounds how long a witness Pod may take to run, and
// witnessLifetime how long it runs at most.
const (
	witnessStart    = 90 * time.Second
	witnessLifetime = 10 * time.Minute
)

// witnessPod makes the Pod a probe starts from (scenario.Witness): a fresh
// name, exactly the labels the check gives, in the source's namespace or
// in a new one of its own; it returns once the Pod runs and, where the
// cluster says so, every node's NetworkPolicy agent enforces it. remove
// deletes what it made; call it even after an error.
func (g *Grader) witnessPod(ctx context.Context, cs kubernetes.Interface, from scenario.ProbeSource) (pod *corev1.Pod, remove func(), err error) {
	w := from.Witness
	name := witnessPrefix + strings.ToLower(rand.Text()[:8])
	ns := from.Namespace
	if ns == "" {
		ns = "default"
	}
	var made []func(context.Context)
	remove = func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for i := len(made) - 1; i >= 0; i-- {
			made[i](ctx)
		}
	}
	nsVersion := ""
	if w.NamespaceLabels != nil {
		nsLabels := maps.Clone(w.NamespaceLabels)
		nsLabels[corev1.LabelMetadataName] = name
		n, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: nsLabels}}, metav1.CreateOptions{})
		if err != nil {
			return nil, remove, fmt.Errorf("making the grader's witness namespace %s: %w", name, err)
		}
		made = append(made, func(ctx context.Context) {
			if err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				g.log().WarnContext(ctx, "removing the grader's witness namespace", "namespace", name, "err", err)
			}
		})
		ns, nsVersion = name, n.ResourceVersion
	}
	// A witness that outlives its check (svclab stopped before removing
	// it) ends on its own.
	zero, no, deadline := int64(0), false, int64(witnessLifetime.Seconds())
	podLabels := maps.Clone(w.Labels)
	if podLabels == nil {
		podLabels = map[string]string{}
	}
	for _, k := range w.RandomLabels {
		podLabels[k] = "w-" + strings.ToLower(rand.Text()[:8])
	}
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: podLabels},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "witness", Image: witnessImage, Command: []string{"sleep", "3600"},
				ImagePullPolicy: corev1.PullIfNotPresent}},
			RestartPolicy:                 corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:         &deadline,
			TerminationGracePeriodSeconds: &zero,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
		},
	}
	if from.OnNode != "" {
		want.Spec.NodeName = scenario.NodeName(g.Cluster.Name(), from.OnNode)
	}
	// A new namespace gets its default ServiceAccount a moment after it
	// exists; until then admission turns Pods away.
	until := time.Now().Add(witnessStart)
	for {
		pod, err = cs.CoreV1().Pods(ns).Create(ctx, want, metav1.CreateOptions{})
		if err == nil || w.NamespaceLabels == nil || !apierrors.IsForbidden(err) && !apierrors.IsServerTimeout(err) || time.Now().After(until) {
			break
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return nil, remove, err
		}
	}
	if err != nil {
		return nil, remove, fmt.Errorf("making the grader's witness Pod %s/%s: %w", ns, name, err)
	}
	made = append(made, func(ctx context.Context) {
		err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !apierrors.IsNotFound(err) {
			g.log().WarnContext(ctx, "removing the grader's witness Pod", "pod", ns+"/"+name, "err", err)
		}
	})
	// What admission made of it must still be the class the check
	// speaks of.
	if !maps.Equal(pod.Labels, podLabels) {
		return nil, remove, fmt.Errorf("something in the cluster changed the labels of the grader's witness Pod %s/%s (asked for %v, got %v): an admission webhook or policy must leave the grader's Pods as they are", ns, name, podLabels, pod.Labels)
	}
	for pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		switch {
		case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
			return nil, remove, fmt.Errorf("the grader's witness Pod %s/%s stopped (%s) before it could probe: %s", ns, name, pod.Status.Phase, pod.Status.Message)
		case time.Now().After(until):
			return nil, remove, fmt.Errorf("the grader's witness Pod %s/%s is not running after %s (phase %s)", ns, name, witnessStart, pod.Status.Phase)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return nil, remove, err
		}
		if pod, err = cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return nil, remove, fmt.Errorf("reading the grader's witness Pod %s/%s: %w", ns, name, err)
		}
	}
	if pc, ok := g.Cluster.(cluster.PolicyCluster); ok {
		if err := pc.WaitPolicy(ctx, pod.ResourceVersion, nsVersion); err != nil {
			return nil, remove, fmt.Errorf("waiting for the nodes to enforce NetworkPolicy on the grader's witness Pod %s/%s: %w", ns, name, err)
		}
	}
	return pod, remove, nil
}

// sleepCtx waits d, or less if ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// witnessDesc names a witness Pod for the learner by the class it stands
// for: "a new Pod labelled app=client in namespace shop (the grader's
// svclab-witness-1a2b3c4d)".
func witnessDesc(pod *corev1.Pod) string {
	where := "namespace " + pod.Namespace
	if strings.HasPrefix(pod.Namespace, witnessPrefix) {
		where = "a new namespace"
	}
	return fmt.Sprintf("a new Pod labelled %s in %s (the grader's %s)", labels.Set(pod.Labels).String(), where, pod.Name)
}
