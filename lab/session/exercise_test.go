package session

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/clustertest"
	"github.com/svclab/svclab/lab/cluster/owner"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/scenario"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestShapeClusterName(t *testing.T) {
	zones := map[string]map[string]string{"worker": {"topology.kubernetes.io/zone": "zone-a"}}
	for _, tc := range []struct {
		shape scenario.ClusterShape
		want  string
	}{
		{scenario.ClusterShape{Nodes: 3}, "lab"},
		{scenario.ClusterShape{Nodes: 3, ProxyMode: "nftables"}, "lab"},
		{scenario.ClusterShape{Nodes: 3, ProxyMode: "iptables"}, "lab"},
		{scenario.ClusterShape{Nodes: 4}, "lab-n4"},
		{scenario.ClusterShape{Nodes: 4, NodeLabels: zones}, "lab-n4-z"},
	} {
		if got := ShapeClusterName("lab", tc.shape); !strings.HasPrefix(got, tc.want) || (tc.shape.NodeLabels == nil && got != tc.want) {
			t.Errorf("%+v: %s, want %s", tc.shape, got, tc.want)
		}
	}
	a := ShapeClusterName("lab", scenario.ClusterShape{Nodes: 4, NodeLabels: zones})
	b := ShapeClusterName("lab", scenario.ClusterShape{Nodes: 4, NodeLabels: map[string]map[string]string{"worker": {"topology.kubernetes.io/zone": "zone-b"}}})
	if a == b {
		t.Errorf("two label sets share the cluster name %s", a)
	}
}

