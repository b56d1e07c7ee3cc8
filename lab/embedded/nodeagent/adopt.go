//go:build linux

package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/svclab/svclab/lab/embedded/userns"
	"github.com/svclab/svclab/lab/mounts"
)

// A restarted agent adopts the pods the node runs, as a kubelet restarted
// under containerd does: their containers go on running (detached, see
// startDetached), keep their network namespace and address, their restart
// counts and their readiness, so nothing a client or an EndpointSlice sees
// changes. What the agent knows of each pod is kept in the pod's directory
// (state.json) whenever its status changes.

// podState is what a restarted agent needs to adopt a pod.
type podState struct {
	Netns string `json:"netns"`
	// Users is the pod's own user namespace (hostUsers: false), claimed
	// by IDs.
	Users      *Isolation                `json:"users,omitempty"`
	IDs        *userns.Claim             `json:"ids,omitempty"`
	IP         string                    `json:"ip,omitempty"`
	StartTime  time.Time                 `json:"startTime"`
	InitDone   bool                      `json:"initDone"`
	Containers map[string]containerState `json:"containers"`
}

// containerState is one container of an adopted pod.
type containerState struct {
	Restarts int `json:"restarts"`
	// ID, Pid and PidStart identify the current run; ID is empty when
	// none runs.
	ID       string    `json:"id,omitempty"`
	Pid      int       `json:"pid,omitempty"`
	PidStart uint64    `json:"pidStart,omitempty"`
	Started  time.Time `json:"started,omitzero"`
	Ready    bool      `json:"ready"`
	// Terminated is the run that ended (with no run since); LastTerm the
	// one before the current.
	Terminated *corev1.ContainerStateTerminated `json:"terminated,omitempty"`
	LastTerm   *corev1.ContainerStateTerminated `json:"lastTerm,omitempty"`
}

// maxStateBytes bounds a pod's state.json as a restarted agent reads it.
const maxStateBytes = 4 << 20

// loadPodState reads what an earlier run of the agent kept of the pod in
// d, and checks the names in it that become paths: the container IDs, the
// network namespace's name, the pin of the pod's own user namespace.
func loadPodState(d podDir) (*podState, error) {
	rel, err := d.sub("state.json")
	if err != nil {
		return nil, err
	}
	b, err := d.tree.readFile(rel, maxStateBytes)
	if err != nil {
		return nil, err
	}
	var st podState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, err
	}
	for _, c := range st.Containers {
		if c.ID == "" {
			continue
		}
		if err := validContainerID(c.ID); err != nil {
			return nil, err
		}
	}
	if st.Netns != "" {
		if err := fileName(st.Netns); err != nil {
			return nil, fmt.Errorf("the pod's network namespace: %w", err)
		}
	}
	if st.Users != nil && st.Users.Userns != d.path("userns") {
		return nil, fmt.Errorf("the pod's user namespace is pinned at %q, not in its directory", st.Users.Userns)
	}
	return &st, nil
}

// save records the pod's state for a restarted agent. A pod whose
// directory is gone (torn down) records nothing.
func (r *podRun) save() {
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	r.mu.Lock()
	st := podState{Netns: r.netns, StartTime: r.startTime.Time, InitDone: r.initDone, Containers: map[string]containerState{}}
	if r.idClaim != nil {
		iso := r.iso
		st.Users, st.IDs = &iso, r.idClaim
	}
	if r.ip.IsValid() {
		st.IP = r.ip.String()
	}
	containers := append([]*containerRun(nil), r.containers...)
	r.mu.Unlock()
	for _, c := range containers {
		st.Containers[c.spec.Name] = c.state()
	}
	b, err := json.Marshal(st)
	if err != nil {
		return
	}
	rel, err := r.files.sub("state.json")
	if err != nil {
		return // a pod that failed validation keeps no state
	}
	r.files.tree.replaceFile(rel, b, 0o644)
}

func (c *containerRun) state() containerState {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := containerState{Restarts: c.restarts, Ready: c.ready, LastTerm: c.lastTerm, Terminated: c.terminated}
	if c.current != nil {
		s.ID, s.Pid, s.PidStart, s.Started = c.currentID, c.current.pid, c.current.pidStart, c.current.started
	}
	return s
}

// adoption is what a starting agent found of its predecessor's pods.
type adoption struct {
	mu   sync.Mutex
	pods map[types.UID]*podState
}

// take hands over the state of pod uid, once.
func (a *adoption) take(uid types.UID) *podState {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.pods[uid]
	delete(a.pods, uid)
	return st
}

