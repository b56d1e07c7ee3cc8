//go:build linux

package nodeagent

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Every container's root filesystem and every volume it mounts is a mount
// in the host's mount namespace, where the kernel allows a fixed number
// for the whole machine (fs.mount-max, 100,000): one lab's Pods must not
// take them all. A lab's node agents share a MountBudget, and a node
// admits a Pod only when the lab's Pods together stay within it, as the
// kubelet admits a Pod only when the node has room for it.

// DefaultMountBudget is the most mounts one lab's containers may hold at
// once: a scenario's Pods hold a few hundred; fifty labs at their budget
// take the machine's mounts about to its limit.
const DefaultMountBudget = 2048

// MountBudget counts the mounts a lab's admitted Pods may make, as the sum
// of what each running agent's Pods hold: an agent that stops leaves its
// Pods' share to the agent that adopts them.
type MountBudget struct {
	mu     sync.Mutex
	size   int
	agents map[*provider]bool
}

// NewMountBudget is a budget of size mounts.
func NewMountBudget(size int) *MountBudget {
	return &MountBudget{size: size, agents: map[*provider]bool{}}
}

// join counts p's Pods in the budget until leave.
func (b *MountBudget) join(p *provider) {
	if b != nil {
		b.mu.Lock()
		b.agents[p] = true
		b.mu.Unlock()
	}
}

func (b *MountBudget) leave(p *provider) {
	if b != nil {
		b.mu.Lock()
		delete(b.agents, p)
		b.mu.Unlock()
	}
}

// take reserves n mounts for a Pod of p, or says why it cannot.
func (b *MountBudget) take(p *provider, n int) error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	used := 0
	for a := range b.agents {
		used += int(a.mounts.Load())
	}
	if used+n > b.size {
		return fmt.Errorf("the lab's containers may hold %d mounts at once, its Pods hold %d and this one needs %d: delete Pods you no longer need, or give this one fewer containers or volume mounts", b.size, used, n)
	}
	p.mounts.Add(int64(n))
	return nil
}

// podMounts bounds what pod's containers mount: each one's root
// filesystem, its volume mounts, and the files the agent gives every
// container (resolv.conf, hosts, hostname, its termination log).
func podMounts(pod *corev1.Pod) int {
	n := 0
	count := func(mounts []corev1.VolumeMount) { n += 1 + len(mounts) + 4 }
	for _, c := range pod.Spec.InitContainers {
		count(c.VolumeMounts)
	}
	for _, c := range pod.Spec.Containers {
		count(c.VolumeMounts)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		count(c.VolumeMounts)
	}
	return n
}
