package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// RestartedAtAnnotation is what kubectl rollout restart sets on a
// Deployment's Pod template.
const RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"

// RolloutRestartPatch is the strategic merge patch kubectl rollout restart
// sends: the Pod template annotated with now.
func RolloutRestartPatch(now time.Time) []byte {
	b, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{RestartedAtAnnotation: now.Format(time.RFC3339Nano)}}}}})
	return b
}

// RolledOut tells whether d's current rollout is complete as kubectl
// rollout status judges it (observed, every replica updated, none of the
// old ones left, all available), and says where it stands.
func RolledOut(d *appsv1.Deployment) (done bool, state string) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	state = fmt.Sprintf("%d of %d replicas updated, %d available, %d in all", st.UpdatedReplicas, want, st.AvailableReplicas, st.Replicas)
	return st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas == want, state
}

// DaemonSetRolledOut tells whether ds's current rollout is complete as
// kubectl rollout status judges it (observed, every Pod on the current
// template, all of them ready and available), and says where it stands.
func DaemonSetRolledOut(ds *appsv1.DaemonSet) (done bool, state string) {
	st := ds.Status
	state = fmt.Sprintf("%d of %d Pods updated, %d ready", st.UpdatedNumberScheduled, st.DesiredNumberScheduled, st.NumberReady)
	return st.ObservedGeneration >= ds.Generation && st.UpdatedNumberScheduled == st.DesiredNumberScheduled &&
		st.NumberReady == st.DesiredNumberScheduled && st.NumberUnavailable == 0, state
}

// WaitDaemonSetRolledOut waits until DaemonSet ns/name has rolled out
// (DaemonSetRolledOut); on timeout it says where the rollout stands.
func WaitDaemonSetRolledOut(ctx context.Context, cs kubernetes.Interface, ns, name string, timeout time.Duration) error {
	return waitRolledOut(ctx, "DaemonSet", ns, name, timeout, func(ctx context.Context) (bool, string, error) {
		ds, err := cs.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		done, state := DaemonSetRolledOut(ds)
		return done, state, nil
	})
}

// WaitDeploymentRolledOut waits until Deployment ns/name has rolled out
// (RolledOut); on timeout it says where the rollout stands.
func WaitDeploymentRolledOut(ctx context.Context, cs kubernetes.Interface, ns, name string, timeout time.Duration) error {
	return waitRolledOut(ctx, "Deployment", ns, name, timeout, func(ctx context.Context) (bool, string, error) {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		done, state := RolledOut(d)
		return done, state, nil
	})
}

// waitRolledOut polls rolledOut until it says done; an error reading the
// object counts as not yet, and the last word (state or error) is what a
// timeout reports.
func waitRolledOut(ctx context.Context, kind, ns, name string, timeout time.Duration, rolledOut func(context.Context) (bool, string, error)) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		done, state, err := rolledOut(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = state
		return done, nil
	})
	if err != nil {
		return fmt.Errorf("%s %s/%s did not come back within %s: %s", kind, ns, name, timeout, last)
	}
	return nil
}