// findAdoptable decides, as the agent starts, which pods left by an
// earlier run it adopts: those still bound to the node and not being
// deleted, whose init containers had completed and whose network
// namespace exists. Everything else an earlier run left — containers,
// root filesystem mounts, pod namespaces, veths, directories — goes.
func findAdoptable(ctx context.Context, client kubernetes.Interface, cfg Config, rt *runc, pn *podNetwork, log *slog.Logger) *adoption {
	podsDir := filepath.Join(cfg.StateDir, "pods")
	keep := map[types.UID]*podState{}
	live := map[types.UID]bool{}
	var listErr error
	for attempt := 0; attempt < 5; attempt++ {
		var pods *corev1.PodList
		pods, listErr = client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + cfg.NodeName})
		if listErr == nil {
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
					live[p.UID] = true
				}
			}
			break
		}
		select {
		case <-ctx.Done():
			return &adoption{}
		case <-time.After(time.Second):
		}
	}
	if listErr != nil {
		log.Warn("cannot list the node's pods; starting them afresh", "err", listErr)
	}
	entries, _ := os.ReadDir(podsDir)
	tree := cfg.tree()
	for _, e := range entries {
		uid := types.UID(e.Name())
		d, err := newPodDir(tree, uid)
		if err != nil {
			continue // not a pod's directory: cleared below
		}
		st, err := loadPodState(d)
		if err != nil || !live[uid] || !st.InitDone {
			continue
		}
		if st.Netns != cfg.Netns {
			if _, err := os.Stat(filepath.Join("/run/netns", st.Netns)); err != nil {
				continue
			}
		}
		keep[uid] = st
	}
	// The containers of pods not kept go, and so do runs the state does
	// not know (a container created as the agent died).
	known := map[string]bool{}
	for _, st := range keep {
		for _, c := range st.Containers {
			if c.ID != "" && c.Pid > 0 {
				known[c.ID] = true
			}
		}
	}
	known[cfg.NodeContainer.ID] = true // its root filesystem is the node's
	rt.sweepExcept(ctx, podsDir, known)
	for _, e := range entries {
		if _, ok := keep[types.UID(e.Name())]; ok {
			continue
		}
		// Containers this process started for an earlier run of the
		// node's agent (it was stopped, not restarted) are its
		// children: reap them, now killed.
		if d, err := newPodDir(tree, types.UID(e.Name())); err == nil {
			if st, err := loadPodState(d); err == nil {
				for _, c := range st.Containers {
					if c.Pid > 0 {
						reapChild(c.Pid, c.PidStart)
					}
				}
			}
		}
		if err := tree.removeAll(path.Join("pods", e.Name())); err != nil {
			log.Warn("removing what an earlier run left of a pod", "dir", e.Name(), "err", err)
		}
	}
	uids := map[string]bool{}
	for uid := range keep {
		uids[string(uid)] = true
	}
	pn.sweepExcept(ctx, uids)
	if len(keep) > 0 || len(entries) > 0 {
		log.Info("pods of an earlier run", "adopted", len(keep), "cleared", len(entries)-len(keep))
	}
	return &adoption{pods: keep}
}

// sweepExcept kills and removes every container but those in keep, and
// unmounts what the others left mounted: under podsDir (a pod's own user
// namespace) and their root filesystems in the lab's runtime directory.
func (r *runc) sweepExcept(ctx context.Context, podsDir string, keep map[string]bool) {
	if out, err := r.cmd(ctx, "list", "-q").Output(); err == nil {
		for _, id := range strings.Fields(string(out)) {
			if !keep[id] {
				r.delete(ctx, id)
			}
		}
	}
	prefix := filepath.Clean(podsDir) + "/"
	list, err := mounts.List(func(mp string) bool {
		if !strings.HasPrefix(mp, prefix) {
			return false
		}
		// pods/UID/containers/ID/rootfs
		parts := strings.Split(strings.TrimPrefix(mp, prefix), "/")
		return len(parts) < 3 || parts[1] != "containers" || !keep[parts[2]]
	})
	if err != nil {
		return
	}
	for _, mp := range list {
		// One that a symlink now hides stays, for the cluster's deletion.
		_ = mounts.Detach(mp)
	}
	// The root filesystems (and staged mounts) of containers not kept.
	if r.iso.RunDir == "" {
		return
	}
	for _, dir := range []string{r.iso.NodeRoots(r.node), filepath.Dir(r.iso.staging(r.node, "x"))} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if !keep[e.Name()] {
				r.unmountRootfs(e.Name())
			}
		}
	}
}

