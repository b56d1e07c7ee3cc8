package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/proxierctl"
)

// programmedTimeout bounds waitProgrammed: a proxier that has not caught
// up by then is left as it is (the grader sees what a learner would).
const programmedTimeout = 20 * time.Second

// proxySelector is kube-proxy's informer selector: the Services and
// EndpointSlices a proxier programs.
const proxySelector = "!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless"

// waitProgrammed waits until the dataplane follows the API: the
// EndpointSlices follow the Pods (slicesFollowPods), and the proxier of
// each of nodes has programmed every Service and EndpointSlice change the
// API holds (it says so at events.ProgrammedPath), or is held back by a
// fault (which it says there, or, in a lab, where faults are covert, at
// its guarded /faults). A proxier that cannot say (not svclab's: a learner may run
// another) gets the two seconds its minimum sync interval needs. A fixed
// pause instead, as before, let a grading after set-up see a Pod that had
// just been deleted still serving on a node.
func waitProgrammed(ctx context.Context, c cluster.Cluster, cs kubernetes.Interface, nodes []string) error {
	wctx, cancel := context.WithTimeout(ctx, programmedTimeout)
	defer cancel()
	var why string
	err := wait.PollUntilContextCancel(wctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		why = slicesFollowPods(ctx, cs)
		return why == "", nil
	})
	if err == nil {
		var target uint64
		target, err = apiRevision(wctx, cs)
		for _, node := range nodes {
			if err != nil {
				break
			}
			askedFaults := false
			err = wait.PollUntilContextCancel(wctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				rv, held, err := proxierctl.Programmed(ctx, c, node)
				if err != nil {
					why = err.Error()
					return false, errUnknown
				}
				if rv >= target || held != "" {
					return true, nil
				}
				why = fmt.Sprintf("the proxier on node %s has programmed the API up to resourceVersion %d of %d", node, rv, target)
				// A lab's proxier keeps its faults covert: whether one
				// holds its syncs back is svclab's to ask, once.
				if !askedFaults {
					askedFaults = true
					if st, err := proxierctl.Faults(ctx, c, node); err == nil && (st.StopSyncing || st.SyncInterval() > 0) {
						return true, nil
					}
				}
				return false, nil
			})
		}
	}
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, errUnknown):
		slog.DebugContext(ctx, "a proxier does not say how far its rules follow the API; pausing for its minimum sync interval", "why", why)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
			return nil
		}
	default:
		slog.DebugContext(ctx, "the dataplane has not caught up with the API; going on", "timeout", programmedTimeout, "waiting for", why, "err", err)
		return nil
	}
}

var errUnknown = errors.New("no answer")

// apiRevision is the highest resourceVersion among the Services and
// EndpointSlices the proxiers program.
func apiRevision(ctx context.Context, cs kubernetes.Interface) (uint64, error) {
	opts := metav1.ListOptions{LabelSelector: proxySelector}
	svcs, err := cs.CoreV1().Services("").List(ctx, opts)
	if err != nil {
		return 0, fmt.Errorf("listing Services: %w", err)
	}
	slices, err := cs.DiscoveryV1().EndpointSlices("").List(ctx, opts)
	if err != nil {
		return 0, fmt.Errorf("listing EndpointSlices: %w", err)
	}
	var top uint64
	see := func(rv string) {
		if n, err := strconv.ParseUint(rv, 10, 64); err == nil && n > top {
			top = n
		}
	}
	for i := range svcs.Items {
		see(svcs.Items[i].ResourceVersion)
	}
	for i := range slices.Items {
		see(slices.Items[i].ResourceVersion)
	}
	return top, nil
}

// slicesFollowPods says what the EndpointSlice controller has yet to
// write ("" when nothing): an endpoint of a Pod that is gone, or a ready
// Pod a Service selects missing from the Service's slices.
func slicesFollowPods(ctx context.Context, cs kubernetes.Interface) string {
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Sprintf("listing Pods: %v", err)
	}
	svcs, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Sprintf("listing Services: %v", err)
	}
	slices, err := cs.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{
		LabelSelector: discovery.LabelManagedBy + "=endpointslice-controller.k8s.io"})
	if err != nil {
		return fmt.Sprintf("listing EndpointSlices: %v", err)
	}
	return sliceLag(pods.Items, svcs.Items, slices.Items)
}

// sliceLag is slicesFollowPods on listed objects.
func sliceLag(pods []corev1.Pod, svcs []corev1.Service, slices []discovery.EndpointSlice) string {
	live := map[types.UID]bool{}
	for i := range pods {
		live[pods[i].UID] = true
	}
	listed := map[types.NamespacedName]map[types.UID]bool{} // by Service
	for _, sl := range slices {
		svc := types.NamespacedName{Namespace: sl.Namespace, Name: sl.Labels[discovery.LabelServiceName]}
		if listed[svc] == nil {
			listed[svc] = map[types.UID]bool{}
		}
		for _, ep := range sl.Endpoints {
			ref := ep.TargetRef
			if ref == nil || ref.Kind != "Pod" || ref.UID == "" {
				continue
			}
			if !live[ref.UID] {
				return fmt.Sprintf("EndpointSlice %s/%s still lists Pod %s, which is gone", sl.Namespace, sl.Name, ref.Name)
			}
			listed[svc][ref.UID] = true
		}
	}
	for i := range svcs {
		svc := &svcs[i]
		if len(svc.Spec.Selector) == 0 || svc.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		for j := range pods {
			p := &pods[j]
			if p.Namespace != svc.Namespace || p.DeletionTimestamp != nil || p.Status.PodIP == "" || !podReady(p) || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			if !listed[types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}][p.UID] {
				return fmt.Sprintf("the EndpointSlices of Service %s/%s do not list its ready Pod %s yet", svc.Namespace, svc.Name, p.Name)
			}
		}
	}
	return ""
}
