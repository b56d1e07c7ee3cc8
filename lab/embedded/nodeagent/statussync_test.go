//go:build linux

package nodeagent

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStatusAgrees(t *testing.T) {
	mine := corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: "10.244.1.4",
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.ContainersReady, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Ready: true, ContainerID: "runc://abc", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
	}
	with := func(f func(*corev1.PodStatus)) corev1.PodStatus {
		s := *mine.DeepCopy()
		f(&s)
		return s
	}
	for _, tc := range []struct {
		name string
		api  corev1.PodStatus
		want bool
	}{
		{"the same", mine, true},
		{"other times", with(func(s *corev1.PodStatus) {
			s.Conditions[0].LastTransitionTime = metav1.NewTime(time.Unix(1, 0))
			s.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(time.Unix(1, 0))
		}), true},
		// What the node-lifecycle controller writes while the node is
		// not Ready.
		{"marked not Ready", with(func(s *corev1.PodStatus) { s.Conditions[0].Status = corev1.ConditionFalse }), false},
		{"another phase", with(func(s *corev1.PodStatus) { s.Phase = corev1.PodPending }), false},
		{"another address", with(func(s *corev1.PodStatus) { s.PodIP = "" }), false},
		{"a condition missing", with(func(s *corev1.PodStatus) { s.Conditions = s.Conditions[:1] }), false},
		{"a container not ready", with(func(s *corev1.PodStatus) { s.ContainerStatuses[0].Ready = false }), false},
		{"a container restarted", with(func(s *corev1.PodStatus) { s.ContainerStatuses[0].RestartCount = 1 }), false},
		{"a container waiting", with(func(s *corev1.PodStatus) {
			s.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
		}), false},
		{"no containers", with(func(s *corev1.PodStatus) { s.ContainerStatuses = nil }), false},
		// Another component's condition (a readiness gate's) is theirs.
		{"another component's condition", with(func(s *corev1.PodStatus) {
			s.Conditions = append(s.Conditions, corev1.PodCondition{Type: "example.com/lb-registered", Status: corev1.ConditionFalse})
		}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := statusAgrees(tc.api, mine); got != tc.want {
				t.Errorf("statusAgrees = %v, want %v", got, tc.want)
			}
		})
	}
}

// Ready waits for every readiness gate to be True, as the kubelet's.
func TestGatesReady(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/blue"}}}}
	gate := func(s corev1.ConditionStatus) []corev1.PodCondition {
		return []corev1.PodCondition{{Type: "example.com/blue", Status: s}}
	}
	for _, tc := range []struct {
		name string
		ext  []corev1.PodCondition
		want bool
		why  string
	}{
		{"no condition yet", nil, false, `corresponding condition of pod readiness gate "example.com/blue" does not exist.`},
		{"False", gate(corev1.ConditionFalse), false, `the status of pod readiness gate "example.com/blue" is not "True", but False`},
		{"True", gate(corev1.ConditionTrue), true, ""},
	} {
		ok, why := gatesReady(pod, tc.ext)
		if ok != tc.want || why != tc.why {
			t.Errorf("%s: %v %q, want %v %q", tc.name, ok, why, tc.want, tc.why)
		}
	}
	if ok, _ := gatesReady(&corev1.Pod{}, nil); !ok {
		t.Error("a Pod without readiness gates is held back")
	}
}
