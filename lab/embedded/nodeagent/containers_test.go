//go:build linux

package nodeagent

import (
	"context"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"log/slog"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
)

// testPodRun is a pod on a provider with no API server, runtime or
// network: enough to render specs and statuses.
func testPodRun(t *testing.T, pod *corev1.Pod) *podRun {
	t.Helper()
	p := &provider{
		cfg:     Config{NodeName: "lab-worker", NodeIP: "172.29.1.3", StateDir: t.TempDir()},
		log:     slog.New(slog.DiscardHandler),
		env:     fakeEnvSource{},
		net:     newPodNetwork(&recordingRunner{}, "node-ns", "/lab/userns", "pod-", t.TempDir()),
		nodeCtx: context.Background(),
		pods:    map[string]*podRun{},
	}
	return newPodRun(p, pod)
}

func TestContainerSpecCommandAndEnv(t *testing.T) {
	img := Image{Name: "agnhost", Layers: []string{"/l"}, Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"},
		Env: []string{"PATH=/bin", "MODE=image"}, StopSignal: "SIGQUIT"}
	for _, tc := range []struct {
		name      string
		command   []string
		args      []string
		wantArgs  []string
		wantShown string // an env entry the container must have
	}{
		{"image defaults", nil, nil, []string{"/agnhost", "pause"}, "MODE=image"},
		{"args replace the image's cmd", nil, []string{"netexec", "--http-port=$(PORT)"}, []string{"/agnhost", "netexec", "--http-port=8080"}, "PORT=8080"},
		{"command replaces entrypoint and cmd", []string{"sh", "-c", "echo $(MODE) $$(MODE) $(NOPE)"}, nil, []string{"sh", "-c", "echo pod $(MODE) $(NOPE)"}, "MODE=pod"},
		{"command and args", []string{"/bin/echo"}, []string{"$(PORT)"}, []string{"/bin/echo", "8080"}, "HOSTNAME=web-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "default", UID: "01234567-89ab-4def-8123-456789abcdef"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Command: tc.command, Args: tc.args,
					Env: []corev1.EnvVar{{Name: "PORT", Value: "8080"}, {Name: "MODE", Value: "pod"}}}}}}
			r := testPodRun(t, pod)
			if tc.name == "image defaults" {
				r.pod.Spec.Containers[0].Env = nil
				r.containers[0].spec = &r.pod.Spec.Containers[0]
			}
			spec, err := r.containers[0].containerSpec(context.Background(), img)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(spec.Args, tc.wantArgs) {
				t.Errorf("args %q, want %q", spec.Args, tc.wantArgs)
			}
			if !slices.Contains(spec.Env, tc.wantShown) || !slices.Contains(spec.Env, "PATH=/bin") {
				t.Errorf("env %q lacks %q or the image's PATH", spec.Env, tc.wantShown)
			}
			if spec.ID != "01234567-c-0" {
				t.Errorf("container ID %q", spec.ID)
			}
		})
	}
}

