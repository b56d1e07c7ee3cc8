//go:build linux

package nodeagent

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// These tests play the API server as an attacker who writes the cluster's
// etcd: Pods, ConfigMaps and Nodes the API server would never have let
// through, and kubelet API requests with names no object has.

// hostileProvider is a provider on the state directory state, with no
// API server, runtime or network, recording its events.
func hostileProvider(t *testing.T, state string) (*provider, *record.FakeRecorder) {
	t.Helper()
	events := record.NewFakeRecorder(100)
	return &provider{
		cfg:     Config{NodeName: "lab-worker", NodeIP: "172.29.1.3", StateDir: state},
		log:     slog.New(slog.DiscardHandler),
		env:     fakeEnvSource{},
		net:     newPodNetwork(&recordingRunner{}, "node-ns", "/lab/userns", "pod-", state),
		events:  events,
		nodeCtx: context.Background(),
		pods:    map[string]*podRun{},
	}, events
}

func simplePod(uid types.UID) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default", UID: uid},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}}
}

// TestCreatePodRefusesAnInvalidPod: a Pod the API server would not have
// stored fails at once with the reason, an event says why, and nothing
// of it reaches the disk, before or after it is deleted.
func TestCreatePodRefusesAnInvalidPod(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		edit       func(p *corev1.Pod)
	}{
		{"a UID that climbs out", "metadata.uid", func(p *corev1.Pod) { p.UID = "../../../../../../outside/x" }},
		{"a UID shorter than 8 bytes", "metadata.uid", func(p *corev1.Pod) { p.UID = "abc" }},
		{"a volume that climbs out", "spec.volumes[0].name", func(p *corev1.Pod) {
			p.Spec.Volumes[0].Name = "../../../../outside"
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "../../../../outside", MountPath: "/x"}}
		}},
		{"a container that climbs out", "spec.containers[0].name", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "../../../outside" }},
		{"a namespace that climbs out", "metadata.namespace", func(p *corev1.Pod) { p.Namespace = "../.." }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, outside := attackRoot(t)
			beforeState, beforeOutside := fileState(t, state), fileState(t, outside)
			p, events := hostileProvider(t, state)
			var published []*corev1.Pod
			p.NotifyPods(context.Background(), func(pod *corev1.Pod) { published = append(published, pod) })
			pod := simplePod(testUID(1))
			tc.edit(pod)
			if err := p.CreatePod(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			r := p.pods[podKey(pod.Namespace, pod.Name)]
			st := r.snapshot().Status
			if st.Phase != corev1.PodFailed || st.Reason != rejectReason || !strings.Contains(st.Message, tc.want) ||
				!strings.HasPrefix(st.Message, "Pod was rejected: ") {
				t.Errorf("status: phase %s reason %q message %q", st.Phase, st.Reason, st.Message)
			}
			select {
			case ev := <-events.Events:
				if !strings.HasPrefix(ev, "Warning InvalidPod Pod was rejected") {
					t.Errorf("event %q", ev)
				}
			case <-time.After(time.Second):
				t.Error("no event")
			}
			r.terminate(time.Second, false)
			select {
			case <-r.stopped:
			case <-time.After(5 * time.Second):
				t.Fatal("the rejected pod did not stop")
			}
			unchanged(t, state, beforeState)
			unchanged(t, outside, beforeOutside)
			if len(published) == 0 || published[len(published)-1].Status.Phase != corev1.PodFailed {
				t.Errorf("the rejection was not published: %d updates", len(published))
			}
			// The kubelet API finds the pod and refuses its logs.
			if c, err := r.container(pod.Spec.Containers[0].Name); err == nil {
				if rel, err := c.logRel(0); err == nil {
					t.Errorf("a rejected pod has a log at %s", rel)
				}
			}
		})
	}
}

// TestRunWithoutADirectory: were a pod with no valid directory ever run,
// its run fails before it makes anything.
func TestRunWithoutADirectory(t *testing.T) {
	state, outside := attackRoot(t)
	beforeState, beforeOutside := fileState(t, state), fileState(t, outside)
	p, _ := hostileProvider(t, state)
	r := newPodRun(p, simplePod("../../outside/dir"))
	r.run()
	if r.phase != corev1.PodFailed || r.reason != "CreatePodSandboxError" {
		t.Errorf("phase %s reason %s", r.phase, r.reason)
	}
	if _, err := r.containers[0].containerSpec(context.Background(), Image{Layers: []string{"/l"}, Cmd: []string{"x"}}); err == nil {
		t.Error("a container spec for a pod with no directory")
	}
	r.teardown()
	unchanged(t, state, beforeState)
	unchanged(t, outside, beforeOutside)
}

