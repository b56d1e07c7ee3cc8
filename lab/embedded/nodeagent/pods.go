//go:build linux

package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/creack/pty"
	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/svclab/svclab/lab/embedded/userns"
)

// provider runs the pods bound to the node (virtual-kubelet's
// PodLifecycleHandler and PodNotifier).
type provider struct {
	cfg     Config
	client  kubernetes.Interface
	log     *slog.Logger
	net     *podNetwork
	rt      *runc
	images  Images
	vols    volumeSource
	env     envSource
	events  record.EventRecorder
	nodeCtx context.Context

	// adopt holds the pods an earlier run of the agent left running.
	adopt *adoption

	mu     sync.Mutex
	pods   map[string]*podRun // by namespace/name
	notify func(*corev1.Pod)
	// mounts is what this node's Pods hold of the lab's MountBudget.
	mounts atomic.Int64
}

func podKey(ns, name string) string { return ns + "/" + name }

// NotifyPods registers the callback for pod status changes.
func (p *provider) NotifyPods(_ context.Context, cb func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = cb
	p.mu.Unlock()
}

func (p *provider) publish(pod *corev1.Pod) {
	p.mu.Lock()
	cb := p.notify
	p.mu.Unlock()
	if cb != nil {
		cb(pod)
	}
}

func (p *provider) CreatePod(_ context.Context, pod *corev1.Pod) error {
	key := podKey(pod.Namespace, pod.Name)
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.pods[key]; ok && r.pod.UID == pod.UID {
		return nil
	}
	r := newPodRun(p, pod.DeepCopy())
	p.pods[key] = r
	// Nothing of the Pod reaches the host before it passes the API
	// server's own checks here (see validate.go).
	if errs := validatePod(pod); len(errs) > 0 {
		p.log.Warn("refusing a pod the API server would not have accepted", "pod", key, "uid", pod.UID, "err", errs.ToAggregate())
		r.files = podDir{} // it has nothing on the node, not even a directory
		r.reject(rejectReason, "Pod was rejected: the node refuses a Pod the API server would not have accepted: "+shortErrors(errs))
		return nil
	}
	r.mounts = podMounts(pod)
	if st := p.adopt.take(pod.UID); st != nil {
		r.restore = st
		p.mounts.Add(int64(r.mounts)) // its mounts exist already
		go r.run()
		return nil
	}
	if msg := p.admitLocked(pod); msg != "" {
		r.mounts = 0
		r.reject("NodePorts", msg)
		return nil
	}
	if err := p.cfg.Mounts.take(p, r.mounts); err != nil {
		r.mounts = 0
		r.reject("OutOfMounts", "Pod was rejected: "+err.Error())
		return nil
	}
	go r.run()
	return nil
}

// reject ends a pod the node does not run, as the kubelet's admission
// does: the pod fails at once with reason and message, an event says why,
// and the rest of the node carries on.
func (r *podRun) reject(reason, msg string) {
	r.phase, r.reason, r.message = corev1.PodFailed, reason, msg
	for _, c := range r.containers {
		c.waiting = nil
	}
	close(r.runDone)
	r.event(corev1.EventTypeWarning, reason, "%s", msg)
	go r.changed()
}

// maxRejectMessage bounds the message a rejected Pod's status and event
// carry: a Pod can be wrong in a thousand ways, and each way quotes it.
const maxRejectMessage = 2048

// shortErrors renders errs for a Pod's status: the first few, and how many
// more there are, within maxRejectMessage.
func shortErrors(errs field.ErrorList) string {
	const shown = 5
	var b strings.Builder
	for i, e := range errs {
		if i == shown {
			fmt.Fprintf(&b, "; and %d more", len(errs)-shown)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Error())
	}
	s := b.String()
	if len(s) > maxRejectMessage {
		s = strings.ToValidUTF8(s[:maxRejectMessage], "") + "…"
	}
	return s
}

// admitLocked checks pod against the pods the node runs, as the kubelet
// does before running a pod that was bound to it directly (nodeName
// bypasses the scheduler's checks): a hostPort another pod holds on the
// same address (or on every address, 0.0.0.0) with the same protocol
// rejects it. It returns the rejection's message, or "".
func (p *provider) admitLocked(pod *corev1.Pod) string {
	want := hostPortsOf(pod)
	if len(want) == 0 {
		return ""
	}
	for _, r := range p.pods {
		r.mu.Lock()
		live := !r.terminating && r.phase != corev1.PodFailed && r.phase != corev1.PodSucceeded && r.pod.UID != pod.UID
		r.mu.Unlock()
		if !live {
			continue
		}
		for _, hp := range hostPortsOf(r.pod) {
			for _, w := range want {
				if hp.conflicts(w) {
					return fmt.Sprintf("Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports (%d/%s on %s is used by pod %s)",
						w.port, strings.ToUpper(w.proto), hp.on(), r.pod.Name)
				}
			}
		}
	}
	return ""
}