func TestGroupByShape(t *testing.T) {
	sc := func(id string, c scenario.ClusterShape) *scenario.Scenario {
		return &scenario.Scenario{ID: id, Cluster: c}
	}
	groups, err := groupByShape("ci", []*scenario.Scenario{
		sc("a", scenario.ClusterShape{Nodes: 3}),
		sc("b", scenario.ClusterShape{Nodes: 3, ProxyMode: "iptables"}),
		sc("c", scenario.ClusterShape{Nodes: 3, ProxyMode: "nftables"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range groups {
		got = append(got, g.cluster+":"+strings.Join(ids(g.scenarios), ","))
	}
	if strings.Join(got, " ") != "ci:a,b,c" {
		t.Errorf("groups %v", got)
	}
	if _, err := groupByShape("a-very-long-cluster-name", []*scenario.Scenario{sc("x", scenario.ClusterShape{Nodes: 4, NodeLabels: map[string]map[string]string{"worker": {"zone": "a"}}})}); err == nil || !strings.Contains(err.Error(), "use a shorter --cluster") {
		t.Errorf("long name: %v", err)
	}
}

func TestSpreadGroups(t *testing.T) {
	sc := func(id string, c scenario.ClusterShape) *scenario.Scenario {
		return &scenario.Scenario{ID: id, Cluster: c}
	}
	nft, four := scenario.ClusterShape{Nodes: 3}, scenario.ClusterShape{Nodes: 4}
	list := []*scenario.Scenario{sc("a", nft), sc("b", nft), sc("c", four), sc("d", nft), sc("e", nft), sc("f", nft)}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{1, "ci:a,b,d,e,f ci-n4:c"},
		{2, "ci:a,d,f ci-2:b,e ci-n4:c"},
		{3, "ci:a,e ci-2:b,f ci-3:d ci-n4:c"},
		{4, "ci:a,e ci-2:b,f ci-3:d ci-n4:c"},
		{9, "ci:a ci-2:b ci-3:d ci-4:e ci-5:f ci-n4:c"},
	} {
		groups, err := groupByShape("ci", list)
		if err != nil {
			t.Fatal(err)
		}
		if groups, err = spreadGroups(groups, tc.n); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, g := range groups {
			got = append(got, g.cluster+":"+strings.Join(ids(g.scenarios), ","))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%d clusters: %v, want %s", tc.n, got, tc.want)
		}
	}
	groups, _ := groupByShape("a-very-long-cluster-nam", []*scenario.Scenario{sc("x", nft), sc("y", nft)})
	if _, err := spreadGroups(groups, 2); err == nil || !strings.Contains(err.Error(), "use a shorter --cluster") {
		t.Errorf("long name: %v", err)
	}
}

// TestLineWriter: clusters working at once write whole lines, each with
// its cluster's name.
func TestLineWriter(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	a := &lineWriter{mu: &mu, w: &out, prefix: "[a] "}
	b := &lineWriter{mu: &mu, w: &out, prefix: "[b] "}
	fmt.Fprint(a, "one ")
	fmt.Fprint(b, "x\ny")
	fmt.Fprint(a, "two\n\nthree\nfour")
	a.Flush()
	b.Flush()
	if want := "[b] x\n[a] one two\n[a] \n[a] three\n[a] four\n[b] y\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

func TestJudgeBroken(t *testing.T) {
	s := &scenario.Scenario{ID: "x", Checks: []scenario.Check{
		{ID: "probe", Probe: &scenario.ProbeCheck{Protocol: "http", Expect: scenario.ProbeExpect{Outcome: scenario.OutcomeSuccess}}},
		{ID: "kept", RightFix: &scenario.RightFixCheck{}},
	}}
	// A DNS probe that meets a DROP waits its whole timeout, an http one
	// only for the handshake.
	dns := &scenario.Scenario{ID: "y", Checks: []scenario.Check{
		{ID: "probe", Probe: &scenario.ProbeCheck{Protocol: "dns", Expect: scenario.ProbeExpect{Outcome: scenario.OutcomeSuccess}}},
		{ID: "kept", RightFix: &scenario.RightFixCheck{}},
	}}
	for _, tc := range []struct {
		name    string
		results []grade.Result
		dur     time.Duration
		wantErr string
		s       *scenario.Scenario
		// wantDetail, when set, is part of the detail.
		wantDetail string
	}{
		{"broken", []grade.Result{{ID: "probe"}, {ID: "kept", Passed: true}}, time.Second, "", nil, ""},
		{"passes", []grade.Result{{ID: "probe", Passed: true}, {ID: "kept", Passed: true}}, time.Second, "every check passes although the faults are in place", nil, ""},
		{"right fix fails", []grade.Result{{ID: "probe"}, {ID: "kept", Detail: "gone"}}, time.Second, "right-fix rule kept fails before anything was changed: gone", nil, ""},
		{"errs", []grade.Result{{ID: "probe", Error: "timeout"}, {ID: "kept", Passed: true}}, time.Second, "check probe could not run: timeout", nil, ""},
		{"slow", []grade.Result{{ID: "probe"}, {ID: "kept", Passed: true}}, 4500 * time.Millisecond, "", nil, "graded in 4.5s); grading took longer than its budget of 4s"},
		{"dns within budget", []grade.Result{{ID: "probe"}, {ID: "kept", Passed: true}}, 4500 * time.Millisecond, "", dns, ""},
		{"dns slow", []grade.Result{{ID: "probe"}, {ID: "kept", Passed: true}}, 6 * time.Second, "", dns, "longer than its budget of 5s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := s
			if tc.s != nil {
				sc = tc.s
			}
			detail, _, err := judgeBroken(sc, &grade.Report{Results: tc.results, Duration: tc.dur})
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err %v, want %q", err, tc.wantErr)
			}
			if !strings.Contains(detail, tc.wantDetail) {
				t.Errorf("detail %q lacks %q", detail, tc.wantDetail)
			}
		})
	}
}

func TestWriteJUnit(t *testing.T) {
	outcomes := []Outcome{
		{Scenario: "selector-typo", Cluster: "lab", Duration: 42 * time.Second, Steps: []Step{
			{Name: "set up", Passed: true, Detail: "set up and broken", Duration: 6 * time.Second},
			{Name: "wrong fix recreate-service", Passed: false, Detail: "Recreate the Service is not rejected: check service-kept passes", Duration: 3 * time.Second},
			{Name: "solution", Passed: true, Detail: "every check passes", Duration: 4 * time.Second},
		}},
	}
	var b bytes.Buffer
	if err := WriteJUnit(&b, outcomes); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "junit.xml")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -run TestWriteJUnit -update writes it)", err)
	}
	if b.String() != string(want) {
		t.Errorf("JUnit XML differs from %s:\n%s", golden, b.String())
	}
	var sum bytes.Buffer
	PrintSummary(&sum, outcomes)
	if !strings.Contains(sum.String(), " ✗  selector-typo  lab      2/3    42s   wrong fix recreate-service") || !strings.Contains(sum.String(), "0 of 1 scenarios passed in 42s") {
		t.Errorf("summary:\n%s", sum.String())
	}
}

func TestExerciseNeedsAGrader(t *testing.T) {
	_, err := Exercise(context.Background(), ExerciseOptions{IDs: []string{"selector-typo"}})
	if err == nil || !strings.Contains(err.Error(), "pass --solve, --wrong-fixes or both") {
		t.Errorf("%v", err)
	}
	_, err = Exercise(context.Background(), ExerciseOptions{IDs: []string{"nope"}, Solve: true, KubeBin: func(context.Context) (string, error) { return "kubectl", nil }})
	if err == nil || !strings.Contains(err.Error(), `no scenario "nope"`) {
		t.Errorf("%v", err)
	}
	_, err = Exercise(context.Background(), ExerciseOptions{IDs: []string{"selector-typo"}, All: true, Solve: true})
	if err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("%v", err)
	}
}