// TestUpdatePodIgnoresAnInvalidUpdate: a running Pod changed behind the
// API server's back keeps what it was validated with.
func TestUpdatePodIgnoresAnInvalidUpdate(t *testing.T) {
	state, _ := attackRoot(t)
	p, events := hostileProvider(t, state)
	pod := simplePod(testUID(1))
	r := newPodRun(p, pod.DeepCopy())
	p.pods[podKey("default", "web-0")] = r
	bad := pod.DeepCopy()
	bad.Labels = map[string]string{"app": "web"}
	bad.Spec.Volumes[0].Name = "../x"
	if err := p.UpdatePod(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	if r.pod.Labels["app"] != "" {
		t.Error("the invalid update was applied")
	}
	if ev := <-events.Events; !strings.Contains(ev, "ignores an update") {
		t.Errorf("event %q", ev)
	}
	good := pod.DeepCopy()
	good.Labels = map[string]string{"app": "web"}
	p.UpdatePod(context.Background(), good)
	if r.pod.Labels["app"] != "web" {
		t.Error("a valid update was not applied")
	}
}

// TestKubeletAPIRefusesHostileNames: names from a request's URL are
// checked before anything is looked up or opened with them, and a log
// the lab replaced by a link is not read through it.
func TestKubeletAPIRefusesHostileNames(t *testing.T) {
	state, outside := attackRoot(t)
	p, _ := hostileProvider(t, state)
	pod := simplePod(testUID(1))
	r := newPodRun(p, pod)
	p.pods[podKey("default", "web-0")] = r
	ctx := context.Background()
	for _, n := range []struct{ ns, pod, container string }{
		{"default", "web-0", "../../../../outside/secret"},
		{"default", "web-0", "c/../../x"},
		{"default", "../web-0", "c"},
		{"..", "web-0", "c"},
		{"default", "web-0", "c\x00"},
		{"default", "web-0", strings.Repeat("c", 64)},
	} {
		_, err := p.GetContainerLogs(ctx, n.ns, n.pod, n.container, api.ContainerLogOpts{})
		if !errdefs.IsInvalidInput(err) {
			t.Errorf("logs of %q/%q/%q: %v, want invalid input", n.ns, n.pod, n.container, err)
		}
		if err := p.RunInContainer(ctx, n.ns, n.pod, n.container, []string{"true"}, nil); !errdefs.IsInvalidInput(err) {
			t.Errorf("exec in %q/%q/%q: %v", n.ns, n.pod, n.container, err)
		}
		if err := p.AttachToContainer(ctx, n.ns, n.pod, n.container, nil); !errdefs.IsInvalidInput(err) {
			t.Errorf("attach to %q/%q/%q: %v", n.ns, n.pod, n.container, err)
		}
	}
	if err := p.PortForward(ctx, "default", "web-0", 70000, nil); !errdefs.IsInvalidInput(err) {
		t.Errorf("port-forward to port 70000: %v", err)
	}
	// The container's log is a link to a file of the host.
	rel, err := r.containers[0].logRel(0)
	if err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, filepath.Join(outside, "secret"), filepath.Join(state, rel))
	r.containers[0].current = &runningContainer{}
	rc, err := p.GetContainerLogs(ctx, "default", "web-0", "c", api.ContainerLogOpts{})
	if err == nil {
		b := make([]byte, 100)
		n, _ := rc.Read(b)
		t.Errorf("read %q through the lab's link", b[:n])
	}
}

// TestContainerEnvironmentIsBounded: a value larger than Linux starts a
// program with, and one value referenced thousands of times, are refused
// before the agent holds them, quickly and in little memory.
func TestContainerEnvironmentIsBounded(t *testing.T) {
	img := Image{Name: "x", Layers: []string{"/l"}, Cmd: []string{"x"}}
	big := strings.Repeat("v", 100<<10)
	refs := strings.Repeat("$(A)", 1000)
	for _, tc := range []struct {
		name string
		c    corev1.Container
	}{
		{"one value too long", corev1.Container{Name: "c", Image: "x", Env: []corev1.EnvVar{{Name: "A", Value: strings.Repeat("v", maxArgString)}}}},
		{"one value referenced a thousand times", corev1.Container{Name: "c", Image: "x",
			Env: []corev1.EnvVar{{Name: "A", Value: big}, {Name: "B", Value: refs}}}},
		{"many variables referencing one value", corev1.Container{Name: "c", Image: "x",
			Env: append([]corev1.EnvVar{{Name: "A", Value: big}}, manyVars(4000, "$(A)")...)}},
		{"an argument referencing a value a thousand times", corev1.Container{Name: "c", Image: "x",
			Env: []corev1.EnvVar{{Name: "A", Value: big}}, Args: []string{refs}}},
		{"many arguments referencing one value", corev1.Container{Name: "c", Image: "x",
			Env: []corev1.EnvVar{{Name: "A", Value: big}}, Args: strings.Split(strings.Repeat("$(A) ", 4000), " ")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: testUID(1)},
				Spec: corev1.PodSpec{Containers: []corev1.Container{tc.c}}}
			r := testPodRun(t, pod)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err := r.containers[0].containerSpec(context.Background(), img)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, errArgsTooLarge) {
				t.Errorf("err = %v, want %v", err, errArgsTooLarge)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
				t.Errorf("resolving the environment allocated %d MiB", alloc>>20)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("resolving the environment took %s", d)
			}
		})
	}
	// At the edge of what Linux takes, the container starts.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: testUID(1)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x",
			Env: []corev1.EnvVar{{Name: "A", Value: big}, {Name: "B", Value: "$(A)"}}}}}}
	if _, err := testPodRun(t, pod).containers[0].containerSpec(context.Background(), img); err != nil {
		t.Errorf("two 100 KiB variables: %v", err)
	}
}

