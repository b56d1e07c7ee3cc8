//go:build linux

package nodeagent

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestMountBudget: the lab's nodes share one budget; a node's Pods count
// while its agent runs, and a stopped agent's share passes to the agent
// that adopts its Pods.
func TestMountBudget(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "i"}},
		Containers:     []corev1.Container{{Name: "a", VolumeMounts: make([]corev1.VolumeMount, 3)}},
	}}
	if n := podMounts(pod); n != 5+8 {
		t.Fatalf("podMounts = %d, want 13", n)
	}
	b := NewMountBudget(30)
	w1, w2 := &provider{}, &provider{}
	b.join(w1)
	b.join(w2)
	if err := b.take(w1, 13); err != nil {
		t.Fatal(err)
	}
	if err := b.take(w2, 13); err != nil {
		t.Fatal(err)
	}
	err := b.take(w2, 13)
	if err == nil || !strings.Contains(err.Error(), "may hold 30 mounts at once, its Pods hold 26") {
		t.Fatalf("a third Pod on another node: %v", err)
	}
	if w2.mounts.Load() != 13 {
		t.Errorf("a refused Pod counted: %d", w2.mounts.Load())
	}
	// w1's agent stops; the agent that adopts its Pod counts it again.
	b.leave(w1)
	again := &provider{}
	b.join(again)
	again.mounts.Add(13)
	if err := b.take(w2, 13); err == nil {
		t.Error("the adopted Pod's mounts were not counted")
	}
	again.mounts.Add(-13) // its Pod ends
	if err := b.take(w2, 13); err != nil {
		t.Errorf("room freed by an ended Pod: %v", err)
	}
	var none *MountBudget
	if err := none.take(w1, 1<<20); err != nil {
		t.Errorf("no budget refused: %v", err)
	}
}
