package cluster

import (
	"encoding/json"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
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