// UpdatePod: a pod's spec is immutable apart from images and a few
// fields; like the kubelet, a changed image restarts that container.
func (p *provider) UpdatePod(_ context.Context, pod *corev1.Pod) error {
	r, ok := p.run(pod)
	if !ok {
		return errdefs.NotFoundf("pod %s/%s is not running on this node", pod.Namespace, pod.Name)
	}
	// A Pod changed into one the API server would not accept (written
	// into etcd behind its back) keeps running as it was validated.
	if errs := validatePod(pod); len(errs) > 0 {
		p.log.Warn("ignoring an update the API server would not have accepted", "pod", podKey(pod.Namespace, pod.Name), "err", errs.ToAggregate())
		r.event(corev1.EventTypeWarning, rejectReason, "The node ignores an update of the Pod the API server would not have accepted: %s", shortErrors(errs))
		return nil
	}
	r.update(pod)
	return nil
}

// run finds the run of this very pod: a pod recreated under the same name
// (a StatefulSet's, or after a forced delete) is another pod.
func (p *provider) run(pod *corev1.Pod) (*podRun, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.pods[podKey(pod.Namespace, pod.Name)]
	if !ok || (pod.UID != "" && r.pod.UID != pod.UID) {
		return nil, false
	}
	return r, true
}

// DeletePod starts graceful termination and returns at once.
func (p *provider) DeletePod(_ context.Context, pod *corev1.Pod) error {
	r, ok := p.run(pod)
	if !ok {
		return errdefs.NotFoundf("pod %s/%s is not running on this node", pod.Namespace, pod.Name)
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.DeletionGracePeriodSeconds != nil {
		grace = *pod.DeletionGracePeriodSeconds
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	r.terminate(time.Duration(grace)*time.Second, true)
	return nil
}

func (p *provider) forget(r *podRun) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mounts.Add(-int64(r.mounts))
	r.mounts = 0
	key := podKey(r.pod.Namespace, r.pod.Name)
	if p.pods[key] == r {
		delete(p.pods, key)
	}
}

func (p *provider) get(ns, name string) (*podRun, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.pods[podKey(ns, name)]
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s is not running on this node", ns, name)
	}
	return r, nil
}

func (p *provider) GetPod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	r, err := p.get(ns, name)
	if err != nil {
		return nil, err
	}
	return r.snapshot(), nil
}

func (p *provider) GetPodStatus(ctx context.Context, ns, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// runs are the pods the node runs now.
func (p *provider) runs() []*podRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Collect(maps.Values(p.pods))
}

func (p *provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	runs := p.runs()
	out := make([]*corev1.Pod, 0, len(runs))
	for _, r := range runs {
		out = append(out, r.snapshot())
	}
	return out, nil
}

// GetStatsSummary reports the node's pods without resource figures:
// lab nodes do not meter containers.
func (p *provider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	pods, _ := p.GetPods(context.Background())
	s := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: p.cfg.NodeName, StartTime: metav1.Now()}}
	for _, pod := range pods {
		s.Pods = append(s.Pods, statsv1alpha1.PodStats{PodRef: statsv1alpha1.PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)}, StartTime: metav1.Now()})
	}
	return s, nil
}

// GetMetricsResource reports no resource metrics (see GetStatsSummary).
func (p *provider) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) { return nil, nil }

// GetContainerLogs reads a container's log (the previous run's with
// opts.Previous), honouring tail, since, timestamps and follow.
func (p *provider) GetContainerLogs(ctx context.Context, ns, name, container string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	r, err := p.getRequested(ns, name, container)
	if err != nil {
		return nil, err
	}
	c, err := r.container(container)
	if err != nil {
		return nil, err
	}
	run, err := c.logRun(opts.Previous, name)
	if err != nil {
		return nil, err
	}
	rel, err := c.logRel(run)
	if err != nil {
		return nil, err
	}
	return readLog(ctx, r.files.tree, rel, opts, fromStart, func() bool { return c.finished() })
}

