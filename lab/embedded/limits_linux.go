package embedded

import (
	"context"
	"fmt"
	"log/slog"
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

// Usage reports what the lab uses of its limits, and how often it
// reached them.
func (c *Cluster) Usage() cgroups.Usage { return cgroups.Read(labCgroup(c.st.Name)) }

// watchLimits tells the learner when the lab reaches a limit: a Warning
// Event on the control-plane Node (as the kubelet's SystemOOM), which
// kubectl get events and the lab's timeline show.
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
	last := cgroups.Read(labCgroup(st.Name))
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
