//go:build linux

package nodeagent

import (
	"context"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// statusSyncEvery is how often the agent compares the API server's status
// of its pods with its own, as the kubelet's status manager does (its
// syncBatch, every 10 s).
const statusSyncEvery = 10 * time.Second

// syncStatuses puts the node's status of its pods back where another
// writer changed it, as the kubelet's status manager reconciles: the
// node-lifecycle controller marks a pod not Ready when it sees the pod
// change while the node is not Ready in its cache, which happens to pods
// whose Ready status an agent that just came back sent before its own
// heartbeat reached the controller. Without this the pod stayed not Ready
// (out of its Services' endpoints) until its containers changed.
func syncStatuses(ctx context.Context, client kubernetes.Interface, node string, p *provider, log *slog.Logger) {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "spec.nodeName=" + node
	}))
	inf := f.Core().V1().Pods()
	lister := inf.Lister()
	// Conditions other components write (readiness gates') reach the
	// pod's run at once: its Ready follows them.
	see := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok {
			p.seeConditions(pod)
		}
	}
	inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, n any) { see(n) }})
	f.Start(ctx.Done())
	defer f.Shutdown()
	f.WaitForCacheSync(ctx.Done())
	t := time.NewTicker(statusSyncEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			resyncStatuses(ctx, client, lister, p, log)
		}
	}
}

// resyncStatuses writes the node's status of each pod it runs whose status
// in the API server says otherwise.
func resyncStatuses(ctx context.Context, client kubernetes.Interface, lister corelisters.PodLister, p *provider, log *slog.Logger) {
	pods, _ := p.GetPods(ctx)
	for _, mine := range pods {
		api, err := lister.Pods(mine.Namespace).Get(mine.Name)
		if err != nil || api.UID != mine.UID || api.DeletionTimestamp != nil ||
			api.Status.Phase == corev1.PodSucceeded || api.Status.Phase == corev1.PodFailed || statusAgrees(api.Status, mine.Status) {
			continue
		}
		log.Info("the API server's status of a pod differs from the node's: writing the node's", "pod", podKey(mine.Namespace, mine.Name))
		up := api.DeepCopy()
		up.Status = mine.Status
		// The conditions other components own stay as the API server
		// has them.
		up.Status.Conditions = append(slices.DeleteFunc(slices.Clone(mine.Status.Conditions), func(c corev1.PodCondition) bool { return !kubeletOwns(c.Type) }),
			externalConditions(api.Status.Conditions)...)
		if _, err := client.CoreV1().Pods(up.Namespace).UpdateStatus(ctx, up, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			log.Warn("writing a pod's status", "pod", podKey(mine.Namespace, mine.Name), "err", err)
		}
	}
}

// statusAgrees tells whether the API server's status of a pod (api) says
// what the node's (mine) says: its phase, address, the conditions the
// kubelet owns and containers' states (not times, which the node keeps).
func statusAgrees(api, mine corev1.PodStatus) bool {
	if api.Phase != mine.Phase || api.PodIP != mine.PodIP {
		return false
	}
	cond := map[corev1.PodConditionType]corev1.ConditionStatus{}
	for _, c := range api.Conditions {
		if kubeletOwns(c.Type) {
			cond[c.Type] = c.Status
		}
	}
	n := 0
	for _, c := range mine.Conditions {
		if !kubeletOwns(c.Type) {
			continue
		}
		n++
		if s, ok := cond[c.Type]; !ok || s != c.Status {
			return false
		}
	}
	if n != len(cond) {
		return false
	}
	return containersAgree(api.ContainerStatuses, mine.ContainerStatuses) && containersAgree(api.InitContainerStatuses, mine.InitContainerStatuses)
}

func containersAgree(api, mine []corev1.ContainerStatus) bool {
	if len(api) != len(mine) {
		return false
	}
	state := func(s corev1.ContainerState) string {
		switch {
		case s.Running != nil:
			return "running"
		case s.Terminated != nil:
			return "terminated"
		case s.Waiting != nil:
			return "waiting " + s.Waiting.Reason
		}
		return ""
	}
	for i := range api {
		a, m := api[i], mine[i]
		if a.Name != m.Name || a.Ready != m.Ready || a.RestartCount != m.RestartCount || a.ContainerID != m.ContainerID || state(a.State) != state(m.State) {
			return false
		}
	}
	return true
}
