package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svclab/svclab/lab/embedded/cgroups"
)

// labCgroup is the cgroup (in every hierarchy) of cluster name: every
// node's containers are below it (nodeCgroup).
func labCgroup(name string) string { return filepath.Join(cgroupRoot, name) }

// nodesCgroup is the cgroup of every node of cluster name (nodeCgroup),
// below the lab's: it may hold all the lab's processes but
// controlPlanePids, so that a fork bomb in a node leaves the control plane
// the threads it needs to serve the learner, tell them and clean up.
func nodesCgroup(name string) string { return filepath.Join(labCgroup(name), "nodes") }

// applyLimits makes cluster st's cgroups and sets its limits: the lab's
// on the lab's cgroup, on its nodes' the processes it leaves them, and
// the readers' (readersCgroup).
func applyLimits(st *State) error {
	l := st.Limits.Limits
	if err := cgroups.Apply(labCgroup(st.Name), l); err != nil {
		return err
	}
	if err := cgroups.Apply(nodesCgroup(st.Name), cgroups.Limits{Pids: l.Pids - controlPlanePids, MemoryBytes: l.MemoryBytes, CPUShares: cgroups.DefaultLimits().CPUShares}); err != nil {
		return err
	}
	return cgroups.Apply(readersPath(st.Name), readersLimits(l))
}

// readersPath is the cgroup, below cluster name's, of the host programs
// svclab runs to read the lab's dataplane (nft, iptables-save, conntrack,
// in a node's network namespace): what they spend on what the lab made —
// a set of millions of elements costs nft gigabytes to list — counts
// against the lab, within a bound of its own, and never against the host.
func readersPath(name string) string { return filepath.Join(labCgroup(name), "readers") }

// readersLimits bound the readers within the lab's limits l: room for
// every live view and check of a lab at once, and a quarter of its CPU
// weight.
func readersLimits(l cgroups.Limits) cgroups.Limits {
	if l.MemoryBytes == 0 { // a lab created before labs had limits
		l = cgroups.DefaultLimits()
	}
	return cgroups.Limits{Pids: 256, MemoryBytes: min(256<<20, l.MemoryBytes), CPUShares: max(2, l.CPUShares/4)}
}

// readersCgroup returns the cgroup.procs files of cluster st's readers'
// cgroup, made (with its limits) for a lab created before it existed —
// but never for a lab whose own cgroup is gone (one being deleted: its
// readers' cgroup would outlive it).
func readersCgroup(st *State) ([]string, error) {
	procs, err := cgroups.Procs(readersPath(st.Name))
	if err != nil {
		return nil, err
	}
	for _, f := range procs {
		if _, err := os.Stat(f); err == nil {
			continue
		}
		for _, f := range procs {
			if _, err := os.Stat(filepath.Dir(filepath.Dir(f))); err != nil {
				return nil, fmt.Errorf("lab %s has no cgroup (is it being deleted?): %w", st.Name, err)
			}
		}
		if err := cgroups.Apply(readersPath(st.Name), readersLimits(st.Limits.Limits)); err != nil {
			return nil, err
		}
		break
	}
	return procs, nil
}

// controlPlaneCgroup is the cgroup of cluster name's control plane (its
// supervisor and every process it starts), below the lab's: node names
// start with the cluster's name, so it is no node's.
func controlPlaneCgroup(name string) string { return filepath.Join(labCgroup(name), "control-plane") }

// Usage reports what the lab uses of its limits, and how often it
// reached them.
func (c *Cluster) Usage() cgroups.Usage { return cgroups.Read(labCgroup(c.st.Name)) }

// watchLimits tells the learner when the lab reaches a limit: a Warning
// Event on the control-plane Node (as the kubelet's SystemOOM), which
// kubectl get events and the lab's timeline show. It also lifts etcd's
// block on writes once the learner has deleted objects from a full store
// (see storeGuard).
func watchLimits(ctx context.Context, st *State, pa paths, log *slog.Logger) {
	cp := st.ControlPlane()
	cfg, err := clientcmd.BuildConfigFromFlags("", pa.config("node-"+cp.Name+".conf"))
	if err != nil {
		log.Error("watching the lab's limits", "err", err)
		return
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Error("watching the lab's limits", "err", err)
		return
	}
	store, err := newStoreGuard(st, pa, log)
	if err != nil {
		log.Error("watching the lab's store", "err", err)
	} else {
		defer store.close()
	}
	last := cgroups.Read(labCgroup(st.Name))
	diskFull := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
		u := cgroups.Read(labCgroup(st.Name))
		if n := u.OOMKills - last.OOMKills; n > 0 {
			limitEvent(ctx, client, cp.Name, "SystemOOM", fmt.Sprintf(
				"The lab reached its memory limit (%s): the kernel stopped %d process(es), the largest first. Look for a Pod or a shell that uses more memory than it should (kubectl top is not available; ps aux on the nodes shows it).",
				resource.NewQuantity(u.MemoryLimitBytes, resource.BinarySI), n))
			log.Warn("the lab reached its memory limit", "oomKills", n)
		}
		if n := u.PidsRefused - last.PidsRefused; n > 0 {
			limitEvent(ctx, client, cp.Name, "PIDLimitReached", fmt.Sprintf(
				"The lab reached its limit of %d processes: %d new process(es) could not start. A Pod or a shell keeps starting processes (a fork bomb?); delete it, or start the lab over.", u.PidsMax, n))
			log.Warn("the lab reached its process limit", "refused", n)
		}
		last = u
		switch d := readDisk(pa); {
		case d.Full() && !diskFull:
			diskFull = true
			limitEvent(ctx, client, cp.Name, "FreeDiskSpaceFailed", fmt.Sprintf(
				"The lab's disk is full (%s): its nodes and Pods can write no more files. Delete what a Pod or a shell wrote (large files, emptyDirs), delete the Pod, or start the lab over.", size(d.SizeBytes)))
			log.Warn("the lab's disk is full", "bytes", d.UsedBytes)
		case !d.Full() && d.UsedBytes < d.SizeBytes*9/10:
			diskFull = false
		}
		if store != nil {
			store.check(ctx, func(reason, msg string) { limitEvent(ctx, client, cp.Name, reason, msg) })
		}
	}
}

func limitEvent(ctx context.Context, client kubernetes.Interface, node, reason, msg string) {
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: node + ".", Namespace: metav1.NamespaceDefault},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: node, UID: "", APIVersion: "v1"},
		Reason:         reason, Message: msg, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "svclab", Host: node},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	client.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{})
}

// drainReaders stops the processes in cluster name's readers' cgroup until
// none is left (a reader that was starting as the lab's namespaces went
// may join a moment later), for at most five seconds.
func drainReaders(name string) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids := cgroups.Members(readersPath(name))
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		killAll(pids, time.Second)
		time.Sleep(50 * time.Millisecond)
	}
}
