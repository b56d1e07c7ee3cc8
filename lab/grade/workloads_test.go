package grade

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svclab/svclab/lab/scenario"
)

// A probe starts from the scenario's own Pods, not from Pods a learner
// added with the same labels, whatever their names or age.
func TestPickSource(t *testing.T) {
	at := func(min int) metav1.Time { return metav1.NewTime(time.Unix(1000+int64(min)*60, 0)) }
	ctrl := func(kind, name string, uid types.UID) []metav1.OwnerReference {
		yes := true
		return []metav1.OwnerReference{{Kind: kind, Name: name, UID: uid, Controller: &yes}}
	}
	pod := func(name string, created int, owners []metav1.OwnerReference, ready bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", CreationTimestamp: at(created), OwnerReferences: owners, Labels: map[string]string{"app": "client"}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		return p
	}
	// The setup's Deployment client owns ReplicaSet client-abc; the
	// learner made ReplicaSet client-fake (a Deployment's name and hash)
	// of their own, and Deployment imposter.
	cs := fake.NewClientset(
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "client-abc", Namespace: "shop", UID: "rs-1", OwnerReferences: ctrl("Deployment", "client", "dep-1")}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "client-fake", Namespace: "shop", UID: "rs-2"}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "imposter-x", Namespace: "shop", UID: "rs-3", OwnerReferences: ctrl("Deployment", "imposter", "dep-2")}},
	)
	s := &scenario.Scenario{Manifests: []scenario.Manifest{{Objects: []scenario.Object{
		{GVK: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Namespace: "shop", Name: "client", Typed: &appsv1.Deployment{}},
		{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, Namespace: "shop", Name: "probe", Typed: &corev1.Pod{}},
	}}}}
	ctx := withWorkloads(context.Background(), s)
	mine := pod("client-abc-1", 10, ctrl("ReplicaSet", "client-abc", "rs-1"), true)
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want string
	}{
		{"a learner's bare Pod, named first and older", []corev1.Pod{pod("aaa", 1, nil, true), mine}, "client-abc-1"},
		{"a learner's ReplicaSet imitating the Deployment's", []corev1.Pod{pod("client-fake-1", 1, ctrl("ReplicaSet", "client-fake", "rs-2"), true), mine}, "client-abc-1"},
		{"a learner's Deployment", []corev1.Pod{pod("imposter-x-1", 1, ctrl("ReplicaSet", "imposter-x", "rs-3"), true), mine}, "client-abc-1"},
		{"the setup's bare Pod, by name", []corev1.Pod{pod("aaa", 1, nil, true), pod("probe", 20, nil, true)}, "probe"},
		{"Ready first", []corev1.Pod{pod("client-abc-0", 1, ctrl("ReplicaSet", "client-abc", "rs-1"), false), mine}, "client-abc-1"},
		{"oldest of the ready ones", []corev1.Pod{pod("client-abc-2", 30, ctrl("ReplicaSet", "client-abc", "rs-1"), true), mine}, "client-abc-1"},
		{"only a learner's Pod runs", []corev1.Pod{pod("aaa", 1, nil, true)}, "aaa"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pickSource(ctx, cs, tc.pods)
			if got == nil || got.Name != tc.want {
				t.Errorf("picked %v, want %s", got, tc.want)
			}
		})
	}
	if pickSource(ctx, cs, []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}}) != nil {
		t.Error("a Pending Pod was picked")
	}
}
