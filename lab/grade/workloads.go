package grade

import (
	"context"
	"slices"
	"sort"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/svclab/svclab/lab/scenario"
)

// workloads are the objects a scenario's setup made that run Pods, by
// kind, namespace and name: the identities a probe's source is taken
// from, ahead of Pods the learner added (which a grader must not let a
// learner choose).
type workloads struct {
	setup map[workloadKey]bool
	// deployments caches, for one grading, the Deployment (by name) that
	// controls each ReplicaSet (by UID) a source Pod named: every probe
	// check of a grading asks about the same few.
	mu          sync.Mutex
	deployments map[types.UID]string
}

type workloadKey struct{ kind, namespace, name string }

// has tells whether the setup made kind/namespace/name.
func (w *workloads) has(kind, namespace, name string) bool {
	return w.setup[workloadKey{kind, namespace, name}]
}

type workloadsKey struct{}

// withWorkloads notes s's workloads in ctx for the checks of a grading.
func withWorkloads(ctx context.Context, s *scenario.Scenario) context.Context {
	w := &workloads{setup: map[workloadKey]bool{}, deployments: map[types.UID]string{}}
	for _, m := range s.Manifests {
		for _, o := range m.Objects {
			switch o.Typed.(type) {
			case *corev1.Pod, *appsv1.Deployment, *appsv1.StatefulSet, *appsv1.DaemonSet, *appsv1.ReplicaSet:
				w.setup[workloadKey{o.GVK.Kind, o.Namespace, o.Name}] = true
			}
		}
	}
	return context.WithValue(ctx, workloadsKey{}, w)
}

// workloadsOf is the grading's workloads; nil outside a grading (a check
// run on its own), where every Pod counts as the scenario's.
func workloadsOf(ctx context.Context) *workloads {
	w, _ := ctx.Value(workloadsKey{}).(*workloads)
	return w
}

// owns tells whether pod is one of w's: a Pod of the setup (by name: a bare
// Pod can only be fixed by recreating it), or a Pod whose controller is a
// StatefulSet, DaemonSet or ReplicaSet of the setup, or a ReplicaSet whose
// controller is a Deployment of the setup (read from the API: a
// ReplicaSet's name can be imitated, its owner cannot).
func (w *workloads) owns(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod) bool {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return w.has("Pod", pod.Namespace, pod.Name)
	}
	if w.has(ref.Kind, pod.Namespace, ref.Name) {
		return true
	}
	if ref.Kind != "ReplicaSet" {
		return false
	}
	w.mu.Lock()
	dep, known := w.deployments[ref.UID]
	w.mu.Unlock()
	if !known {
		if rs, err := cs.AppsV1().ReplicaSets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{}); err == nil && rs.UID == ref.UID {
			if d := metav1.GetControllerOf(rs); d != nil && d.Kind == "Deployment" {
				dep = d.Name
			}
		} else if err != nil {
			return false // not remembered: the next check asks again
		}
		w.mu.Lock()
		w.deployments[ref.UID] = dep
		w.mu.Unlock()
	}
	return dep != "" && w.has("Deployment", pod.Namespace, dep)
}

// pickSource chooses the Pod a probe starts from among pods (matching its
// selector): one that runs and is not being deleted, the scenario's own
// before any a learner added, Ready before not Ready, the oldest first
// (then by name), so that the choice does not depend on names a learner
// picks.
func pickSource(ctx context.Context, cs kubernetes.Interface, pods []corev1.Pod) *corev1.Pod {
	w := workloadsOf(ctx)
	type candidate struct {
		pod          *corev1.Pod
		owned, ready bool
	}
	var cands []candidate
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		cands = append(cands, candidate{p, w == nil || w.owns(ctx, cs, p), podReady(p)})
	}
	if len(cands) == 0 {
		return nil
	}
	rank := func(c candidate) int {
		r := 0
		if !c.owned {
			r += 2
		}
		if !c.ready {
			r++
		}
		return r
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra < rb
		}
		if !a.pod.CreationTimestamp.Equal(&b.pod.CreationTimestamp) {
			return a.pod.CreationTimestamp.Before(&b.pod.CreationTimestamp)
		}
		return a.pod.Name < b.pod.Name
	})
	return cands[0].pod
}

func podReady(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}
