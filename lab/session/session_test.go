package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/clustertest"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/scenarios"
)

func TestCheckShape(t *testing.T) {
	f := clustertest.NewCluster("lab", clustertest.WithNodeLabels(map[string]map[string]string{"lab-worker": {"topology.kubernetes.io/zone": "a"}}))
	ctx := context.Background()
	for _, tc := range []struct {
		shape scenario.ClusterShape
		want  string
	}{
		{scenario.ClusterShape{Nodes: 3}, ""},
		{scenario.ClusterShape{Nodes: 2}, ""},
		{scenario.ClusterShape{Nodes: 3, NodeLabels: map[string]map[string]string{"worker": {"topology.kubernetes.io/zone": "a"}}}, ""},
		{scenario.ClusterShape{Nodes: 4}, "cluster lab has 3 nodes; the scenario needs 4 (control-plane, worker, worker2, worker3)"},
		{scenario.ClusterShape{Nodes: 3, NodeLabels: map[string]map[string]string{"worker2": {"topology.kubernetes.io/zone": "b"}}},
			"node lab-worker2 of cluster lab lacks the label topology.kubernetes.io/zone=b"},
	} {
		err := checkShape(ctx, f, tc.shape)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.shape, err, tc.want)
		}
	}
}

func TestEnsureCluster(t *testing.T) {
	ctx := context.Background()
	p := clustertest.NewProvider("lab")
	shape := scenario.ClusterShape{Nodes: 3, NodeLabels: map[string]map[string]string{"worker": {"zone": "a"}}}
	if _, created, err := EnsureCluster(ctx, p, "lab", scenario.ClusterShape{Nodes: 3}, nil); err != nil || created {
		t.Errorf("existing cluster: created=%v %v", created, err)
	}
	if _, _, err := EnsureCluster(ctx, p, "lab", shape, nil); err == nil || !strings.Contains(err.Error(), "lacks the label zone=a") {
		t.Errorf("existing cluster of the wrong shape: %v", err)
	}
	c, created, err := EnsureCluster(ctx, p, "ex", shape, nil)
	if err != nil || !created || c.Name() != "ex" {
		t.Fatalf("new cluster: %v %v %v", c, created, err)
	}
	if o := p.Options(p.Created[0]); o.Workers != 2 || o.NodeLabels["ex-worker"]["zone"] != "a" || len(o.NodeLabels) != 1 {
		t.Errorf("create options %+v", o)
	}
	// A cluster whose node does not answer is created again (Start over
	// on a dead lab brings it back), and the progress says why.
	p.Add(clustertest.NewCluster("lab", clustertest.WithAnswer("lab-worker2", "true", "", errors.New("exit status 2"))))
	var steps strings.Builder
	c, created, err = EnsureCluster(ctx, p, "lab", scenario.ClusterShape{Nodes: 3}, cluster.NewTextProgress(&steps))
	if err != nil || !created || c.Name() != "lab" || len(p.Deleted) != 1 || p.Deleted[0] != "lab" {
		t.Errorf("dead cluster: created=%v deleted %v: %v", created, p.Deleted, err)
	}
	if !strings.Contains(steps.String(), "Cluster lab does not answer (node lab-worker2: exit status 2): deleting it to create it again") {
		t.Errorf("progress: %s", steps.String())
	}
}

func loadScenario(t *testing.T, id string) *scenario.Scenario {
	t.Helper()
	cat, problems := scenarios.Load(scenario.Options{})
	if err := problems.Err(); err != nil {
		t.Fatal(err)
	}
	return cat.Get(id)
}