// getRequested finds the pod a kubelet API request names: its names come
// from the request's URL, and are checked before anything is looked up
// with them.
func (p *provider) getRequested(ns, name, container string) (*podRun, error) {
	if err := validRequestNames(ns, name, container); err != nil {
		return nil, errdefs.InvalidInputf("%v", err)
	}
	return p.get(ns, name)
}

// RunInContainer is kubectl exec.
func (p *provider) RunInContainer(ctx context.Context, ns, name, container string, cmd []string, attach api.AttachIO) error {
	r, err := p.getRequested(ns, name, container)
	if err != nil {
		return err
	}
	c, err := r.container(container)
	if err != nil {
		return err
	}
	id := c.runningID()
	if id == "" {
		// The kubelet's words when the runtime has no running container.
		return errdefs.NotFoundf("container not found (%q)", container)
	}
	return execAttached(ctx, p.rt, id, cmd, attach)
}

// AttachToContainer is kubectl attach: the container's output from now
// on follows (kubectl run -i prints the earlier output from the log
// first).
func (p *provider) AttachToContainer(ctx context.Context, ns, name, container string, attach api.AttachIO) error {
	r, err := p.getRequested(ns, name, container)
	if err != nil {
		return err
	}
	c, err := r.container(container)
	if err != nil {
		return err
	}
	run := c.running()
	if run == nil {
		return errdefs.NotFoundf("container not found (%q)", container)
	}
	rel, err := c.logRel(c.restartCount())
	if err != nil {
		return err
	}
	rc, err := readLog(ctx, r.files.tree, rel, api.ContainerLogOpts{Follow: true}, fromNow, func() bool { return c.finished() })
	if err != nil {
		return err
	}
	defer rc.Close()
	if in := attach.Stdin(); in != nil && run.stdin != nil {
		go func() {
			io.Copy(run.stdin, in)
			// stdinOnce: the container's input ends with the first
			// attach's (a pipe only: a terminal has no end).
			if c.spec.StdinOnce && run.console == nil {
				if cl, ok := run.stdin.(io.Closer); ok {
					cl.Close()
				}
			}
		}()
	}
	if run.console != nil {
		go func() {
			for size := range attach.Resize() {
				pty.Setsize(run.console, &pty.Winsize{Rows: size.Height, Cols: size.Width})
			}
		}()
	}
	if attach.Stdout() != nil {
		_, err = io.Copy(attach.Stdout(), rc)
	}
	return err
}

// PortForward is kubectl port-forward: a connection to the pod's port,
// from inside the pod's network namespace.
func (p *provider) PortForward(ctx context.Context, ns, name string, port int32, stream io.ReadWriteCloser) error {
	r, err := p.getRequested(ns, name, "")
	if err != nil {
		return err
	}
	if port < 1 || port > 65535 {
		return errdefs.InvalidInputf("port %d is not a port number", port)
	}
	netns := r.netnsName()
	if netns == "" {
		return fmt.Errorf("pod %q has no network yet", name)
	}
	conn, err := dialIn(ctx, netns, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return fmt.Errorf("connecting to port %d of pod %s: %w", port, name, err)
	}
	defer conn.Close()
	errc := make(chan error, 2)
	go func() { _, err := io.Copy(conn, stream); errc <- err }()
	go func() { _, err := io.Copy(stream, conn); errc <- err }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// podRun is one pod on this node: its sandbox, volumes and containers.
type podRun struct {
	p   *provider
	ctx context.Context
	// stop ends the pod's containers' loops.
	stop context.CancelFunc

	// files is the pod's directory on the node; none for a pod that
	// failed validation.
	files podDir

	mu  sync.Mutex
	pod *corev1.Pod
	// iso is the user namespace the pod's containers join: the lab's, or
	// (hostUsers: false) one of the pod's own, claimed by idClaim.
	iso         Isolation
	idClaim     *userns.Claim
	netns       string
	ip          netip.Addr
	volumes     map[string]volume
	tokens      *tokenCache
	initDone    bool
	containers  []*containerRun
	terminating bool
	stopped     chan struct{}
	runDone     chan struct{} // closed when run returns
	phase       corev1.PodPhase
	reason      string
	message     string
	// evicted says the node evicted the Pod (eviction.go); deleted that
	// the API server deleted it.
	evicted   bool
	deleted   bool
	startTime metav1.Time
	// external are the Pod's conditions other components own (readiness
	// gates'), as the API server last had them (seeConditions).
	external []corev1.PodCondition
	// restore is what an earlier run of the agent left of the pod,
	// which this run adopts.
	restore *podState
	// mounts is what the pod holds of the lab's MountBudget (guarded by
	// the provider's mu).
	mounts int
	saveMu sync.Mutex
}

func newPodRun(p *provider, pod *corev1.Pod) *podRun {
	ctx, stop := context.WithCancel(p.nodeCtx)
	r := &podRun{p: p, ctx: ctx, stop: stop, pod: pod, stopped: make(chan struct{}), runDone: make(chan struct{}), phase: corev1.PodPending, startTime: metav1.Now(),
		tokens: &tokenCache{}, iso: p.cfg.Isolation, external: externalConditions(pod.Status.Conditions)}
	// A UID that is no UUID gives no directory: such a pod is rejected
	// (CreatePod) before anything would use it.
	r.files, _ = newPodDir(p.cfg.tree(), pod.UID)
	for i := range pod.Spec.Containers {
		r.containers = append(r.containers, newContainerRun(r, &pod.Spec.Containers[i], false))
	}
	return r
}

// dir is the pod's directory, "" for a pod that has none.
func (r *podRun) dir() string { return r.files.path() }

// mkdir makes the pod's directory, or names below it.
func (r *podRun) mkdir(names ...string) error {
	rel, err := r.files.sub(names...)
	if err != nil {
		return err
	}
	return r.files.tree.mkdirAll(rel, 0o755)
}

func (r *podRun) netnsName() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.netns
}

