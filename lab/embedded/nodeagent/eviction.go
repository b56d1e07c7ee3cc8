//go:build linux

package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The kubelet's eviction of Pods past their local ephemeral storage
// limits (pkg/kubelet/eviction, localStorageEviction): every
// evictionInterval the agent measures what each Pod with such a limit
// writes on the node — each container's writable layer and logs, each
// disk-backed emptyDir — and evicts, in the kubelet's order, a Pod whose
// emptyDir passes its sizeLimit, whose total passes the sum of its
// containers' limits, or whose container passes its own. An evicted Pod is
// Failed with reason Evicted and a DisruptionTarget condition, its
// containers stopped at once (the kubelet's grace of 1 s): its endpoints
// go, its object stays.
const evictionInterval = 10 * time.Second

// evictionGrace is the kubelet's immediateEvictionGracePeriodSeconds.
const evictionGrace = time.Second

// maxUsageEntries bounds the files one measurement visits: a Pod that
// makes more is measured as far as that (its usage is at least that much).
const maxUsageEntries = 200_000

// maxUsageDepth bounds how deep one measurement descends (two descriptors
// a level): a lab that nests directories without end is measured down to
// it, and cannot run the agent out of descriptors or stack.
const maxUsageDepth = 128

// evictPods ends, until ctx ends, the Pods past their
// activeDeadlineSeconds (every second) and the Pods past their storage
// limits (every evictionInterval).
func (p *provider) evictPods(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	lastMeasured := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		measure := now.Sub(lastMeasured) >= evictionInterval
		if measure {
			lastMeasured = now
		}
		for _, r := range p.runs() {
			if r.pastDeadline(now) {
				r.endAtDeadline()
				continue
			}
			if !measure {
				continue
			}
			if msg := r.storageEviction(); msg != "" {
				r.evict(msg)
			}
		}
	}
}

// pastDeadline tells whether the Pod, not ended yet, has been active on
// the node longer than its activeDeadlineSeconds.
func (r *podRun) pastDeadline(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.pod.Spec.ActiveDeadlineSeconds
	ended := r.terminating || r.phase == corev1.PodSucceeded || r.phase == corev1.PodFailed
	return d != nil && !ended && now.Sub(r.startTime.Time) >= time.Duration(*d)*time.Second
}

// endAtDeadline ends the Pod as the kubelet's active deadline handler
// does: Failed, reason DeadlineExceeded, a DeadlineExceeded event, its
// containers stopped within the Pod's grace period; its object stays.
func (r *podRun) endAtDeadline() {
	const msg = "Pod was active on the node longer than the specified deadline"
	r.mu.Lock()
	if r.terminating {
		r.mu.Unlock()
		return
	}
	r.phase, r.reason, r.message = corev1.PodFailed, "DeadlineExceeded", msg
	grace := probeGrace(r.pod)
	r.mu.Unlock()
	r.event(corev1.EventTypeWarning, "DeadlineExceeded", "%s", msg)
	r.changed()
	r.terminate(grace, false)
}

// hasStorageLimits tells whether pod has anything local storage eviction
// judges: a container's ephemeral-storage limit or an emptyDir's
// sizeLimit.
func hasStorageLimits(pod *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if _, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
				return true
			}
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil && v.EmptyDir.Medium != corev1.StorageMediumMemory {
			return true
		}
	}
	return false
}

// storageEviction returns why the Pod is to be evicted (the kubelet's
// message), or "".
func (r *podRun) storageEviction() string {
	r.mu.Lock()
	pod, terminating, phase := r.pod, r.terminating, r.phase
	containers := append([]*containerRun(nil), r.containers...)
	r.mu.Unlock()
	if terminating || phase == corev1.PodSucceeded || phase == corev1.PodFailed || !r.files.valid() || !hasStorageLimits(pod) {
		return ""
	}
	var total int64
	// emptyDirs first (the kubelet's emptyDirLimitEviction).
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.Medium == corev1.StorageMediumMemory {
			continue
		}
		used := r.usage("volumes", v.Name)
		total += used
		if l := v.EmptyDir.SizeLimit; l != nil && !l.IsZero() && used > l.Value() {
			return fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q. ", v.Name, l.String())
		}
	}
	perContainer := map[string]int64{}
	for _, c := range containers {
		c.mu.Lock()
		id := c.currentID
		c.mu.Unlock()
		used := r.usage("logs", c.spec.Name)
		if id != "" {
			used += r.usage("containers", id, "upper")
		}
		perContainer[c.spec.Name] = used
		total += used
	}
	// Then the Pod's total against its containers' limits together
	// (podEphemeralStorageLimitEviction), then each container's own.
	var podLimit resource.Quantity
	limited := false
	for _, c := range containers {
		if l, ok := c.spec.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
			podLimit.Add(l)
			limited = true
		}
	}
	if limited && total > podLimit.Value() {
		return fmt.Sprintf("Pod ephemeral local storage usage exceeds the total limit of containers %s. ", podLimit.String())
	}
	for _, c := range containers {
		if l, ok := c.spec.Resources.Limits[corev1.ResourceEphemeralStorage]; ok && perContainer[c.spec.Name] > l.Value() {
			return fmt.Sprintf("Container %s exceeded its local ephemeral storage limit %q. ", c.spec.Name, l.String())
		}
	}
	return ""
}

