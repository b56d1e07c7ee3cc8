//go:build linux

package nodeagent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
)

// write makes a file of n bytes (written, so that its blocks are
// allocated) at path, and its directories.
func write(t *testing.T, path string, n int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
		t.Fatal(err)
	}
}

// diskUsage counts what the tree allocates, each inode once, and nothing
// a link points at; it stops at its bound of entries.
func TestDiskUsage(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	write(t, filepath.Join(outside, "big"), 8<<20)
	write(t, filepath.Join(dir, "a"), 1<<20)
	write(t, filepath.Join(dir, "sub", "deeper", "b"), 2<<20)
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "sub", "a-again")); err != nil {
		t.Fatal(err)
	}
	for _, link := range []string{filepath.Join(dir, "to-big"), filepath.Join(dir, "sub", "to-outside")} {
		target := filepath.Join(outside, "big")
		if strings.HasSuffix(link, "outside") {
			target = outside
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := openDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	used, err := diskUsage(fd, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if used < 3<<20 || used > 3<<20+64<<10 {
		t.Errorf("usage %d bytes, want about 3 MiB (the hard link once, no link followed)", used)
	}
	if _, err := diskUsage(fd, 3); !errors.Is(err, errTooManyEntries) {
		t.Errorf("with a bound of 3 entries: %v", err)
	}
	// Directories nested past maxUsageDepth are measured down to it.
	deep := t.TempDir()
	p := deep
	for range maxUsageDepth + 20 {
		p = filepath.Join(p, "d")
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	dfd, err := openDir(deep)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	if _, err := diskUsage(dfd, 1000); !errors.Is(err, errTooManyEntries) {
		t.Errorf("%d nested directories: %v, want the depth bound", maxUsageDepth+20, err)
	}
}

// A Pod past a local ephemeral storage limit is evicted with the
// kubelet's reason, message and condition, in the kubelet's order; Pods
// within their limits and Pods without any are left alone.
func TestStorageEviction(t *testing.T) {
	limit := func(q string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(q)}}
	}
	size := resource.MustParse("1Mi")
	pod := func(uid int, containers []corev1.Container, volumes ...corev1.Volume) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: testUID(uid)},
			Spec: corev1.PodSpec{Containers: containers, Volumes: volumes}}
	}
	scratch := corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size}}}
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		files map[string]int // relative to the Pod's directory
		want  string
	}{
		{"no limits", pod(1, []corev1.Container{{Name: "c"}}), map[string]int{"containers/c1/upper/file": 10 << 20}, ""},
		{"within its limit", pod(2, []corev1.Container{{Name: "c", Resources: limit("5Mi")}}), map[string]int{"containers/c1/upper/file": 3 << 20}, ""},
		{"the upstream spec's pod: 10 MiB written, 5Mi allowed", pod(3, []corev1.Container{{Name: "c", Resources: limit("5Mi")}}),
			map[string]int{"containers/c1/upper/file": 10 << 20}, "Pod ephemeral local storage usage exceeds the total limit of containers 5Mi. "},
		{"logs count", pod(4, []corev1.Container{{Name: "c", Resources: limit("5Mi")}}),
			map[string]int{"logs/c/0.log": 6 << 20}, "Pod ephemeral local storage usage exceeds the total limit of containers 5Mi. "},
		{"one container past its own limit, the pod within the sum", pod(5, []corev1.Container{{Name: "a", Resources: limit("1Mi")}, {Name: "b", Resources: limit("10Mi")}}),
			map[string]int{"logs/a/0.log": 2 << 20}, `Container a exceeded its local ephemeral storage limit "1Mi". `},
		{"an emptyDir past its sizeLimit comes first", pod(6, []corev1.Container{{Name: "c", Resources: limit("1Mi")}}, scratch),
			map[string]int{"volumes/scratch/f": 2 << 20}, `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testPodRun(t, tc.pod)
			events := record.NewFakeRecorder(10)
			r.p.events = events
			r.p.pods[podKey("default", "p")] = r
			for _, c := range r.containers {
				c.currentID = "c1"
			}
			for rel, n := range tc.files {
				write(t, filepath.Join(r.dir(), rel), n)
			}
			got := r.storageEviction()
			if got != tc.want {
				t.Fatalf("eviction %q, want %q", got, tc.want)
			}
			if got == "" {
				return
			}
			// No runtime here: no container to clean up, no run to wait
			// for.
			for _, c := range r.containers {
				c.currentID = ""
			}
			close(r.runDone)
			r.evict(got)
			<-r.stopped
			st := r.snapshot().Status
			if st.Phase != corev1.PodFailed || st.Reason != "Evicted" || st.Message != tc.want {
				t.Errorf("status: %s %q %q", st.Phase, st.Reason, st.Message)
			}
			found := false
			for _, c := range st.Conditions {
				found = found || (c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "TerminationByKubelet")
			}
			if !found {
				t.Errorf("no DisruptionTarget condition: %+v", st.Conditions)
			}
			if ev := <-events.Events; !strings.HasPrefix(ev, "Warning Evicted "+strings.TrimSpace(tc.want)) {
				t.Errorf("event %q", ev)
			}
			// An evicted pod stays known (its object stays) until it is
			// deleted; it is not measured again.
			if _, ok := r.p.pods[podKey("default", "p")]; !ok {
				t.Error("the evicted pod was forgotten before its deletion")
			}
			if again := r.storageEviction(); again != "" {
				t.Errorf("evicted twice: %q", again)
			}
		})
	}
}

// The QoS class is upstream's: only CPU and memory count (a Pod with
// only an ephemeral-storage limit is BestEffort, which the API server
// set and will not let change), and the API server's class stands.
func TestQOSClass(t *testing.T) {
	res := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i+1 < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	pod := func(limits, requests corev1.ResourceList) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Limits: limits, Requests: requests}}}}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want corev1.PodQOSClass
	}{
		{"nothing", pod(nil, nil), corev1.PodQOSBestEffort},
		{"ephemeral storage only", pod(res("ephemeral-storage", "5Mi"), nil), corev1.PodQOSBestEffort},
		{"zero quantities", pod(res("cpu", "0"), res("memory", "0")), corev1.PodQOSBestEffort},
		{"cpu and memory limits", pod(res("cpu", "1", "memory", "1Gi"), nil), corev1.PodQOSGuaranteed},
		{"requests below limits", pod(res("cpu", "1", "memory", "1Gi"), res("cpu", "500m")), corev1.PodQOSBurstable},
		{"memory request only", pod(nil, res("memory", "1Gi")), corev1.PodQOSBurstable},
	} {
		if got := qosClass(tc.pod); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	p := pod(res("cpu", "1", "memory", "1Gi"), nil)
	p.Status.QOSClass = corev1.PodQOSBurstable
	if got := qosClass(p); got != corev1.PodQOSBurstable {
		t.Errorf("the API server's class: %s", got)
	}
}