func TestStopSignal(t *testing.T) {
	quit := corev1.Signal("SIGUSR1")
	for _, tc := range []struct {
		name      string
		image     string
		lifecycle *corev1.Lifecycle
		want      syscall.Signal
	}{
		{"default", "", nil, syscall.SIGTERM},
		{"image", "SIGQUIT", nil, syscall.SIGQUIT},
		{"image without SIG", "quit", nil, syscall.SIGQUIT},
		{"image numeric", "2", nil, syscall.SIGINT},
		{"unknown falls back", "SIGNOPE", nil, syscall.SIGTERM},
		{"pod overrides image", "SIGQUIT", &corev1.Lifecycle{StopSignal: &quit}, syscall.SIGUSR1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &containerRun{spec: &corev1.Container{Lifecycle: tc.lifecycle}, runImage: Image{StopSignal: tc.image}}
			if got := c.stopSignal(); got != tc.want {
				t.Errorf("stop signal %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPodStatus(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: testUID(1)},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init"}},
			Containers:     []corev1.Container{{Name: "b", ReadinessProbe: &corev1.Probe{}}, {Name: "a"}},
		},
	}
	r := testPodRun(t, pod)
	st := r.snapshot().Status
	if st.Phase != corev1.PodPending || len(st.ContainerStatuses) != 2 || st.ContainerStatuses[0].State.Waiting.Reason != "ContainerCreating" {
		t.Fatalf("a new pod: %+v", st)
	}
	cond := func(st corev1.PodStatus, typ corev1.PodConditionType) corev1.ConditionStatus {
		for _, c := range st.Conditions {
			if c.Type == typ {
				return c.Status
			}
		}
		return ""
	}
	if cond(st, corev1.PodInitialized) != corev1.ConditionFalse || cond(st, corev1.PodReady) != corev1.ConditionFalse {
		t.Errorf("new pod conditions %+v", st.Conditions)
	}

	// The init container completed; b runs but is not ready yet, a runs.
	start := time.Now()
	initC := newContainerRun(r, &pod.Spec.InitContainers[0], true)
	initC.waiting, initC.terminated, initC.started = nil, &corev1.ContainerStateTerminated{Reason: "Completed"}, true
	r.containers = append([]*containerRun{initC}, r.containers...)
	r.initDone, r.phase = true, corev1.PodRunning
	// b started, a not yet: as the kubelet, the pod is Pending until
	// every container has started.
	r.containers[1].waiting, r.containers[1].current, r.containers[1].currentID = nil, &runningContainer{started: start}, "id-b"
	if st := r.snapshot().Status; st.Phase != corev1.PodPending {
		t.Errorf("one container started, one waiting: phase %s, want Pending", st.Phase)
	}
	for _, c := range r.containers[1:] {
		c.waiting, c.current, c.currentID = nil, &runningContainer{started: start}, "id-"+c.spec.Name
		c.ready = c.spec.ReadinessProbe == nil
	}
	st = r.snapshot().Status
	if len(st.InitContainerStatuses) != 1 || st.InitContainerStatuses[0].State.Terminated == nil || *st.InitContainerStatuses[0].Started {
		t.Errorf("init container statuses %+v", st.InitContainerStatuses)
	}
	if names := []string{st.ContainerStatuses[0].Name, st.ContainerStatuses[1].Name}; !slices.Equal(names, []string{"b", "a"}) {
		t.Errorf("container statuses in order %v, want the spec's", names)
	}
	if cond(st, corev1.PodInitialized) != corev1.ConditionTrue || cond(st, corev1.ContainersReady) != corev1.ConditionFalse {
		t.Errorf("running, b not ready: %+v", st.Conditions)
	}
	readySince := r.snapshot()
	r.containers[1].ready = true
	st = r.snapshot().Status
	if cond(st, corev1.PodReady) != corev1.ConditionTrue || st.QOSClass != corev1.PodQOSBestEffort || st.HostIP != "172.29.1.3" {
		t.Errorf("all ready: %+v", st)
	}
	// Unchanged conditions keep their transition time.
	r.pod.Status = readySince.Status
	for _, c := range r.snapshot().Status.Conditions {
		if c.Type == corev1.PodInitialized {
			for _, old := range readySince.Status.Conditions {
				if old.Type == c.Type && !old.LastTransitionTime.Equal(&c.LastTransitionTime) {
					t.Errorf("Initialized transition time moved: %v → %v", old.LastTransitionTime, c.LastTransitionTime)
				}
			}
		}
	}
}

func TestAdmitHostPortInUse(t *testing.T) {
	withPort := func(name string, uid int, port int32) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: testUID(uid)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: port}}}}}}
	}
	holder := testPodRun(t, withPort("holder", 1, 8080))
	p := holder.p
	events := record.NewFakeRecorder(10)
	p.events = events
	p.pods[podKey("default", "holder")] = holder

	if err := p.CreatePod(context.Background(), withPort("clash", 2, 8080)); err != nil {
		t.Fatal(err)
	}
	st := p.pods[podKey("default", "clash")].snapshot().Status
	if st.Phase != corev1.PodFailed || st.Reason != "NodePorts" || !strings.Contains(st.Message, "8080/TCP on 0.0.0.0 is used by pod holder") {
		t.Errorf("clashing pod: phase %s reason %q message %q", st.Phase, st.Reason, st.Message)
	}
	if ev := <-events.Events; !strings.Contains(ev, "Warning NodePorts Pod was rejected") {
		t.Errorf("event %q", ev)
	}
	// Deleting the rejected pod does not wait for a run that never was.
	start := time.Now()
	r := p.pods[podKey("default", "clash")]
	r.terminate(time.Second, false)
	<-r.stopped
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("terminating a rejected pod took %s", d)
	}
	// The holder is unaffected; another port is admitted.
	if msg := p.admitLocked(withPort("other", 3, 8081)); msg != "" {
		t.Errorf("a free port was refused: %s", msg)
	}
}

