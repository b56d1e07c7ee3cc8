package grade

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/clustertest"
	"github.com/svclab/svclab/lab/scenario"
)

// rolloutCheck is a check whose probe runs during a rollout restart of
// shop/web.
func rolloutCheck() scenario.Check {
	return scenario.Check{ID: "no-drops", Description: "No request fails during a rollout restart", Weight: 1,
		Probe: &scenario.ProbeCheck{From: scenario.ProbeSource{Node: "worker"}, Protocol: "tcp", Attempts: 2,
			Target: scenario.ProbeTarget{Host: "10.96.0.50", Port: 80},
			During: &scenario.ProbeDuring{RolloutRestart: &scenario.RolloutRestart{Deployment: "web", Namespace: "shop"}},
			Expect: scenario.ProbeExpect{Outcome: scenario.OutcomeSuccess}}}
}

func webDeployment() *appsv1.Deployment {
	two := int32(2)
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Generation: 1},
		Spec:   appsv1.DeploymentSpec{Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2, ReadyReplicas: 2}}
}

// TestProbeDuringRollout: the grader restarts the Deployment as kubectl
// rollout restart does, probes round after round until the rollout is
// complete, and judges every attempt: one refused attempt in the middle of
// the rollout fails the check; none, and it passes.
func TestProbeDuringRollout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		failMid bool
		want    string
	}{
		{"no drops", false, "while the grader restarted the Deployment shop/web"},
		{"drops", true, "were refused; all of them should succeed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rolling, restarted atomic.Bool
			var rounds atomic.Int32
			g := newGrader(func(node string, cmd []string) (string, error) {
				n := rounds.Add(1)
				rc := 0
				if tc.failMid && rolling.Load() && n%3 == 0 {
					rc = 1
				}
				out := ""
				for i := 1; i <= 2; i++ {
					if rc == 0 {
						out += fmt.Sprintf("@@ %d 0 \n", i)
					} else {
						out += fmt.Sprintf("@@ %d 1 bash: connect: Connection refused\n", i)
					}
				}
				return out, nil
			}, nil, webDeployment())
			fc := g.Cluster.(*clustertest.Cluster)
			gvr := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
			fc.Clientset().PrependReactor("patch", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
				p := a.(k8stesting.PatchAction)
				if !strings.Contains(string(p.GetPatch()), cluster.RestartedAtAnnotation) {
					t.Errorf("patch %s does not set %s", p.GetPatch(), cluster.RestartedAtAnnotation)
				}
				obj, err := fc.Clientset().Tracker().Get(gvr, "shop", "web")
				if err != nil {
					return true, nil, err
				}
				d := obj.(*appsv1.Deployment).DeepCopy()
				d.Generation++
				d.Status.UpdatedReplicas = 0
				if err := fc.Clientset().Tracker().Update(gvr, d, "shop"); err != nil {
					return true, nil, err
				}
				restarted.Store(true)
				rolling.Store(true)
				go func() {
					time.Sleep(1500 * time.Millisecond)
					d := d.DeepCopy()
					d.Status.ObservedGeneration, d.Status.UpdatedReplicas = d.Generation, 2
					fc.Clientset().Tracker().Update(gvr, d, "shop")
					rolling.Store(false)
				}()
				return true, d, nil
			})
			c := rolloutCheck()
			res := g.Check(context.Background(), &c, nil)
			if !restarted.Load() {
				t.Fatal("the Deployment was not restarted")
			}
			if res.Passed != !tc.failMid || !strings.Contains(res.Detail, tc.want) || !strings.Contains(res.Detail, "while the grader restarted") {
				t.Errorf("passed %v: %s (error %s)", res.Passed, res.Detail, res.Error)
			}
			if n := rounds.Load(); n < 5 {
				t.Errorf("%d rounds in 1.5s of rollout, want one every %s", n, roundGap)
			}
		})
	}
}

// TestProbeDuringErrors: a missing Deployment fails the check with a
// message; a passive grade (a background evaluation) leaves the
// Deployment alone and reports the check as not checked yet.
func TestProbeDuringErrors(t *testing.T) {
	g := newGrader(func(string, []string) (string, error) { return "@@ 1 0 \n@@ 2 0 \n", nil }, nil)
	c := rolloutCheck()
	if res := g.Check(context.Background(), &c, nil); res.Passed || res.Error != "" || !strings.Contains(res.Detail, "there is no Deployment shop/web") {
		t.Errorf("missing Deployment: %+v", res)
	}

	g = newGrader(func(string, []string) (string, error) { return "@@ 1 0 \n@@ 2 0 \n", nil }, nil, webDeployment())
	g.Cluster.(*clustertest.Cluster).Clientset().PrependReactor("patch", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		t.Error("a passive grade restarted the Deployment")
		return true, nil, nil
	})
	c = rolloutCheck()
	c.UnlocksHint = 2
	s := &scenario.Scenario{ID: "x", Checks: []scenario.Check{c}}
	rep := g.Grade(Passive(context.Background()), s, nil)
	if r := rep.Results[0]; r.Passed || !r.NotChecked || !strings.Contains(r.Detail, "runs only when you ask for a grade") || r.ID != "no-drops" {
		t.Errorf("passive grade: %+v", r)
	}
	// Not checked is no verdict: the scenario is not passed, but no hint
	// is unlocked by a check that did not run.
	if rep.Passed || len(rep.UnlockedHints) != 0 {
		t.Errorf("passive grade: passed %v, unlocked hints %v", rep.Passed, rep.UnlockedHints)
	}
}