func (r *podRun) container(name string) (*containerRun, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.containers {
		if c.spec.Name == name {
			return c, nil
		}
	}
	for _, c := range r.pod.Spec.InitContainers {
		if c.Name == name {
			return nil, errdefs.NotFoundf("init container %q of pod %q is not running", name, r.pod.Name)
		}
	}
	return nil, errdefs.NotFoundf("container %q is not valid for pod %q", name, r.pod.Name)
}

func (r *podRun) event(typ, reason, format string, args ...any) {
	r.p.events.Eventf(r.pod, typ, reason, format, args...)
}

// changed publishes the pod's current status, and saves its state.
func (r *podRun) changed() {
	r.save()
	r.p.publish(r.snapshot())
}

func (r *podRun) run() {
	defer close(r.runDone)
	pod := r.pod
	log := r.p.log.With("pod", podKey(pod.Namespace, pod.Name))
	if err := r.mkdir(); err != nil {
		r.fail("CreatePodSandboxError", err)
		return
	}
	// The sandbox: the pod's network, as an earlier run set it up when
	// the pod is adopted.
	if st := r.restore; st != nil {
		if err := r.restoreNetwork(st); err != nil {
			log.Error("adopting the pod's network; starting the pod afresh", "err", err)
			r.restore = nil
			for _, c := range st.Containers {
				if c.ID != "" {
					r.p.rt.delete(r.ctx, c.ID)
				}
			}
		}
	}
	for r.restore == nil {
		if err := r.setupNetwork(); err != nil {
			if errors.Is(err, errNoPodCIDR) {
				select {
				case <-r.ctx.Done():
					return
				case <-time.After(time.Second):
					continue
				}
			}
			log.Error("pod sandbox", "err", err)
			r.event(corev1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
			select {
			case <-r.ctx.Done():
				return
			case <-time.After(5 * time.Second):
				continue
			}
		}
		break
	}
	if r.restore == nil {
		r.changed() // the pod's IP; containers waiting in ContainerCreating
	}
	// Volumes: as the kubelet, a missing ConfigMap or Secret keeps the
	// pod waiting (ContainerCreating, FailedMount events) until it
	// appears.
	var vols map[string]volume
	for delay := time.Second; ; delay = min(2*delay, 30*time.Second) {
		var err error
		if vols, err = r.p.vols.prepare(r.ctx, pod, r.files, r.tokens, r.rootUID()); err == nil {
			break
		}
		r.event(corev1.EventTypeWarning, "FailedMount", "MountVolume.SetUp failed: %v", err)
		select {
		case <-r.ctx.Done():
			return
		case <-time.After(delay):
		}
	}
	r.mu.Lock()
	r.volumes = vols
	r.mu.Unlock()
	go r.refreshVolumes()
	if err := writePodFiles(r); err != nil {
		r.fail("CreatePodSandboxError", err)
		return
	}
	if r.restore == nil {
		r.changed()
	}
	if st := r.restore; st != nil {
		r.restoreInit(st)
		for _, c := range r.appContainers() {
			if s, ok := st.Containers[c.spec.Name]; ok {
				c.resume(s)
			}
		}
	}
	// Init containers, one after the other. A sidecar (an init container
	// with restartPolicy Always) is started, the next one follows once it
	// has started (its startup probe passed, or it runs), and it keeps
	// running beside the app containers, restarted whenever it exits, as
	// the kubelet runs it.
	var sidecars sync.WaitGroup
	runSidecar := func(c *containerRun) {
		sidecars.Add(1)
		go func() { defer sidecars.Done(); c.loop() }()
	}
	for i := range pod.Spec.InitContainers {
		if r.restore != nil {
			for _, c := range r.sidecars() {
				runSidecar(c)
			}
			break
		}
		c := newContainerRun(r, &pod.Spec.InitContainers[i], true)
		r.mu.Lock()
		r.containers = append([]*containerRun{c}, r.containers...)
		r.mu.Unlock()
		if c.sidecar() {
			runSidecar(c)
			if !c.waitStarted() {
				return
			}
			continue
		}
		if !c.runToCompletion() {
			return
		}
	}
	r.mu.Lock()
	r.initDone = true
	r.phase = corev1.PodRunning
	r.mu.Unlock()
	r.changed()
	var wg sync.WaitGroup
	for _, c := range r.appContainers() {
		wg.Add(1)
		go func() { defer wg.Done(); c.loop() }()
	}
	wg.Wait()
	if r.p.nodeCtx.Err() != nil {
		return // the agent stops; the pod goes on without it
	}
	// The app containers are done for good (a Job's Pod): the sidecars
	// stop too, the last started first.
	stopSidecars(r.sidecars(), time.Now().Add(sidecarGrace(r.pod)))
	sidecars.Wait()
	r.finish()
}

// sidecars are the pod's running init containers with restartPolicy
// Always, in the order they started.
func (r *podRun) sidecars() []*containerRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*containerRun
	for _, c := range r.containers {
		if c.sidecar() {
			out = append([]*containerRun{c}, out...) // r.containers holds the init containers last first
		}
	}
	return out
}

