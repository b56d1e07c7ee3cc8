//go:build linux

package nodeagent

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// kubeletConditions are the Pod conditions the kubelet owns
// (pkg/kubelet/types: PodConditionsByKubelet, and PodReadyToStartContainers).
// Other components own the others — a readiness gate's, the
// node-lifecycle controller's DisruptionTarget — and the node keeps them as
// the API server has them.
var kubeletConditions = []corev1.PodConditionType{
	corev1.PodScheduled, corev1.PodReady, corev1.PodInitialized, corev1.ContainersReady,
	corev1.PodResizeInProgress, corev1.PodResizePending, corev1.PodReadyToStartContainers,
}

func kubeletOwns(t corev1.PodConditionType) bool { return slices.Contains(kubeletConditions, t) }

// externalConditions are the conditions of cs the kubelet does not own.
func externalConditions(cs []corev1.PodCondition) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range cs {
		if !kubeletOwns(c.Type) {
			out = append(out, c)
		}
	}
	return out
}

// gatesReady tells whether every readiness gate of pod is True among ext
// (the kubelet's GeneratePodReadyCondition), and if not, why.
func gatesReady(pod *corev1.Pod, ext []corev1.PodCondition) (bool, string) {
	for _, g := range pod.Spec.ReadinessGates {
		i := slices.IndexFunc(ext, func(c corev1.PodCondition) bool { return c.Type == g.ConditionType })
		if i < 0 {
			return false, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType)
		}
		if ext[i].Status != corev1.ConditionTrue {
			return false, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", g.ConditionType, ext[i].Status)
		}
	}
	return true, ""
}

// seeConditions takes the conditions other components wrote on pod, as
// the API server has them; when they changed, the pod's status is
// published again: its Ready follows its readiness gates, and the status
// the node writes keeps them.
func (p *provider) seeConditions(pod *corev1.Pod) {
	r, ok := p.run(pod)
	if !ok {
		return
	}
	ext := externalConditions(pod.Status.Conditions)
	r.mu.Lock()
	same := slices.EqualFunc(r.external, ext, func(a, b corev1.PodCondition) bool {
		return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
	})
	if !same {
		r.external = ext
	}
	r.mu.Unlock()
	if !same {
		go r.changed()
	}
}
