//go:build linux

package nodeagent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/embedded/userns"
)

// A Pod with hostUsers: false gets a user namespace of its own, as the
// kubelet's user-namespace support gives: nested in the lab's, mapping a
// block of 65,536 of the lab's ids that no other Pod of the lab holds.
// Root in such a Pod is an unprivileged id of the lab, and its network
// namespace is its own user namespace's, as a CRI runtime makes it.

// ownUsers tells whether pod asks for a user namespace of its own.
func ownUsers(pod *corev1.Pod) bool {
	return pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers
}

// podIDs is the lab's pool of blocks for such Pods: every block of the
// lab's range but the first, which is the lab's own. The claims live in
// the lab's runtime directory, shared by the lab's node agents.
func (iso Isolation) podIDs() userns.Allocator {
	return userns.Allocator{Dir: filepath.Join(iso.RunDir, "pod-ids"), First: iso.IDs.Base + userns.PodSize,
		Size: userns.PodSize, Count: int(iso.IDs.Size/userns.PodSize) - 1}
}

// podIsolation claims a block of the lab's ids for the Pod in dir and
// makes its user namespace, pinned in dir.
func (iso Isolation) podIsolation(ctx context.Context, dir string) (Isolation, *userns.Claim, error) {
	pool := iso.podIDs()
	claim, err := pool.Allocate(dir, func(c userns.Claim) bool { return !exists(c.Owner) })
	if err != nil {
		return Isolation{}, nil, fmt.Errorf("ids for the Pod's own user namespace: %w", err)
	}
	pin := filepath.Join(dir, "userns")
	userns.Remove(pin) // an interrupted earlier attempt's
	inLab := userns.Range{Base: claim.Range.Base - iso.IDs.Base, Size: claim.Range.Size}
	if err := userns.NewChild(ctx, iso.Userns, pin, inLab); err != nil {
		pool.Release(claim)
		return Isolation{}, nil, err
	}
	return Isolation{Userns: pin, IDs: claim.Range, RunDir: iso.RunDir}, &claim, nil
}

// releasePodIsolation undoes podIsolation.
func (iso Isolation) releasePodIsolation(pod Isolation, claim *userns.Claim) error {
	if err := pod.dropLayers(); err != nil {
		return fmt.Errorf("the image layers mapped for the Pod: %w", err)
	}
	if err := userns.Remove(pod.Userns); err != nil {
		return err
	}
	if claim == nil {
		return nil
	}
	return iso.podIDs().Release(*claim)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