// stopSidecars stops sidecars gracefully one after the other, the last
// started first, as the kubelet does once the app containers are gone.
func stopSidecars(sidecars []*containerRun, deadline time.Time) {
	for i := len(sidecars) - 1; i >= 0; i-- {
		sidecars[i].stopGracefully(deadline)
	}
}

// sidecarGrace is how long sidecars get to stop after the app containers
// ended on their own: the pod's termination grace period.
func sidecarGrace(pod *corev1.Pod) time.Duration {
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return 30 * time.Second
}

// volumeRefresh is how often ConfigMap, Secret, projected and downward
// API volumes are brought up to date with their sources (the kubelet's
// sync period is a minute; a lab learner should not wait that long for an
// edited ConfigMap to reach the pod).
const volumeRefresh = 5 * time.Second

// refreshVolumes keeps the pod's updatable volumes current until the pod
// stops.
func (r *podRun) refreshVolumes() {
	if !slices.ContainsFunc(r.pod.Spec.Volumes, updatable) {
		return
	}
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-time.After(volumeRefresh):
		}
		changed, err := r.p.vols.refresh(r.ctx, r.snapshot(), r.files, r.tokens, r.rootUID())
		if err != nil && r.ctx.Err() == nil {
			r.p.log.Warn("refreshing volumes", "pod", podKey(r.pod.Namespace, r.pod.Name), "err", err)
		}
		if len(changed) > 0 {
			r.p.log.Info("volumes updated", "pod", podKey(r.pod.Namespace, r.pod.Name), "volumes", changed)
		}
	}
}

func (r *podRun) appContainers() []*containerRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*containerRun
	for _, c := range r.containers {
		if !c.init {
			out = append(out, c)
		}
	}
	return out
}

func (r *podRun) setupNetwork() error {
	if r.pod.Spec.HostNetwork {
		ip, _ := netip.ParseAddr(r.p.cfg.NodeIP)
		r.mu.Lock()
		r.netns, r.ip = r.p.cfg.Netns, ip
		r.mu.Unlock()
		return nil
	}
	iso := r.p.cfg.Isolation
	if ownUsers(r.pod) {
		if err := r.mkdir(); err != nil {
			return err
		}
		own, claim, err := iso.podIsolation(r.ctx, r.dir())
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.iso, r.idClaim = own, claim
		r.mu.Unlock()
		iso = own
	}
	netns, ip, err := r.p.net.setup(r.ctx, string(r.pod.UID), r.pod.Name, iso.Userns)
	if err != nil {
		r.releaseUsers()
		return err
	}
	if err := r.p.net.setHostPorts(r.ctx, string(r.pod.UID), ip, hostPortsOf(r.pod)); err != nil {
		r.p.net.teardown(context.WithoutCancel(r.ctx), string(r.pod.UID))
		r.releaseUsers()
		return err
	}
	r.mu.Lock()
	r.netns, r.ip = netns, ip
	r.mu.Unlock()
	return nil
}