// The guard puts back what a scenario changed in kube-system and on the
// nodes, and leaves alone what it did not change.
func TestGuardRestores(t *testing.T) {
	ctx := context.Background()
	two := int32(2)
	cs := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"}, Data: map[string]string{"config.conf": "mode: nftables\n"}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"},
			Spec:   appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kube-proxy"}}}}},
			Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 3}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system"},
			Spec: appsv1.DeploymentSpec{Replicas: &two, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "coredns"}}}}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "lab-worker", Labels: map[string]string{"topology.kubernetes.io/zone": "zone-a"}}},
	)
	g, err := recordGuard(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	cm, _ := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	cm.Data["config.conf"] = "mode: iptables\n"
	cs.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{})
	ds, _ := cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
	cs.AppsV1().DaemonSets("kube-system").Update(ctx, ds, metav1.UpdateOptions{})
	n, _ := cs.CoreV1().Nodes().Get(ctx, "lab-worker", metav1.GetOptions{})
	n.Labels = map[string]string{"extra": "x"}
	cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})

	// The fake DaemonSet never becomes ready: restore reports that, after
	// putting everything back.
	err = g.restore(ctx, cs, time.Second)
	if err == nil || !strings.Contains(err.Error(), "DaemonSet kube-system/kube-proxy did not come back") {
		t.Errorf("restore: %v", err)
	}
	cm, _ = cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	ds, _ = cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	n, _ = cs.CoreV1().Nodes().Get(ctx, "lab-worker", metav1.GetOptions{})
	if cm.Data["config.conf"] != "mode: nftables\n" || ds.Spec.Template.Spec.Affinity != nil || n.Labels["topology.kubernetes.io/zone"] != "zone-a" || n.Labels["extra"] != "" {
		t.Errorf("not restored: %v %v %v", cm.Data, ds.Spec.Template.Spec.Affinity, n.Labels)
	}
	d, _ := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if d.Generation != 0 || *d.Spec.Replicas != 2 {
		t.Errorf("CoreDNS was touched: %+v", d.Spec)
	}
}

