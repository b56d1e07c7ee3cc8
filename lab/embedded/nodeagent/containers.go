//go:build linux

package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Back-off of restarting containers and pulling images, as the kubelet's.
const (
	initialBackoff = 10 * time.Second
	maxBackoff     = 5 * time.Minute
	// backoffReset: a container that ran this long restarts without delay
	// counting from its earlier crashes.
	backoffReset = 10 * time.Minute
	// pullErrorShown is how long ErrImagePull shows before
	// ImagePullBackOff (the kubelet's next look at the pod).
	pullErrorShown = 5 * time.Second
	// configRetry is how soon a container whose ConfigMap or Secret is
	// missing is tried again.
	configRetry = 5 * time.Second
)

// containerRun is one container of a pod, across its restarts.
type containerRun struct {
	pod  *podRun
	spec *corev1.Container
	init bool

	mu           sync.Mutex
	image        string
	runImage     Image // the image of the current or last run
	restarts     int
	current      *runningContainer
	currentID    string
	waiting      *corev1.ContainerStateWaiting
	lastTerm     *corev1.ContainerStateTerminated
	terminated   *corev1.ContainerStateTerminated
	ready        bool
	started      bool
	stopping     bool
	imageChanged chan struct{}
	// adopted is the state an earlier agent left, until the loop takes
	// it over.
	adopted *containerState
	// resumedLog is the log an adopted run's output goes to.
	resumedLog *containerLog
	// probeFailures counts consecutive liveness failures per run.
	exitCode int
}

func newContainerRun(p *podRun, spec *corev1.Container, init bool) *containerRun {
	return &containerRun{pod: p, spec: spec, init: init, image: spec.Image, imageChanged: make(chan struct{}, 1),
		waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
}

// logRel is where the log of the container's run restart is, relative to
// the node's state directory.
func (c *containerRun) logRel(restart int) (string, error) {
	return c.pod.files.sub("logs", c.spec.Name, fmt.Sprintf("%d.log", restart))
}

// containerID names run restart of container name of the Pod with uid: the
// UID's first 8 characters, the name and the count. runc and the runtime's
// directories take it as a file name, so both parts are checked here.
func containerID(uid types.UID, name string, restart int) (string, error) {
	if err := validUID(uid); err != nil {
		return "", fmt.Errorf("the Pod's UID %q: %w", uid, err)
	}
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return "", fmt.Errorf("container name %q: %s", name, strings.Join(msgs, "; "))
	}
	return fmt.Sprintf("%s-%s-%d", string(uid)[:8], name, restart), nil
}

// validContainerID checks a container ID before it names a directory on
// the host or goes to runc: one file name of the characters runc allows
// in IDs (letters, digits, '_', '+', '-' and '.').
func validContainerID(id string) error {
	if err := fileName(id); err != nil {
		return fmt.Errorf("container ID: %w", err)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_+-.", r)) {
			return fmt.Errorf("container ID %q: only letters, digits, '_', '+', '-' and '.' are allowed", id)
		}
	}
	return nil
}

// logRun says which run's log kubectl logs shows, as the kubelet decides:
// the running or finished container's; while it waits to restart, the run
// that ended; with previous, the run before the current one. Runs are
// numbered by the restart count they had.
func (c *containerRun) logRun(previous bool, pod string) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case previous:
		if c.restarts == 0 {
			return 0, errdefs.InvalidInputf("previous terminated container %q in pod %q not found", c.spec.Name, pod)
		}
		return c.restarts - 1, nil
	case c.current != nil || c.terminated != nil && c.waiting == nil:
		return c.restarts, nil
	case c.lastTerm != nil: // waiting to restart: restarts counts the run that ended
		return c.restarts - 1, nil
	}
	reason := "ContainerCreating"
	if c.waiting != nil {
		reason = c.waiting.Reason
	}
	switch reason {
	case "ErrImagePull":
		return 0, errdefs.InvalidInputf("container %q in pod %q is waiting to start: image can't be pulled", c.spec.Name, pod)
	case "ImagePullBackOff":
		return 0, errdefs.InvalidInputf("container %q in pod %q is waiting to start: trying and failing to pull image", c.spec.Name, pod)
	}
	return 0, errdefs.InvalidInputf("container %q in pod %q is waiting to start: %s", c.spec.Name, pod, reason)
}

