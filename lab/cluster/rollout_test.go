package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

func TestDaemonSetRolledOut(t *testing.T) {
	for _, tc := range []struct {
		name string
		gen  int64
		st   appsv1.DaemonSetStatus
		want bool
	}{
		{"done", 2, appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberReady: 3}, true},
		{"change not seen", 3, appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberReady: 3}, false},
		{"one Pod on the old template", 2, appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 2, NumberReady: 3}, false},
		{"one Pod not ready", 2, appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberReady: 2}, false},
		{"one Pod unavailable", 2, appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberReady: 3, NumberUnavailable: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := &appsv1.DaemonSet{Status: tc.st}
			ds.Generation = tc.gen
			if got, state := DaemonSetRolledOut(ds); got != tc.want {
				t.Errorf("DaemonSetRolledOut = %v (%s), want %v", got, state, tc.want)
			}
		})
	}
}

func TestWaitRolledOut(t *testing.T) {
	three := int32(3)
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "kube-system", Name: name, Generation: 2}
	}
	cs := fake.NewClientset(
		&appsv1.Deployment{ObjectMeta: meta("done"), Spec: appsv1.DeploymentSpec{Replicas: &three},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}},
		&appsv1.Deployment{ObjectMeta: meta("rolling"), Spec: appsv1.DeploymentSpec{Replicas: &three},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 1, AvailableReplicas: 3}},
		&appsv1.DaemonSet{ObjectMeta: meta("done"),
			Status: appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberReady: 3}},
		&appsv1.DaemonSet{ObjectMeta: meta("rolling"),
			Status: appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 2, NumberReady: 2}},
	)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		wait func(ctx context.Context, cs kubernetes.Interface, ns, name string, timeout time.Duration) error
		obj  string
		want string // "" done; else in the error
	}{
		{"Deployment done", WaitDeploymentRolledOut, "done", ""},
		{"Deployment rolling", WaitDeploymentRolledOut, "rolling", "Deployment kube-system/rolling did not come back within 1s: 1 of 3 replicas updated, 3 available, 4 in all"},
		{"Deployment missing", WaitDeploymentRolledOut, "gone", `deployments.apps "gone" not found`},
		{"DaemonSet done", WaitDaemonSetRolledOut, "done", ""},
		{"DaemonSet rolling", WaitDaemonSetRolledOut, "rolling", "DaemonSet kube-system/rolling did not come back within 1s: 2 of 3 Pods updated, 2 ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.wait(ctx, cs, "kube-system", tc.obj, time.Second)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("err = %v, want done", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want %q in it", err, tc.want)
			}
		})
	}
}