func manyVars(n int, value string) []corev1.EnvVar {
	out := make([]corev1.EnvVar, n)
	for i := range out {
		out[i] = corev1.EnvVar{Name: "V" + strings.Repeat("x", i%50) + string(rune('a'+i%26)) + strings.Repeat("y", i/1300), Value: value}
	}
	return out
}

// TestSubPathExprStaysInItsVolume: a subPathExpr whose variables expand
// to a path out of the volume is refused as a subPath would be.
func TestSubPathExprStaysInItsVolume(t *testing.T) {
	pod := simplePod(testUID(1))
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "UP", Value: "../../../.."}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/x", SubPathExpr: "$(UP)/etc"}}
	if errs := validatePod(pod); len(errs) > 0 {
		t.Fatalf("the Pod itself is valid: %v", errs.ToAggregate())
	}
	r := testPodRun(t, pod)
	r.volumes = map[string]volume{"data": {Root: "/somewhere"}}
	if _, err := r.containers[0].containerSpec(context.Background(), Image{Layers: []string{"/l"}, Cmd: []string{"x"}}); err == nil ||
		!strings.Contains(err.Error(), "must not contain '..'") {
		t.Errorf("err = %v", err)
	}
}

// TestVolumesAreBounded: a Pod projecting the same large ConfigMap over
// and over, or one whose ConfigMap holds a key that is no file name,
// waits with an error instead of filling the disk or writing the key.
func TestVolumesAreBounded(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "default"}, Data: map[string]string{"k": strings.Repeat("x", 1<<20)}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "evil", Namespace: "default"}, Data: map[string]string{"../../../../outside/x": "x"}},
	)
	v := volumeSource{client: client, nodeRoot: t.TempDir(), uid: labUID}
	var sources []corev1.VolumeProjection
	for i := 0; i < 70; i++ {
		sources = append(sources, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: "big"}, Items: []corev1.KeyToPath{{Key: "k", Path: "f" + strings.Repeat("x", i)}}}})
	}
	state, outside := attackRoot(t)
	beforeOutside := fileState(t, outside)
	d, err := newPodDir(stateTree{state}, testUID(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		vol        corev1.Volume
	}{
		{"70 MiB projected", "more than 64 MiB", corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: sources}}}},
		{"a key that climbs out", "cannot be a file name", corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "evil"}}}}},
	} {
		pod := simplePod(testUID(1))
		pod.Spec.Volumes = []corev1.Volume{tc.vol}
		if _, err := v.prepare(ctx, pod, d, &tokenCache{}, labUID); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	unchanged(t, outside, beforeOutside)
	if b, err := os.ReadDir(filepath.Join(state, "pods", string(testUID(1)), "volumes", "v")); err == nil && len(b) > 0 {
		t.Errorf("the refused volume holds %d entries", len(b))
	}
}

// TestRoutesForRefusesHostileNodes: a Node's pod CIDR and address become
// arguments of ip only when they parse.
func TestRoutesForRefusesHostileNodes(t *testing.T) {
	got := routesFor("lab-worker", map[string]nodeRoute{
		"good":    {cidr: "10.244.2.0/24", ip: "172.29.1.4"},
		"sloppy":  {cidr: "10.244.3.7/24", ip: "172.29.1.5"},
		"spaces":  {cidr: "10.244.4.0/24 via 1.1.1.1 dev eth0", ip: "172.29.1.6"},
		"option":  {cidr: "-batch", ip: "172.29.1.7"},
		"address": {cidr: "10.244.5.0/24", ip: "172.29.1.8 onlink"},
		"zone":    {cidr: "10.244.6.0/24", ip: "fe80::1%eth0"},
	})
	want := []string{"10.244.2.0/24 via 172.29.1.4", "10.244.3.0/24 via 172.29.1.5"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("routes %q, want %q", got, want)
	}
}

// TestHostPortsRefuseWhatNftWouldParse: a protocol or port that is not
// one never reaches nft's parser.
func TestHostPortsRefuseWhatNftWouldParse(t *testing.T) {
	for _, hp := range []hostPort{
		{proto: "tcp . 1 : 10.0.0.1 . 1 }; flush ruleset; add element ip t m {", port: 80, podPort: 80},
		{proto: "tcp", port: 0, podPort: 80},
		{proto: "tcp", port: 80, podPort: 70000},
	} {
		r := &recordingRunner{}
		n := newPodNetwork(r, "node-ns", "/lab/userns", "pod-", t.TempDir())
		n.hostPortsReady = true
		if err := n.setHostPorts(context.Background(), string(testUID(1)), netip.MustParseAddr("10.244.1.5"), []hostPort{hp}); err == nil {
			t.Errorf("%+v was published", hp)
		}
		if len(r.cmds) > 0 {
			t.Errorf("%+v ran %q", hp, r.cmds)
		}
	}
}