// A run leaves a cluster somebody holds alone, saying who; given no
// cluster, it makes clusters of its own under a fresh name.
func TestExerciseClaimsItsClusters(t *testing.T) {
	ctx := context.Background()
	owners, err := owner.New(owner.Options{Dir: t.TempDir(), Command: "svclab exercise run"})
	if err != nil {
		t.Fatal(err)
	}
	serve, _ := owner.New(owner.Options{Dir: owners.Dir(), Command: "svclab serve"})
	held, err := serve.Acquire(ctx, owner.Claim{Backend: "embedded", Cluster: "lab"}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	p := clustertest.NewProvider("lab")
	kubeBin := func(context.Context) (string, error) { return "kubectl", nil }
	var out bytes.Buffer
	outcomes, err := Exercise(ctx, ExerciseOptions{Provider: p, IDs: []string{"selector-typo"}, Solve: true, Cluster: "lab",
		Owners: owners, KubeBin: kubeBin, Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	if len(outcomes) != 1 || outcomes[0].Passed() || !strings.Contains(outcomes[0].Steps[0].Detail, "cluster lab is in use by svclab serve") ||
		!strings.Contains(outcomes[0].Steps[0].Detail, "--force") {
		t.Errorf("outcomes on a cluster in use: %+v", outcomes)
	}
	if len(p.Created) != 0 {
		t.Errorf("created %+v", p.Created)
	}
	// Its own: a fresh name, free on the provider.
	names := map[string]bool{}
	for range 20 {
		name, err := ownClusterBase(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(name, "ex-") || len(name) != 8 || cluster.ValidateName(name) != nil || names[name] {
			t.Fatalf("own cluster name %q (seen: %v)", name, names)
		}
		names[name] = true
		// The longest shape suffix still makes a valid name.
		if err := cluster.ValidateName(name + "-n4-ipt-z1234"); err != nil {
			t.Fatal(err)
		}
	}
}

func TestJudgeFlips(t *testing.T) {
	s := &scenario.Scenario{ID: "x", Checks: []scenario.Check{
		{ID: "answers", Probe: &scenario.ProbeCheck{}},
		{ID: "other-kept", API: &scenario.APICheck{}},
		{ID: "kept", RightFix: &scenario.RightFixCheck{}},
	}}
	rep := func(failing ...string) *grade.Report {
		r := &grade.Report{}
		for _, c := range s.Checks {
			r.Results = append(r.Results, grade.Result{ID: c.ID, Passed: !slices.Contains(failing, c.ID)})
		}
		return r
	}
	erring := rep()
	erring.Results[2].Passed, erring.Results[2].Error = false, "timeout"
	for _, tc := range []struct {
		name       string
		steps      []Step
		untried    []scenario.WrongFix
		wantErr    string
		wantDetail string
	}{
		{"every check flips", []Step{
			{Name: "broken", Report: rep("answers")},
			{Name: "wrong fix delete-other", Report: rep("other-kept")},
			{Name: "wrong fix recreate", Report: rep("answers", "kept")},
			{Name: "solution", Report: rep()},
		}, nil, "", "guards against wrong fixes (pass on the broken lab): other-kept"},
		{"a right-fix rule never fails", []Step{
			{Name: "broken", Report: rep("answers")},
			{Name: "wrong fix delete-other", Report: rep("other-kept")},
		}, nil, "right-fix rules never broken, so they grade nothing (no wrong fix breaks them): kept", ""},
		{"failing in the solution does not count", []Step{
			{Name: "broken", Report: rep("answers")},
			{Name: "solution", Report: rep("kept", "other-kept")},
		}, nil, "never broken, so they grade nothing (no wrong fix breaks them): kept", "guards that no wrong fix breaks (they grade nothing yet): other-kept"},
		{"an error is no failure", []Step{
			{Name: "broken", Report: rep("answers", "other-kept")},
			{Name: "wrong fix x", Report: erring},
		}, nil, "never broken, so they grade nothing (no wrong fix breaks them): kept", ""},
		{"a guard no wrong fix breaks is reported", []Step{
			{Name: "broken", Report: rep("answers")},
			{Name: "wrong fix recreate", Report: rep("kept")},
		}, nil, "", "2 checks fail on the broken lab or under a wrong fix; guards that no wrong fix breaks (they grade nothing yet): other-kept"},
		{"a wrong fix not run counts by what it declares", []Step{
			{Name: "broken", Report: rep("answers")},
			{Name: "wrong fix delete-other", Report: rep("other-kept")},
		}, []scenario.WrongFix{{ID: "recreate", RejectedBy: []string{"kept"}}}, "", "3 checks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			detail, _, err := judgeFlips(s, tc.steps, tc.untried)
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err %v, want %q", err, tc.wantErr)
			}
			if !strings.Contains(detail, tc.wantDetail) {
				t.Errorf("detail %q lacks %q", detail, tc.wantDetail)
			}
		})
	}
}

func TestApplyRunOptions(t *testing.T) {
	nft := &scenario.Scenario{ID: "a", WrongFixes: []scenario.WrongFix{{ID: "w1"}}}
	ipt := &scenario.Scenario{ID: "b", Cluster: scenario.ClusterShape{ProxyMode: scenario.ProxyModeIPTables}}
	named := &scenario.Scenario{ID: "c", Cluster: scenario.ClusterShape{ProxyMode: scenario.ProxyModeNFTables}}
	var out bytes.Buffer
	got, err := applyRunOptions(ExerciseOptions{Out: &out, ProxyMode: scenario.ProxyModeIPTables, Attempts: map[string]scenario.Attempts{
		"a": {WrongFixes: []scenario.WrongFix{{ID: "w2"}}},
		"z": {WrongFixes: []scenario.WrongFix{{ID: "w3"}}},
	}}, []*scenario.Scenario{nft, ipt, named})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "a" || got[1].ID != "b" {
		t.Fatalf("scenarios %v", ids(got))
	}
	if got[0].Cluster.Mode() != scenario.ProxyModeIPTables || nft.Cluster.Mode() != scenario.ProxyModeNFTables {
		t.Errorf("modes: run %s, catalog's %s", got[0].Cluster.Mode(), nft.Cluster.Mode())
	}
	if len(got[0].WrongFixes) != 2 || len(nft.WrongFixes) != 1 {
		t.Errorf("wrong fixes: run %d, catalog's %d", len(got[0].WrongFixes), len(nft.WrongFixes))
	}
	for _, want := range []string{"– c: skipped, written for nftables mode", "the extra attempts for z are not tried: z is not in this run"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := applyRunOptions(ExerciseOptions{Out: &out, ProxyMode: "ipvs"}, []*scenario.Scenario{nft}); err == nil || !strings.Contains(err.Error(), `proxy mode "ipvs"`) {
		t.Errorf("ipvs: %v", err)
	}
	if _, err := applyRunOptions(ExerciseOptions{Out: &out, ProxyMode: "nftables"}, []*scenario.Scenario{ipt}); err == nil || !strings.Contains(err.Error(), "no scenario left") {
		t.Errorf("nothing left: %v", err)
	}
}