func TestLogRun(t *testing.T) {
	ended := &corev1.ContainerStateTerminated{ExitCode: 1}
	for _, tc := range []struct {
		name     string
		c        *containerRun
		previous bool
		want     int
		wantErr  string
	}{
		{"first run", &containerRun{current: &runningContainer{}}, false, 0, ""},
		{"first run, previous", &containerRun{current: &runningContainer{}}, true, 0, `previous terminated container "c" in pod "p" not found`},
		{"crash loop shows the run that ended", &containerRun{restarts: 1, lastTerm: ended, terminated: ended, waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, false, 0, ""},
		{"crash loop, previous: the same", &containerRun{restarts: 1, lastTerm: ended, terminated: ended, waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, true, 0, ""},
		{"running again", &containerRun{restarts: 2, lastTerm: ended, current: &runningContainer{}}, false, 2, ""},
		{"running again, previous", &containerRun{restarts: 2, lastTerm: ended, current: &runningContainer{}}, true, 1, ""},
		{"finished for good", &containerRun{restarts: 1, lastTerm: ended, terminated: ended}, false, 1, ""},
		{"image pull", &containerRun{waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}, false, 0, `container "c" in pod "p" is waiting to start: trying and failing to pull image`},
		{"creating", &containerRun{waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}, false, 0, `container "c" in pod "p" is waiting to start: ContainerCreating`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.spec = &corev1.Container{Name: "c"}
			got, err := tc.c.logRun(tc.previous, "p")
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Errorf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("run %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// A pod recreated under the same name is another pod: deleting or
// updating the old one must not reach the new one's run.
func TestDeleteAndUpdateMatchTheUID(t *testing.T) {
	pod := func(uid int) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default", UID: testUID(uid)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	}
	r := testPodRun(t, pod(2))
	p := r.p
	p.pods[podKey("default", "web-0")] = r
	old := pod(1)
	old.Labels = map[string]string{"stale": "yes"}
	if err := p.UpdatePod(context.Background(), old); !errdefs.IsNotFound(err) {
		t.Errorf("UpdatePod of the old pod: %v, want not found", err)
	}
	if err := p.DeletePod(context.Background(), old); !errdefs.IsNotFound(err) {
		t.Errorf("DeletePod of the old pod: %v, want not found", err)
	}
	if r.terminating || r.pod.Labels["stale"] != "" {
		t.Errorf("the new pod's run was touched: terminating=%v labels=%v", r.terminating, r.pod.Labels)
	}
	if err := p.UpdatePod(context.Background(), pod(2)); err != nil {
		t.Errorf("UpdatePod of the pod itself: %v", err)
	}
}

// exec and attach into a container that is not running fail as the
// kubelet's do: not found, "container not found", which the API server
// passes on as a 404 rather than an error it cannot explain.
func TestExecAttachNotRunning(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default", UID: testUID(9)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	r := testPodRun(t, pod)
	r.p.pods[podKey("default", "web-0")] = r
	for name, err := range map[string]error{
		"exec":   r.p.RunInContainer(context.Background(), "default", "web-0", "c", []string{"true"}, nil),
		"attach": r.p.AttachToContainer(context.Background(), "default", "web-0", "c", nil),
	} {
		if !errdefs.IsNotFound(err) || err.Error() != `container not found ("c")` {
			t.Errorf("%s: %v, want not found: container not found (\"c\")", name, err)
		}
	}
	for name, err := range map[string]error{
		"exec of another container": r.p.RunInContainer(context.Background(), "default", "web-0", "x", []string{"true"}, nil),
		"exec in another pod":       r.p.RunInContainer(context.Background(), "default", "web-1", "c", []string{"true"}, nil),
	} {
		if !errdefs.IsNotFound(err) {
			t.Errorf("%s: %v, want not found", name, err)
		}
	}
}

// The conformance shape: pods with the same hostPort on different
// addresses or protocols are all admitted; the same address and protocol
// is not, nor 0.0.0.0 beside any address.
func TestAdmitHostPortsByAddress(t *testing.T) {
	withPort := func(name string, uid int, ip string, proto corev1.Protocol) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: testUID(uid)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 54323, HostIP: ip, Protocol: proto}}}}}}
	}
	holder := testPodRun(t, withPort("pod1", 1, "127.0.0.1", corev1.ProtocolTCP))
	p := holder.p
	p.pods[podKey("default", "pod1")] = holder
	for _, tc := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{withPort("pod2", 2, "172.29.1.3", corev1.ProtocolTCP), ""},
		{withPort("pod3", 3, "172.29.1.3", corev1.ProtocolUDP), ""},
		{withPort("same", 4, "127.0.0.1", corev1.ProtocolTCP), "54323/TCP on 127.0.0.1 is used by pod pod1"},
		{withPort("any", 5, "", corev1.ProtocolTCP), "54323/TCP on 127.0.0.1 is used by pod pod1"},
	} {
		got := p.admitLocked(tc.pod)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.pod.Name, got, tc.want)
		}
	}
}
