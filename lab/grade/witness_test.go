package grade

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/svclab/svclab/lab/cluster/clustertest"
	"github.com/svclab/svclab/lab/scenario"
)

// policyCluster is a fake cluster whose nodes' NetworkPolicy agents are
// asked to catch up (cluster.PolicyCluster).
type policyCluster struct {
	*clustertest.Cluster
	mu    sync.Mutex
	waits [][2]string
}

func (c *policyCluster) WaitPolicy(_ context.Context, pods, namespaces string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, [2]string{pods, namespaces})
	return nil
}

// A witness source is a Pod the grader makes for the check alone: exactly
// the labels the check gives (nothing that marks it as the grader's), in
// a new namespace when asked, enforced by every node's NetworkPolicy
// agent before the probe starts from it, and gone afterwards.
func TestWitnessSource(t *testing.T) {
	var probed []string
	exec := podExecFunc(func(ns, pod string, cmd []string) (string, error) {
		probed = append(probed, ns+"/"+pod)
		var b strings.Builder
		for i := 1; i <= 2; i++ {
			fmt.Fprintf(&b, "@@ %d 28 curl: (28) Connection timed out after 1001 milliseconds\n", i)
		}
		return b.String(), nil
	})
	g := newGrader(nil, exec, shop("web")...)
	fc := g.Cluster.(*clustertest.Cluster)
	pc := &policyCluster{Cluster: fc}
	g.Cluster = pc
	var made []*corev1.Pod
	rv := 100
	// The fake API server runs what it is given at once, with a version.
	fc.Clientset().PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject()
		rv++
		obj.(metav1.Object).SetResourceVersion(fmt.Sprint(rv))
		if p, ok := obj.(*corev1.Pod); ok {
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.2.77"}
			made = append(made, p.DeepCopy())
		}
		return false, nil, nil
	})
	check := &scenario.ProbeCheck{
		From: scenario.ProbeSource{Witness: &scenario.Witness{Labels: map[string]string{"app": "client"}, RandomLabels: []string{"tier"},
			NamespaceLabels: map[string]string{"team": "tools"}}},
		Protocol: "http", Target: scenario.ProbeTarget{Service: "web", Namespace: "shop", Port: 80},
		Attempts: 2, Expect: scenario.ProbeExpect{Outcome: scenario.OutcomeTimeout},
	}
	detail, err := g.probe(context.Background(), check)
	if err != nil {
		t.Fatalf("probe: %v (%s)", err, detail)
	}
	if len(made) != 1 {
		t.Fatalf("made %d Pods", len(made))
	}
	pod := made[0]
	if !strings.HasPrefix(pod.Name, witnessPrefix) || pod.Namespace != pod.Name || len(pod.Labels) != 2 || pod.Labels["app"] != "client" ||
		!strings.HasPrefix(pod.Labels["tier"], "w-") || len(pod.Labels["tier"]) != 10 {
		t.Errorf("witness %s/%s labels %v", pod.Namespace, pod.Name, pod.Labels)
	}
	if len(probed) != 1 || probed[0] != pod.Namespace+"/"+pod.Name {
		t.Errorf("probed from %v", probed)
	}
	if want := [][2]string{{"102", "101"}}; fmt.Sprint(pc.waits) != fmt.Sprint(want) {
		t.Errorf("waited for the policy agents at %v, want %v", pc.waits, want)
	}
	if !strings.Contains(detail, "a new Pod labelled app=client,tier=w-") || !strings.Contains(detail, "in a new namespace") {
		t.Errorf("detail %q", detail)
	}
	cs := fc.Clientset()
	if _, err := cs.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{}); err == nil {
		t.Error("the witness Pod is still there")
	}
	if _, err := cs.CoreV1().Namespaces().Get(context.Background(), pod.Namespace, metav1.GetOptions{}); err == nil {
		t.Error("the witness namespace is still there")
	}
}

// A witness whose labels admission changed stands for another class: the
// check errs rather than judge it, and the Pod is removed.
func TestWitnessLabelsChanged(t *testing.T) {
	g := newGrader(nil, nil, shop("web")...)
	fc := g.Cluster.(*clustertest.Cluster)
	fc.Clientset().PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		p.Labels["excluded"] = "yes"
		return false, nil, nil
	})
	check := &scenario.ProbeCheck{
		From:     scenario.ProbeSource{Namespace: "shop", Witness: &scenario.Witness{Labels: map[string]string{"app": "batch"}}},
		Protocol: "http", Target: scenario.ProbeTarget{Service: "web", Namespace: "shop", Port: 80},
		Expect: scenario.ProbeExpect{Outcome: scenario.OutcomeTimeout},
	}
	_, err := g.probe(context.Background(), check)
	if err == nil || !strings.Contains(err.Error(), "changed the labels of the grader's witness Pod") {
		t.Fatalf("err %v", err)
	}
	pods, _ := fc.Clientset().CoreV1().Pods("shop").List(context.Background(), metav1.ListOptions{})
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, witnessPrefix) {
			t.Errorf("witness %s left behind", p.Name)
		}
	}
}