// rootUID is the host id of root in the pod.
func (r *podRun) rootUID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.iso.RootUID()
}

// isolation is the user namespace the pod's containers join.
func (r *podRun) isolation() Isolation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.iso
}

// releaseUsers gives back the pod's own user namespace, if it has one.
func (r *podRun) releaseUsers() {
	r.mu.Lock()
	own, claim := r.iso, r.idClaim
	r.iso, r.idClaim = r.p.cfg.Isolation, nil
	r.mu.Unlock()
	if claim == nil {
		return
	}
	if err := r.p.cfg.Isolation.releasePodIsolation(own, claim); err != nil {
		r.p.log.Error("removing the pod's user namespace", "pod", r.pod.Name, "err", err)
	}
}

// fail ends a pod that cannot start.
func (r *podRun) fail(reason string, err error) {
	r.mu.Lock()
	r.phase, r.reason, r.message = corev1.PodFailed, reason, err.Error()
	r.mu.Unlock()
	r.changed()
}

// finish runs once every container has stopped for good (restartPolicy
// Never/OnFailure) or the pod was terminated.
func (r *podRun) finish() {
	r.mu.Lock()
	if !r.terminating {
		failed := false
		for _, c := range r.containers {
			if !c.init && c.lastExitCode() != 0 {
				failed = true
			}
		}
		r.phase = corev1.PodSucceeded
		if failed {
			r.phase = corev1.PodFailed
		}
	}
	r.mu.Unlock()
	r.changed()
}

func (r *podRun) update(pod *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pod.Labels, r.pod.Annotations = pod.Labels, pod.Annotations
	r.pod.DeletionTimestamp, r.pod.DeletionGracePeriodSeconds = pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds
	// The one field of a Pod's spec the API lets a client lower on a
	// running Pod besides images and tolerations.
	r.pod.Spec.ActiveDeadlineSeconds = pod.Spec.ActiveDeadlineSeconds
	for _, c := range r.containers {
		for i := range pod.Spec.Containers {
			if pod.Spec.Containers[i].Name == c.spec.Name && pod.Spec.Containers[i].Image != c.spec.Image {
				c.setImage(pod.Spec.Containers[i].Image)
			}
		}
	}
}

// terminate stops the pod gracefully: preStop hooks, SIGTERM, and SIGKILL
// once grace has passed; then the sandbox goes. A deleted pod's run is
// forgotten and its object removed once it has stopped; a pod stopped
// without being deleted (evicted) stays known until it is deleted.
func (r *podRun) terminate(grace time.Duration, deleted bool) {
	r.mu.Lock()
	if deleted {
		if r.deleted {
			r.mu.Unlock()
			return
		}
		r.deleted = true
	}
	if r.terminating {
		// Stopping already (evicted): the object goes once it has.
		r.mu.Unlock()
		if deleted {
			go func() {
				<-r.stopped
				r.p.forget(r)
				r.deleteObject()
			}()
		}
		return
	}
	r.terminating = true
	containers := append([]*containerRun(nil), r.containers...)
	r.mu.Unlock()
	go func() {
		deadline := time.Now().Add(grace)
		stopAll := func(cs []*containerRun) {
			var wg sync.WaitGroup
			for _, c := range cs {
				wg.Add(1)
				go func() { defer wg.Done(); c.stopGracefully(deadline) }()
			}
			wg.Wait()
		}
		// The app containers (and init containers) first, then the
		// sidecars, the last started first: they serve the app
		// containers until those are gone.
		var sidecars []*containerRun
		containers = slices.DeleteFunc(containers, func(c *containerRun) bool {
			if c.sidecar() {
				sidecars = append([]*containerRun{c}, sidecars...)
				return true
			}
			return false
		})
		stopAll(containers)
		stopSidecars(sidecars, deadline)
		r.stop()
		// Any container the pod started meanwhile (the next init
		// container, say) goes too; then the pod's loop ends.
		stopAll(r.snapshotContainers())
		select {
		case <-r.runDone:
		case <-time.After(10 * time.Second):
			r.p.log.Warn("pod did not stop in time", "pod", podKey(r.pod.Namespace, r.pod.Name))
		}
		// As the kubelet: a deleted pod ends in a terminal phase once
		// its containers have stopped, which lets the pod object go at
		// once rather than after the whole grace period.
		r.mu.Lock()
		if r.phase != corev1.PodSucceeded && r.phase != corev1.PodFailed {
			r.phase = terminalPhase(r.containers)
		}
		r.mu.Unlock()
		r.teardown()
		r.changed()
		r.mu.Lock()
		deleted := r.deleted
		r.mu.Unlock()
		if deleted {
			r.p.forget(r)
		}
		close(r.stopped)
		if deleted {
			r.deleteObject()
		}
	}()
}