func (c *containerRun) restartCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restarts
}

func (c *containerRun) runningID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current == nil {
		return ""
	}
	return c.currentID
}

// running returns the current run, nil when the container is not running.
func (c *containerRun) running() *runningContainer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.current
}

func (c *containerRun) finished() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.current == nil
}

func (c *containerRun) lastExitCode() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exitCode
}

func (c *containerRun) setImage(image string) {
	c.mu.Lock()
	c.image = image
	c.mu.Unlock()
	select {
	case c.imageChanged <- struct{}{}:
	default:
	}
	if id := c.runningID(); id != "" {
		c.pod.p.rt.kill(context.Background(), id, c.stopSignal())
	}
}

func (c *containerRun) setWaiting(reason, msg string) {
	c.mu.Lock()
	c.waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: msg}
	c.mu.Unlock()
	c.pod.changed()
}

// restartPolicy says whether a container that exited with code restarts.
func (c *containerRun) shouldRestart(code int) bool {
	if c.init {
		if c.sidecar() {
			return true
		}
		return code != 0 && c.pod.pod.Spec.RestartPolicy != corev1.RestartPolicyNever
	}
	switch c.pod.pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	default:
		return true
	}
}

// sidecar tells an init container with restartPolicy Always: it runs
// beside the app containers rather than before them.
func (c *containerRun) sidecar() bool {
	return c.init && c.spec.RestartPolicy != nil && *c.spec.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// waitStarted waits until a sidecar has started: it runs and its startup
// probe, if any, has passed. False means the pod is being stopped.
func (c *containerRun) waitStarted() bool {
	for {
		c.mu.Lock()
		ok := c.current != nil && c.started
		c.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-c.pod.ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// runToCompletion runs an init container until it succeeds; false means
// the pod cannot go on (it failed for good, or is being stopped).
func (c *containerRun) runToCompletion() bool {
	c.loop()
	return c.lastExitCode() == 0 && c.pod.ctx.Err() == nil
}

// loop runs the container, restarting it as the pod's restartPolicy says,
// with the kubelet's back-off (CrashLoopBackOff, ImagePullBackOff).
func (c *containerRun) loop() {
	ctx := c.pod.ctx
	backoff := initialBackoff
	pullBackoff := initialBackoff
	for {
		var code int
		var err error
		start := time.Now()
		if a := c.takeAdopted(); a != nil && a.ID != "" {
			start = a.Started
			code, err = c.adoptRun(*a)
		} else if a != nil && a.Terminated != nil && !c.shouldRestart(int(a.Terminated.ExitCode)) {
			return // it had ended for good
		} else {
			var ok bool
			if code, err, ok = c.startRun(ctx, &pullBackoff); !ok {
				return
			}
			if code < 0 && err == nil {
				continue // tried again: no run, no restart
			}
		}
		if ctx.Err() != nil || c.isStopping() {
			return
		}
		if err != nil {
			c.pod.event(corev1.EventTypeWarning, "Failed", "Error: %v", err)
			code = 128
			c.mu.Lock()
			c.exitCode = code
			c.mu.Unlock()
		}
		if !c.shouldRestart(code) {
			return
		}
		if time.Since(start) > backoffReset {
			backoff = initialBackoff
		}
		c.mu.Lock()
		c.restarts++
		c.mu.Unlock()
		c.pod.event(corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s", c.spec.Name, c.pod.pod.Name)
		if !c.sleep(ctx, backoff, "CrashLoopBackOff", fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", backoff, c.spec.Name, c.pod.pod.Name)) {
			return
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// takeAdopted hands over, once, the state an earlier agent left of this
// container (nil when the pod was not adopted; see resume).
func (c *containerRun) takeAdopted() *containerState {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.adopted
	c.adopted = nil
	return a
}

// startRun resolves the image and the container's configuration and runs
// the container once. It returns a negative code when it could not start
// it and is to be tried again, and ok false when the pod stops.
func (c *containerRun) startRun(ctx context.Context, pullBackoff *time.Duration) (code int, err error, ok bool) {
	{
		img, err := c.resolveImage()
		if err != nil {
			// As the kubelet: ErrImagePull until its next look at the
			// pod, then ImagePullBackOff until the back-off ends.
			shown := min(pullErrorShown, *pullBackoff)
			if !c.wait(ctx, shown) {
				return 0, nil, false
			}
			ref := c.currentImage()
			c.pod.event(corev1.EventTypeNormal, "BackOff", "Back-off pulling image %q", ref)
			c.pod.event(corev1.EventTypeWarning, "Failed", "Error: ImagePullBackOff")
			if !c.sleep(ctx, *pullBackoff-shown, "ImagePullBackOff", fmt.Sprintf("Back-off pulling image %q: %v", ref, err)) {
				return 0, nil, false
			}
			*pullBackoff = min(*pullBackoff*2, maxBackoff)
			return -1, nil, true
		}
		*pullBackoff = initialBackoff
		spec, err := c.containerSpec(ctx, img)
		if err != nil {
			// A missing ConfigMap, Secret or key: the kubelet retries
			// at its next sync and counts no restart.
			c.pod.event(corev1.EventTypeWarning, "Failed", "Error: %v", err)
			if !c.sleep(ctx, configRetry, "CreateContainerConfigError", err.Error()) {
				return 0, nil, false
			}
			return -1, nil, true
		}
		code, err := c.runOnce(spec)
		return code, err, true
	}
}

func (c *containerRun) isStopping() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopping
}

func (c *containerRun) currentImage() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.image
}

// sleep waits d in the waiting state reason; false when the pod stops.
func (c *containerRun) sleep(ctx context.Context, d time.Duration, reason, msg string) bool {
	c.setWaiting(reason, msg)
	return c.wait(ctx, d)
}

// wait waits d, or less if the image changes; false when the pod stops.
func (c *containerRun) wait(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-c.imageChanged:
		return true
	case <-time.After(d):
		return true
	}
}

func (c *containerRun) resolveImage() (Image, error) {
	ref := c.currentImage()
	c.pod.event(corev1.EventTypeNormal, "Pulling", "Pulling image %q", ref)
	img, err := c.pod.p.images.Resolve(ref)
	if err != nil {
		msg := fmt.Sprintf("Failed to pull image %q: %v", ref, err)
		c.pod.event(corev1.EventTypeWarning, "Failed", "%s", msg)
		c.pod.event(corev1.EventTypeWarning, "Failed", "Error: ErrImagePull")
		c.setWaiting("ErrImagePull", msg)
		return Image{}, err
	}
	c.pod.event(corev1.EventTypeNormal, "Pulled", "Container image %q already present on machine", ref)
	return img, nil
}

// runOnce creates and starts the container and waits for it to exit,
// probing it meanwhile.
func (c *containerRun) runOnce(spec containerSpec) (int, error) {
	r := c.pod
	logRel, err := c.logRel(c.restartCount())
	if err != nil {
		return 0, err
	}
	log, err := openContainerLog(r.files.tree, logRel, r.p.cfg.logLimits())
	if err != nil {
		return 0, err
	}
	defer log.Close()
	// The bundle's directory, made through the node's state directory
	// (see podfs.go); the runtime fills it.
	if err := r.mkdir("containers", spec.ID); err != nil {
		return 0, err
	}
	r.event(corev1.EventTypeNormal, "Created", "Created container: %s", c.spec.Name)
	rc, err := r.p.rt.run(spec, log)
	if err != nil {
		c.setWaiting("RunContainerError", err.Error())
		// A run that did not start leaves nothing, as one that ended:
		// no runc state, no mount (its root filesystem's, its
		// volumes'), no bundle — a Pod that fails to start again and
		// again must not fill the host's mount table.
		r.p.rt.delete(context.Background(), spec.ID)
		r.cleanupRun(spec.ID)
		return 0, err
	}
	r.event(corev1.EventTypeNormal, "Started", "Started container %s", c.spec.Name)
	c.mu.Lock()
	c.current, c.currentID, c.waiting, c.terminated = rc, spec.ID, nil, nil
	c.runImage = spec.Image
	c.ready = c.spec.ReadinessProbe == nil && (!c.init || c.sidecar())
	c.started = c.spec.StartupProbe == nil
	c.mu.Unlock()
	r.changed()
	return c.watch(rc, spec.ID)
}

// errDetached ends a run the agent stopped following: the agent stops,
// the container goes on.
var errDetached = errors.New("the node agent stopped")

// watch probes the running container until it exits, then records its
// end and removes its bundle; when the agent stops first, it leaves the
// container running for the next agent to adopt.
func (c *containerRun) watch(rc *runningContainer, id string) (int, error) {
	r := c.pod
	probeCtx, stopProbes := context.WithCancel(r.ctx)
	go c.probe(probeCtx, rc)
	select {
	case <-rc.done:
	case <-r.p.nodeCtx.Done():
		stopProbes()
		rc.detach()
		return 0, errDetached
	}
	stopProbes()
	c.mu.Lock()
	c.current, c.ready = nil, false
	reason := "Completed"
	if rc.exitCode != 0 {
		reason = "Error"
	}
	if rc.exitCode == 137 && c.stopping {
		reason = "Error"
	}
	term := &corev1.ContainerStateTerminated{ExitCode: int32(rc.exitCode), Reason: reason,
		StartedAt: metav1.NewTime(rc.started), FinishedAt: metav1.NewTime(rc.finished), ContainerID: "runc://" + id}
	if rc.err != nil {
		term.Message = rc.err.Error()
	}
	c.terminated, c.lastTerm, c.exitCode = term, term, rc.exitCode
	c.mu.Unlock()
	r.cleanupRun(id)
	r.changed()
	return rc.exitCode, rc.err
}

// containerSpec turns the pod's container into what runc runs.
func (c *containerRun) containerSpec(ctx context.Context, img Image) (containerSpec, error) {
	r := c.pod
	pod := r.pod
	// The environment: the image's, overridden by the container's as
	// the kubelet resolves it.
	podNow := r.snapshot()
	cenv, warns, err := containerEnv(ctx, r.p.env, podNow, c.spec)
	for _, w := range warns {
		r.event(corev1.EventTypeWarning, w.reason, "%s", w.message)
	}
	if err != nil {
		return containerSpec{}, err
	}
	lookup := func(name string) (string, bool) { v, ok := cenv[name]; return v, ok }
	// As the kubelet: command replaces the image's entrypoint, args its
	// cmd, and $(VAR) references to the container's env are expanded.
	args, err := expandAllVars(c.spec.Command, lookup)
	if err != nil {
		return containerSpec{}, err
	}
	if len(args) == 0 {
		args = img.Entrypoint
		if len(c.spec.Args) == 0 {
			args = append(append([]string(nil), args...), img.Cmd...)
		}
	}
	more, err := expandAllVars(c.spec.Args, lookup)
	if err != nil {
		return containerSpec{}, err
	}
	args = append(append([]string(nil), args...), more...)
	if len(args) == 0 {
		return containerSpec{}, errors.New("no command specified")
	}
	merged := map[string]string{}
	for _, kv := range img.Env {
		k, v, _ := strings.Cut(kv, "=")
		merged[k] = v
	}
	if _, ok := merged["PATH"]; !ok {
		merged["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	merged["HOSTNAME"] = podHostname(pod)
	for k, v := range cenv {
		merged[k] = v
	}
	env := envList(merged)
	if err := checkArgSizes(args, env); err != nil {
		return containerSpec{}, err
	}
	cwd := c.spec.WorkingDir
	if cwd == "" {
		cwd = img.WorkingDir
	}
	dir := r.dir()
	if dir == "" {
		return containerSpec{}, errors.New("the Pod has no directory on the node")
	}
	id, err := containerID(pod.UID, c.spec.Name, c.restartCount())
	if err != nil {
		return containerSpec{}, err
	}
	mounts := []Mount{
		{Root: dir, Path: "resolv.conf", Destination: "/etc/resolv.conf"},
		{Root: dir, Path: "hosts", Destination: "/etc/hosts"},
		{Root: dir, Path: "hostname", Destination: "/etc/hostname"},
	}
	r.mu.Lock()
	vols, netns := r.volumes, r.netns
	r.mu.Unlock()
	for _, vm := range c.spec.VolumeMounts {
		vol, ok := vols[vm.Name]
		if !ok {
			return containerSpec{}, fmt.Errorf("volume mount %q has no volume", vm.Name)
		}
		subPath := vm.SubPath
		if vm.SubPathExpr != "" {
			// As the kubelet: what the expansion gives is checked as a
			// subPath is.
			subPath = expandVars(vm.SubPathExpr, lookup)
			if errs := localDescendingPath(field.NewPath("subPathExpr"), subPath); len(errs) > 0 {
				return containerSpec{}, fmt.Errorf("volume mount %q: %w", vm.Name, errs.ToAggregate())
			}
		}
		mounts = append(mounts, Mount{Root: vol.Root, Path: vol.Path, SubPath: subPath, Destination: vm.MountPath,
			ReadOnly: vm.ReadOnly || vol.Atomic, CreateSubPath: !vol.Atomic})
	}
	hostname := podHostname(pod)
	if pod.Spec.HostNetwork {
		hostname = ""
	}
	s := containerSpec{
		ID:       id,
		Image:    img,
		Args:     args,
		Env:      env,
		Cwd:      cwd,
		Hostname: hostname,
		Netns:    "/run/netns/" + netns,
		Mounts:   mounts,
		TTY:      c.spec.TTY,
		Stdin:    c.spec.Stdin,
	}
	if iso := r.isolation(); iso.Userns != r.p.cfg.Isolation.Userns {
		s.Isolation = iso
	}
	s.Bundle = r.files.path("containers", s.ID)
	if pod.Spec.HostPID || pod.Spec.HostIPC {
		// The node's PID and IPC namespaces are its own container's,
		// as a kind node's are: a hostPID Pod sees the node's processes
		// (its shells), never the host's.
		pid, err := r.p.cfg.NodeContainer.initPID()
		if err != nil {
			return containerSpec{}, fmt.Errorf("joining the node's namespaces: %w", err)
		}
		if pod.Spec.HostPID {
			s.PidNS = fmt.Sprintf("/proc/%d/ns/pid", pid)
		}
		if pod.Spec.HostIPC {
			s.IpcNS = fmt.Sprintf("/proc/%d/ns/ipc", pid)
		}
	}
	if sc := c.spec.SecurityContext; sc != nil {
		s.Privileged = sc.Privileged != nil && *sc.Privileged
		if sc.Capabilities != nil {
			for _, a := range sc.Capabilities.Add {
				s.CapAdd = append(s.CapAdd, string(a))
			}
			for _, d := range sc.Capabilities.Drop {
				s.CapDrop = append(s.CapDrop, string(d))
			}
		}
		s.RunAsUser, s.RunAsGroup = sc.RunAsUser, sc.RunAsGroup
		s.ReadOnlyRoot = sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
		// As the kubelet: no_new_privs when escalation is refused.
		s.NoNewPrivs = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
	}
	var seccomp *corev1.SeccompProfile
	if psc := pod.Spec.SecurityContext; psc != nil {
		if s.RunAsUser == nil {
			s.RunAsUser = psc.RunAsUser
		}
		if s.RunAsGroup == nil {
			s.RunAsGroup = psc.RunAsGroup
		}
		seccomp = psc.SeccompProfile
	}
	if sc := c.spec.SecurityContext; sc != nil && sc.SeccompProfile != nil {
		seccomp = sc.SeccompProfile
	}
	// The container's profile, else the Pod's; none is Unconfined, the
	// kubelet's default. A privileged container runs unconfined.
	if seccomp != nil && !s.Privileged {
		switch seccomp.Type {
		case corev1.SeccompProfileTypeRuntimeDefault:
			s.Seccomp = true
		case corev1.SeccompProfileTypeLocalhost:
			return containerSpec{}, fmt.Errorf("seccomp profile Localhost (%s): svclab's nodes have no profiles of their own; use RuntimeDefault", ptrOr(seccomp.LocalhostProfile, ""))
		}
	}
	return s, nil
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// expandAllVars expands the $(VAR) references of a command or its
// arguments, which stop growing once no program could be given them.
func expandAllVars(ss []string, lookup func(string) (string, bool)) ([]string, error) {
	if ss == nil {
		return nil, nil
	}
	out := make([]string, len(ss))
	total := 0
	for i, s := range ss {
		out[i] = expandVars(s, lookup)
		if total += len(out[i]) + 1; total > maxArgTotal {
			return nil, errArgsTooLarge
		}
	}
	return out, nil
}

// stopGracefully runs the preStop hook, sends SIGTERM and, at deadline,
// SIGKILL.
func (c *containerRun) stopGracefully(deadline time.Time) {
	c.mu.Lock()
	c.stopping = true
	rc, id := c.current, c.currentID
	c.mu.Unlock()
	if rc == nil {
		return
	}
	r := c.pod
	r.event(corev1.EventTypeNormal, "Killing", "Stopping container %s", c.spec.Name)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if c.spec.Lifecycle != nil && c.spec.Lifecycle.PreStop != nil {
		if err := c.runHandler(ctx, id, c.spec.Lifecycle.PreStop); err != nil {
			r.event(corev1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed: %v", err)
		}
	}
	sig := c.stopSignal()
	r.p.rt.kill(context.Background(), id, sig)
	select {
	case <-rc.done:
	case <-ctx.Done():
		r.p.rt.kill(context.Background(), id, syscall.SIGKILL)
		<-rc.done
	}
}

// stopSignal is the signal that stops the container gracefully: the
// container's lifecycle.stopSignal, else its image's, else SIGTERM.
func (c *containerRun) stopSignal() syscall.Signal {
	if c.spec.Lifecycle != nil && c.spec.Lifecycle.StopSignal != nil {
		if s, ok := parseSignal(string(*c.spec.Lifecycle.StopSignal)); ok {
			return s
		}
	}
	c.mu.Lock()
	img := c.runImage
	c.mu.Unlock()
	if s, ok := parseSignal(img.StopSignal); ok {
		return s
	}
	return syscall.SIGTERM
}

// parseSignal reads a signal as images and pods give it: SIGQUIT, QUIT or
// 3.
func parseSignal(s string) (syscall.Signal, bool) {
	if s == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), true
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	sig, ok := signals[name]
	return sig, ok
}

var signals = map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT, "SIGQUIT": syscall.SIGQUIT,
	"SIGKILL": syscall.SIGKILL, "SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2, "SIGHUP": syscall.SIGHUP,
	"SIGWINCH": syscall.SIGWINCH, "SIGSTOP": syscall.SIGSTOP, "SIGALRM": syscall.SIGALRM}

func (c *containerRun) cleanup() {
	c.mu.Lock()
	id := c.currentID
	c.mu.Unlock()
	if id != "" {
		c.pod.p.rt.delete(context.Background(), id)
		c.pod.cleanupRun(id)
	}
}

// cleanupRun unmounts the root filesystem of the pod's container run id
// (with every mount in it) and removes its bundle, through the node's
// state directory (see podfs.go).
func (r *podRun) cleanupRun(id string) {
	if err := r.p.rt.unmountRootfs(id); err != nil {
		r.p.log.Warn("unmounting a container's root filesystem", "container", id, "err", err)
		return
	}
	rel, err := r.files.sub("containers", id)
	if err == nil {
		err = r.files.tree.removeAll(rel)
	}
	if err != nil {
		r.p.log.Warn("removing a container's bundle", "container", id, "err", err)
	}
}

// status renders the container's status.
func (c *containerRun) status() corev1.ContainerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := corev1.ContainerStatus{
		Name:         c.spec.Name,
		Image:        c.image,
		ImageID:      "svclab://" + c.image,
		RestartCount: int32(c.restarts),
		Ready:        c.ready,
	}
	started := c.started && c.current != nil // false once it has exited, as the kubelet reports
	st.Started = &started
	switch {
	case c.current != nil:
		st.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.current.started)}
		st.ContainerID = "runc://" + c.currentID
	case c.waiting != nil:
		st.State.Waiting = c.waiting.DeepCopy()
	case c.terminated != nil:
		st.State.Terminated = c.terminated.DeepCopy()
		st.ContainerID = c.terminated.ContainerID
	}
	if c.lastTerm != nil && (c.current != nil || c.waiting != nil) {
		st.LastTerminationState.Terminated = c.lastTerm.DeepCopy()
	}
	return st
}