// restoreNetwork takes over the pod's network as an earlier run set it
// up.
func (r *podRun) restoreNetwork(st *podState) error {
	if r.pod.Spec.HostNetwork {
		return r.setupNetwork()
	}
	ip, err := netip.ParseAddr(st.IP)
	if err != nil {
		return errors.New("the pod's saved address is unreadable")
	}
	if err := r.p.net.setHostPorts(r.ctx, string(r.pod.UID), ip, hostPortsOf(r.pod)); err != nil {
		return err
	}
	r.mu.Lock()
	r.netns, r.ip = st.Netns, ip
	if st.Users != nil && st.IDs != nil {
		r.iso, r.idClaim = *st.Users, st.IDs
	}
	if !st.StartTime.IsZero() {
		r.startTime = metav1.NewTime(st.StartTime)
	}
	r.mu.Unlock()
	return nil
}

// restoreInit records the pod's init containers as completed (they had,
// or the pod would not have been adopted) and takes its sidecars over as
// the app containers (resume).
func (r *podRun) restoreInit(st *podState) {
	for i := range r.pod.Spec.InitContainers {
		c := newContainerRun(r, &r.pod.Spec.InitContainers[i], true)
		s := st.Containers[c.spec.Name]
		if c.sidecar() {
			c.resume(s)
			r.mu.Lock()
			r.containers = append([]*containerRun{c}, r.containers...)
			r.mu.Unlock()
			continue
		}
		c.restarts, c.waiting, c.lastTerm = s.Restarts, nil, s.LastTerm
		c.terminated = s.Terminated
		if c.terminated == nil {
			c.terminated = &corev1.ContainerStateTerminated{Reason: "Completed"}
		}
		r.mu.Lock()
		r.containers = append([]*containerRun{c}, r.containers...)
		r.mu.Unlock()
	}
}

// resume takes over the container as an earlier agent left it: its
// counts, its last state and, when it still runs (or ended unseen), its
// run, which the loop then watches (adoptRun). It publishes nothing: the
// pod's status changes only once every container is resumed.
func (c *containerRun) resume(s containerState) {
	c.mu.Lock()
	c.adopted = &s
	c.restarts, c.lastTerm, c.terminated = s.Restarts, s.LastTerm, s.Terminated
	if s.Terminated != nil {
		c.exitCode = int(s.Terminated.ExitCode)
		c.waiting = nil
	}
	c.mu.Unlock()
	if s.ID == "" || s.Pid == 0 {
		return
	}
	r := c.pod
	bundle := r.files.path("containers", s.ID)
	logRel, err := c.logRel(s.Restarts)
	if err != nil || bundle == "" {
		return
	}
	log, err := openContainerLog(r.files.tree, logRel, r.p.cfg.logLimits())
	if err != nil {
		return
	}
	rc, err := r.p.rt.follow(s.ID, bundle, s.Pid, s.PidStart, s.Started, log)
	if err != nil {
		log.Close()
		return
	}
	img, _ := r.p.images.Resolve(c.currentImage())
	c.mu.Lock()
	c.current, c.currentID, c.waiting, c.terminated = rc, s.ID, nil, nil
	c.runImage = img
	c.ready = s.Ready && !c.init
	c.started = true
	c.resumedLog = log
	c.mu.Unlock()
}

// adoptRun watches the run resume took over until it ends, as runOnce
// does for a run it starts. A run it could not take over (a container
// with a terminal or stdin, which ends with its agent; a bundle gone)
// counts as killed.
func (c *containerRun) adoptRun(s containerState) (int, error) {
	r := c.pod
	c.mu.Lock()
	rc, log := c.current, c.resumedLog
	c.resumedLog = nil
	c.mu.Unlock()
	if rc == nil {
		r.p.rt.delete(context.Background(), s.ID)
		r.cleanupRun(s.ID)
		return 137, nil
	}
	defer log.Close()
	return c.watch(rc, s.ID)
}

// reapChild reaps pid, started at start, if it is an ended child of this
// process, waiting a moment for it to end.
func reapChild(pid int, start uint64) {
	if s, err := processStart(pid); err != nil || s != start {
		return
	}
	for i := 0; i < 20; i++ {
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if err != nil || got == pid {
			return // not our child, or reaped
		}
		time.Sleep(50 * time.Millisecond)
	}
}