// deleteObject removes the deleted pod's object once its containers have
// stopped, as the kubelet does (grace 0, for this pod's UID only), so the
// pod and its endpoints go at once, not at the end of the grace period.
func (r *podRun) deleteObject() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	uid := r.pod.UID
	err := r.p.client.CoreV1().Pods(r.pod.Namespace).Delete(ctx, r.pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		r.p.log.Warn("deleting the stopped pod's object", "pod", podKey(r.pod.Namespace, r.pod.Name), "err", err)
	}
}

// terminalPhase is Succeeded when every app container ran and exited 0,
// else Failed.
func terminalPhase(containers []*containerRun) corev1.PodPhase {
	for _, c := range containers {
		if c.init {
			continue
		}
		c.mu.Lock()
		ok := c.terminated != nil && c.terminated.ExitCode == 0 && c.current == nil
		c.mu.Unlock()
		if !ok {
			return corev1.PodFailed
		}
	}
	return corev1.PodSucceeded
}

func (r *podRun) teardown() {
	if !r.files.valid() {
		return // a pod that failed validation made nothing on the node
	}
	ctx := context.Background()
	for _, c := range r.snapshotContainers() {
		c.cleanup()
	}
	if !r.pod.Spec.HostNetwork {
		if err := r.p.net.teardown(ctx, string(r.pod.UID)); err != nil {
			r.p.log.Error("removing pod network", "pod", r.pod.Name, "err", err)
		}
	}
	r.releaseUsers()
	if err := r.files.tree.removeAll(r.files.rel); err != nil {
		r.p.log.Error("removing pod directory", "pod", r.pod.Name, "err", err)
	}
}

func (r *podRun) snapshotContainers() []*containerRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*containerRun(nil), r.containers...)
}