func TestSettle(t *testing.T) {
	s := loadScenario(t, "selector-typo")
	two := int32(2)
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Generation: 2},
		Spec:   appsv1.DeploymentSpec{Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 2, AvailableReplicas: 2}}
	now := metav1.Now()
	old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-old", Namespace: "shop", DeletionTimestamp: &now, Finalizers: []string{"x"}}}
	client := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: "shop"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	cs := fake.NewClientset(deploy, old, client)
	ctx := context.Background()
	err := settle(ctx, cs, s, true, 1200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "Deployment shop/web: 2 of 2 replicas updated, 3 in all") {
		t.Errorf("rolling out: %v", err)
	}
	if _, err := cs.CoreV1().Pods("shop").Get(ctx, "web-old", metav1.GetOptions{}); err == nil {
		t.Error("the terminating Pod was not deleted")
	}
	deploy.Status.Replicas = 2
	if _, err := cs.AppsV1().Deployments("shop").UpdateStatus(ctx, deploy, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := settle(ctx, cs, s, true, 5*time.Second); err != nil {
		t.Errorf("settled: %v", err)
	}
	client.Status.Conditions[0].Status = corev1.ConditionFalse
	client.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "client", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
	if _, err := cs.CoreV1().Pods("shop").UpdateStatus(ctx, client, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := settle(ctx, cs, s, false, 2*time.Second); err != nil {
		t.Errorf("without readiness: %v", err)
	}
	if err := settle(ctx, cs, s, true, 700*time.Millisecond); err == nil || !strings.Contains(err.Error(), "Pod shop/client is Running (client: ImagePullBackOff)") {
		t.Errorf("a Pod not ready: %v", err)
	}
}

func TestPrintReport(t *testing.T) {
	s := loadScenario(t, "selector-typo")
	rep := &grade.Report{Scenario: s.ID, Score: 100 * 7.0 / 9, UnlockedHints: []int{2}, Duration: 1234 * time.Millisecond,
		Results: []grade.Result{
			{ID: "slice-has-ready-endpoints", Weight: 2, Passed: true, Message: "ok"},
			{ID: "selector-matches-pods", Weight: 1, Passed: false, Message: "The Service still selects app=wbe", Detail: `{.spec.selector.app} is "wbe"`},
			{ID: "clusterip-answers", Weight: 6, Passed: true, Message: "answers"},
		}}
	var b bytes.Buffer
	PrintReport(&b, s, rep)
	out := b.String()
	for _, want := range []string{
		" ✓  slice-has-ready-endpoints  2  ok\n",
		" ✗  selector-matches-pods      1  The Service still selects app=wbe\n",
		`{.spec.selector.app} is "wbe"`,
		"Score: 89% (8 of 9 points) — not yet (graded in 1.2s)",
		"Hint 2:\n  An EndpointSlice lists the Pods",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestRunUnknownScenario(t *testing.T) {
	var out bytes.Buffer
	err := Run(context.Background(), RunOptions{ID: "nope", Cluster: "lab", Out: &out})
	if err == nil || !strings.Contains(err.Error(), `no scenario "nope"; the scenarios are `) || !strings.Contains(err.Error(), "selector-typo") {
		t.Errorf("%v", err)
	}
}

// A scenario for embedded clusters only is refused on a kind cluster with
// its reason, before anything is applied; other scenarios and embedded
// clusters are let through.
func TestCheckBackend(t *testing.T) {
	kind := clustertest.NewCluster("lab", clustertest.WithBackend("kind"))
	only := &scenario.Scenario{ID: "np", Cluster: scenario.ClusterShape{Nodes: 3, EmbeddedOnly: "kindnet enforces no NetworkPolicy"}}
	both := &scenario.Scenario{ID: "sel", Cluster: scenario.ClusterShape{Nodes: 3}}
	for _, tc := range []struct {
		s       *scenario.Scenario
		c       cluster.Cluster
		wantErr bool
	}{
		{only, clustertest.NewCluster("lab"), false},
		{only, kind, true},
		{both, kind, false},
	} {
		err := CheckBackend(tc.s, tc.c)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s on %s: %v", tc.s.ID, Backend(tc.c), err)
		}
		if err != nil && (!errors.Is(err, ErrWrongBackend) || !strings.Contains(err.Error(), "kindnet enforces no NetworkPolicy")) {
			t.Errorf("error does not say why: %v", err)
		}
	}
	if _, err := Start(context.Background(), only, kind, Options{}); !errors.Is(err, ErrWrongBackend) {
		t.Errorf("Start on kind = %v", err)
	}
}

// What settle says on timeout comes from a round that could ask: near the
// deadline the client's rate limiter refuses requests it cannot finish.
func TestSettleSaysWhatIsPendingNotTheRateLimiter(t *testing.T) {
	s := loadScenario(t, "selector-typo")
	two := int32(2)
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Generation: 2},
		Spec:   appsv1.DeploymentSpec{Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 1, AvailableReplicas: 1}}
	cs := fake.NewClientset(deploy)
	timeout := 3 * time.Second
	deadline := time.Now().Add(timeout)
	cs.PrependReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if time.Until(deadline) < 500*time.Millisecond {
			return true, nil, errors.New("client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline")
		}
		return false, nil, nil
	})
	err := settle(context.Background(), cs, s, true, timeout)
	if err == nil || !strings.Contains(err.Error(), "Deployment shop/web: 1 of 2 replicas updated") || strings.Contains(err.Error(), "rate limiter") {
		t.Errorf("settle: %v", err)
	}
}

// A session's state keeps the life of the cluster it was set up on, so a
// process that resumes it can tell when the cluster was created again
// since (lab/attempt checks that).
func TestStateKeepsGeneration(t *testing.T) {
	c := clustertest.NewCluster("lab")
	gen, err := cluster.Generation(c)
	if err != nil {
		t.Fatal(err)
	}
	ses := &Session{Scenario: &scenario.Scenario{ID: "sel"}, Cluster: c, Baseline: &grade.Baseline{}, generation: gen}
	state, err := ses.State()
	if err != nil {
		t.Fatal(err)
	}
	var st savedState
	if err := json.Unmarshal(state, &st); err != nil {
		t.Fatal(err)
	}
	if st.Generation != gen || st.Cluster != "lab" {
		t.Errorf("saved %+v, want generation %q", st, gen)
	}
}

// A scenario that names no proxy mode runs in the cluster's; one written
// for a mode switches a cluster of the other.
func TestInMode(t *testing.T) {
	for _, tc := range []struct {
		scenario, cluster string
		runs, switchTo    string
	}{
		{"", "nftables", "nftables", ""},
		{"", "iptables", "iptables", ""},
		{"nftables", "nftables", "nftables", ""},
		{"iptables", "iptables", "iptables", ""},
		{"iptables", "nftables", "iptables", "iptables"},
		{"nftables", "iptables", "nftables", "nftables"},
		// kube-proxy in a mode no scenario runs in (ipvs falls back).
		{"", "ipvs", "nftables", "nftables"},
	} {
		s := &scenario.Scenario{ID: "x", Cluster: scenario.ClusterShape{Nodes: 3, ProxyMode: tc.scenario}}
		run, switchTo := inMode(s, tc.cluster)
		if run.Cluster.Mode() != tc.runs || switchTo != tc.switchTo {
			t.Errorf("scenario for %q on a cluster in %s: runs in %s, switches to %q; want %s, %q", tc.scenario, tc.cluster, run.Cluster.Mode(), switchTo, tc.runs, tc.switchTo)
		}
		if s.Cluster.ProxyMode != tc.scenario {
			t.Errorf("the catalog's scenario was changed: %q", s.Cluster.ProxyMode)
		}
	}
}