// usage is what the Pod's directory names hold on the node's disk, in
// bytes; 0 where there is nothing (yet).
func (r *podRun) usage(names ...string) int64 {
	rel, err := r.files.sub(names...)
	if err != nil {
		return 0
	}
	var used int64
	err = r.p.cfg.tree().at(rel, func(fd int) error {
		var err error
		used, err = diskUsage(fd, maxUsageEntries)
		return err
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, errTooManyEntries) {
		r.p.log.Debug("measuring a pod's local storage", "pod", podKey(r.pod.Namespace, r.pod.Name), "dir", rel, "err", err)
	}
	return used
}

var errTooManyEntries = errors.New("more files, or deeper ones, than one measurement visits")

// diskUsage is the space the tree of dir (an O_PATH descriptor) takes, as
// du counts it (allocated blocks, each inode once), visiting at most max
// entries. It follows no link and stays on dir's filesystem: the tree is
// the lab's, and the agent is root on the host.
func diskUsage(dir, max int) (int64, error) {
	seen := map[[2]uint64]bool{}
	left := max
	var walk func(fd, depth int) (int64, error)
	walk = func(fd, depth int) (int64, error) {
		d, err := unix.Openat2(fd, ".", &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: noLinks})
		if err != nil {
			return 0, err
		}
		f := os.NewFile(uintptr(d), "dir")
		defer f.Close()
		var st unix.Stat_t
		if err := unix.Fstat(d, &st); err != nil {
			return 0, err
		}
		dev := st.Dev
		total := st.Blocks * 512
		for {
			names, err := f.Readdirnames(1024)
			for _, name := range names {
				if left--; left < 0 {
					return total, errTooManyEntries
				}
				if err := unix.Fstatat(d, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					continue // gone meanwhile
				}
				if st.Dev != dev {
					continue // a mount: not this disk's
				}
				key := [2]uint64{st.Dev, st.Ino}
				if st.Nlink > 1 {
					if seen[key] {
						continue
					}
					seen[key] = true
				}
				if st.Mode&unix.S_IFMT != unix.S_IFDIR {
					total += st.Blocks * 512
					continue
				}
				if depth >= maxUsageDepth {
					return total, errTooManyEntries
				}
				sub, err := unix.Openat2(d, name, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: noLinks | unix.RESOLVE_NO_XDEV})
				if err != nil {
					continue // replaced by a link or gone meanwhile
				}
				n, err := walk(sub, depth+1)
				unix.Close(sub)
				total += n
				if errors.Is(err, errTooManyEntries) {
					return total, err
				}
			}
			if err == io.EOF || len(names) == 0 {
				return total, nil
			}
			if err != nil {
				return total, err
			}
		}
	}
	return walk(dir, 0)
}

// evict ends the Pod as the kubelet evicts it: Failed, reason Evicted, the
// message saying which limit it passed, a DisruptionTarget condition and
// an Evicted event; its containers stop at once and its object stays.
func (r *podRun) evict(msg string) {
	r.mu.Lock()
	if r.terminating {
		r.mu.Unlock()
		return
	}
	r.phase, r.reason, r.message, r.evicted = corev1.PodFailed, "Evicted", msg, true
	r.mu.Unlock()
	r.p.log.Info("evicting pod", "pod", podKey(r.pod.Namespace, r.pod.Name), "why", msg)
	r.event(corev1.EventTypeWarning, "Evicted", "%s", msg)
	r.changed()
	r.terminate(evictionGrace, false)
}