// snapshot renders the pod with its current status.
func (r *podRun) snapshot() *corev1.Pod {
	r.mu.Lock()
	pod := r.pod.DeepCopy()
	phase, reason, message, ip, initDone, evicted := r.phase, r.reason, r.message, r.ip, r.initDone, r.evicted
	external := slices.Clone(r.external)
	containers := append([]*containerRun(nil), r.containers...)
	r.mu.Unlock()
	st := corev1.PodStatus{
		Phase:     phase,
		Reason:    reason,
		Message:   message,
		HostIP:    r.p.cfg.NodeIP,
		HostIPs:   []corev1.HostIP{{IP: r.p.cfg.NodeIP}},
		StartTime: &r.startTime,
		QOSClass:  qosClass(pod),
	}
	if ip.IsValid() {
		st.PodIP = ip.String()
		st.PodIPs = []corev1.PodIP{{IP: ip.String()}}
	}
	allReady := len(pod.Spec.Containers) > 0
	for _, c := range containers {
		cs := c.status()
		if c.init {
			st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
			// A sidecar's readiness counts as an app container's.
			if c.sidecar() && !cs.Ready {
				allReady = false
			}
			continue
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
		if !cs.Ready {
			allReady = false
		}
	}
	sort.Slice(st.ContainerStatuses, func(i, j int) bool {
		return containerIndex(pod, st.ContainerStatuses[i].Name) < containerIndex(pod, st.ContainerStatuses[j].Name)
	})
	// As the kubelet's getPhase: a pod whose container has not started
	// yet (waiting, with no run behind it) is still Pending, though the
	// others run; clients that wait for Running expect every container
	// to have started (its logs readable, its port served).
	if phase == corev1.PodRunning {
		for _, cs := range st.ContainerStatuses {
			if cs.State.Waiting != nil && cs.LastTerminationState.Terminated == nil {
				phase = corev1.PodPending
				st.Phase = phase
				break
			}
		}
	}
	if phase != corev1.PodRunning {
		allReady = false
	}
	now := metav1.Now()
	cond := func(t corev1.PodConditionType, ok bool, reason string) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, LastTransitionTime: now, Reason: reason}
		if ok {
			c.Status, c.Reason = corev1.ConditionTrue, ""
		}
		return c
	}
	notReady := "ContainersNotReady"
	if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
		notReady = "PodCompleted"
	}
	// Ready also waits for the readiness gates, which other components
	// set (a blue/green switch, a load balancer's registration).
	ready := cond(corev1.PodReady, allReady, notReady)
	if ok, why := gatesReady(pod, external); allReady && !ok {
		ready = cond(corev1.PodReady, false, "ReadinessGatesNotReady")
		ready.Message = why
	}
	st.Conditions = []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, ip.IsValid(), ""),
		cond(corev1.PodInitialized, initDone || len(pod.Spec.InitContainers) == 0, "ContainersNotInitialized"),
		cond(corev1.ContainersReady, allReady, notReady),
		ready,
		cond(corev1.PodScheduled, true, ""),
	}
	if evicted {
		// As the kubelet says of a Pod it evicted.
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: "TerminationByKubelet", Message: message, LastTransitionTime: now})
	}
	// Keep transition times stable when nothing changed.
	for i := range st.Conditions {
		for _, old := range pod.Status.Conditions {
			if old.Type == st.Conditions[i].Type && old.Status == st.Conditions[i].Status {
				st.Conditions[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	st.Conditions = append(st.Conditions, external...)
	pod.Status = st
	return pod
}

func containerIndex(pod *corev1.Pod, name string) int {
	for i, c := range pod.Spec.Containers {
		if c.Name == name {
			return i
		}
	}
	return len(pod.Spec.Containers)
}

func qosClass(pod *corev1.Pod) corev1.PodQOSClass {
	// The API server sets it when the Pod is made, and it may not change.
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	// Else as upstream's GetPodQOS: only CPU and memory count, zero
	// quantities are none, init containers too.
	compute := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}
	some, guaranteed := false, true
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, r := range compute {
			l, hasL := c.Resources.Limits[r]
			q, hasQ := c.Resources.Requests[r]
			hasL, hasQ = hasL && !l.IsZero(), hasQ && !q.IsZero()
			some = some || hasL || hasQ
			if !hasL || (hasQ && q.Cmp(l) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case !some:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	default:
		return corev1.PodQOSBurstable
	}
}

// podHostname is the Pod's host name as the kubelet gives it: spec.hostname
// or else the Pod's name, cut to the 63 bytes of a DNS label (a Pod's name
// may be a longer DNS subdomain) without a trailing "-" or ".".
func podHostname(pod *corev1.Pod) string {
	h := pod.Name
	if pod.Spec.Hostname != "" {
		h = pod.Spec.Hostname
	}
	if len(h) <= validation.DNS1123LabelMaxLength {
		return h
	}
	return strings.TrimRight(h[:validation.DNS1123LabelMaxLength], "-.")
}

// writePodFiles writes the files the kubelet manages for each pod:
// resolv.conf, hosts and hostname.
func writePodFiles(r *podRun) error {
	pod := r.pod
	cfg := r.p.cfg
	dns := dnsFor(pod, cfg.ClusterDNS, cfg.DNSDomain)
	for _, w := range dns.warnings {
		r.event(corev1.EventTypeWarning, "DNSConfigForming", "%s", w)
	}
	hostname := podHostname(pod)
	if pod.Spec.HostNetwork {
		hostname = cfg.NodeName
	}
	ip := r.ip.String()
	hosts := "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	fqdn := hostname
	if pod.Spec.Subdomain != "" {
		fqdn = fmt.Sprintf("%s.%s.%s.svc.%s", hostname, pod.Spec.Subdomain, pod.Namespace, cfg.DNSDomain)
	}
	hosts += fmt.Sprintf("%s\t%s", ip, fqdn)
	if fqdn != hostname {
		hosts += "\t" + hostname
	}
	hosts += "\n"
	for _, ha := range pod.Spec.HostAliases {
		hosts += fmt.Sprintf("%s\t%s\n", ha.IP, strings.Join(ha.Hostnames, "\t"))
	}
	files := map[string]string{"resolv.conf": dns.resolvConf(), "hosts": hosts, "hostname": hostname + "\n"}
	for name, content := range files {
		rel, err := r.files.sub(name)
		if err != nil {
			return err
		}
		// Root's in the lab, as on a node (containers may write them).
		if err := r.files.tree.writeFile(rel, []byte(content), 0o644, r.rootUID(), r.rootUID()); err != nil {
			return err
		}
	}
	return nil
}
