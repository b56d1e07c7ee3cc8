package grade

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/scenario"
)

// Bounds of a probe during a rollout restart.
const (
	// DisruptiveCheckTimeout bounds a disruptive check as a whole (the
	// Deployment becoming ready first, the rollout, the last round).
	DisruptiveCheckTimeout = 3 * time.Minute
	// rolloutReadyWait is how long the Deployment may take to be ready
	// before the restart (a fix the learner just applied still rolling).
	rolloutReadyWait = 60 * time.Second
	// rolloutWait is how long the restarted rollout may take, the
	// replaced Pods' termination included.
	rolloutWait = 100 * time.Second
	// roundGap is the least time between the starts of two rounds, and
	// statusGap between two reads of the rollout's state.
	roundGap  = 100 * time.Millisecond
	statusGap = 500 * time.Millisecond
)

// probeDuring restarts the rollout of the probe's Deployment, as kubectl
// rollout restart does, and sends the probe's attempts round after round
// (once) until the rollout is complete and the replaced Pods are gone,
// then once more; judge judges every attempt of every round.
func (g *Grader) probeDuring(ctx context.Context, cs kubernetes.Interface, p *scenario.ProbeCheck,
	once func(context.Context) ([]attempt, error), judge func([]attempt) (string, error)) (string, error) {
	r := p.During.RolloutRestart
	ns := r.Namespace
	if ns == "" {
		ns = "default"
	}
	name := ns + "/" + r.Deployment
	d, err := waitRolledOut(ctx, cs, ns, r.Deployment, rolloutReadyWait)
	if err != nil {
		return "", fmt.Errorf("before restarting the Deployment %s: %w", name, err)
	}
	if d == nil {
		return "", failf("the Deployment %s is not ready, so the grader cannot restart it to watch the requests: %s", name, rolloutState(ctx, cs, ns, r.Deployment))
	}
	d, err = cs.AppsV1().Deployments(ns).Patch(ctx, r.Deployment, types.StrategicMergePatchType, cluster.RolloutRestartPatch(time.Now()), metav1.PatchOptions{})
	if err != nil {
		return "", fmt.Errorf("restarting the Deployment %s: %w", name, err)
	}
	g.log().Debug("rollout restarted", "deployment", name, "generation", d.Generation)
	start := time.Now()
	deadline := start.Add(rolloutWait)
	var all []attempt
	rounds := 0
	var lastStatus time.Time
	done := false
	for {
		roundStart := time.Now()
		as, err := once(ctx)
		if err != nil {
			return "", fmt.Errorf("round %d of the probe during the rollout restart of %s: %w", rounds+1, name, err)
		}
		all = append(all, as...)
		rounds++
		if done {
			break
		}
		if time.Since(lastStatus) >= statusGap {
			lastStatus = time.Now()
			cur, err := cs.AppsV1().Deployments(ns).Get(ctx, r.Deployment, metav1.GetOptions{})
			if err != nil {
				return "", fmt.Errorf("watching the rollout of %s: %w", name, err)
			}
			if ok, err := rolledOut(ctx, cs, cur, d.Generation); err != nil {
				return "", fmt.Errorf("watching the rollout of %s: %w", name, err)
			} else if ok {
				// One more round once the old Pods are gone.
				done = true
			} else if time.Now().After(deadline) {
				_, state := cluster.RolledOut(cur)
				return "", failf("the rollout restart of the Deployment %s did not finish within %s (%s); %d requests sent meanwhile, %s",
					name, rolloutWait, state, len(all), outcomeWords(all))
			}
		}
		if wait := roundGap - time.Since(roundStart); wait > 0 {
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(wait):
			}
		}
	}
	what, err := judge(all)
	prefix := fmt.Sprintf("while the grader restarted the Deployment %s (%s, %d rounds): ", name, time.Since(start).Round(100*time.Millisecond), rounds)
	var f *failure
	if errors.As(err, &f) {
		f.detail = prefix + f.detail
		return "", f
	}
	if err != nil {
		return "", err
	}
	return prefix + what, nil
}

// rolloutState says where the Deployment's rollout stands, for a message.
func rolloutState(ctx context.Context, cs kubernetes.Interface, ns, name string) string {
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "it cannot be read"
	}
	_, state := cluster.RolledOut(d)
	return state
}

// waitRolledOut waits up to wait for the Deployment's current rollout to
// be complete and returns it; nil if it is not by then. A Deployment that
// does not exist is a failure of the check.
func waitRolledOut(ctx context.Context, cs kubernetes.Interface, ns, name string, wait time.Duration) (*appsv1.Deployment, error) {
	deadline := time.Now().Add(wait)
	for {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, failf("there is no Deployment %s/%s", ns, name)
		}
		if err != nil {
			return nil, err
		}
		ok, err := rolledOut(ctx, cs, d, d.Generation)
		if err != nil {
			return nil, err
		}
		if ok {
			return d, nil
		}
		if time.Now().After(deadline) {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(statusGap):
		}
	}
}

// rolledOut tells whether the Deployment's rollout up to generation is
// complete (cluster.RolledOut) and no Pod of it is still terminating.
func rolledOut(ctx context.Context, cs kubernetes.Interface, d *appsv1.Deployment, generation int64) (bool, error) {
	if done, _ := cluster.RolledOut(d); !done || d.Status.ObservedGeneration < generation {
		return false, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return false, fmt.Errorf("the Deployment's selector: %w", err)
	}
	pods, err := cs.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return false, err
	}
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp != nil {
			return false, nil
		}
	}
	return true, nil
}
