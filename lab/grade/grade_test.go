package grade

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/clustertest"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/scenarios"
)

// podExecFunc is a PodExecutor.
type podExecFunc func(ns, pod string, cmd []string) (string, error)

func (f podExecFunc) Exec(_ context.Context, ns, pod, _ string, cmd []string, stdout, _ io.Writer) error {
	out, err := f(ns, pod, cmd)
	io.WriteString(stdout, out)
	return err
}

// newGrader grades the cluster "lab" holding objs, whose node commands
// nodeExec answers (nil: none may run).
func newGrader(nodeExec func(string, []string) (string, error), podExec podExecFunc, objs ...runtime.Object) *Grader {
	if nodeExec == nil {
		nodeExec = func(node string, cmd []string) (string, error) {
			return "", fmt.Errorf("unexpected command on %s: %v", node, cmd)
		}
	}
	// The proxier's endpoints are asked with curl (cluster.NodeHTTP):
	// the tests answer a GET of the URL, and the answer gets its status.
	respond := func(node string, cmd []string) (string, error) {
		if len(cmd) == 0 || cmd[0] != "curl" {
			return nodeExec(node, cmd)
		}
		out, err := nodeExec(node, []string{"curl", "-sS", "-f", "-m", "5", cmd[len(cmd)-1]})
		if err != nil {
			return out, err
		}
		return out + cluster.CurlStatusMark + "200", nil
	}
	fc := clustertest.NewCluster("lab", clustertest.WithObjects(objs...), clustertest.WithRespond(respond))
	return &Grader{
		Cluster: fc,
		Objects: &DynamicObjects{Client: dynamicfake.NewSimpleDynamicClient(scheme.Scheme, objs...), Mapper: testrestmapper.TestOnlyStaticRESTMapper(scheme.Scheme)},
		PodExec: podExec,
	}
}

func boolp(b bool) *bool { return &b }

// webRS makes a Pod one of the web Deployment's ReplicaSet's.
var webRS = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-6d4b", UID: "rs-uid", Controller: boolp(true)}}

// shop is the selector-typo scenario's namespace: the Service web (with
// the given selector value), its EndpointSlice, two web Pods and a client.
func shop(selector string, endpoints ...string) []runtime.Object {
	objs := []runtime.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "svc-uid"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": selector}, ClusterIP: "10.96.0.50",
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: "shop"},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "client"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.9"}},
		// The web Deployment's Pods, of its ReplicaSet.
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-6d4b", Namespace: "shop", UID: "rs-uid",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "Deployment-uid", Controller: boolp(true)}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-a", Namespace: "shop", Labels: map[string]string{"app": "web"}, OwnerReferences: webRS}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-b", Namespace: "shop", Labels: map[string]string{"app": "web"}, OwnerReferences: webRS}},
	}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-x", Namespace: "shop", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}}
	for _, ip := range endpoints {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: boolp(true)}})
	}
	objs = append(objs, slice)
	deploy := scenarioObject("selector-typo", "Deployment", "web")
	return append(objs, deploy)
}

// scenarioObject returns an object that a scenario's setup creates.
func scenarioObject(id, kind, name string) runtime.Object {
	cat, problems := scenarios.Load(scenario.Options{})
	if err := problems.Err(); err != nil {
		panic(err)
	}
	for _, m := range cat.Get(id).Manifests {
		for _, o := range m.Objects {
			if o.GVK.Kind == kind && o.Name == name {
				obj := o.Typed.DeepCopyObject()
				obj.(metav1.Object).SetUID(types.UID(kind + "-uid"))
				return obj
			}
		}
	}
	panic("no " + kind + " " + name)
}

func loadScenario(t testing.TB, id string) *scenario.Scenario {
	t.Helper()
	cat, problems := scenarios.Load(scenario.Options{})
	if err := problems.Err(); err != nil {
		t.Fatal(err)
	}
	s := cat.Get(id)
	if s == nil {
		t.Fatalf("no scenario %s", id)
	}
	return s
}

func readTestdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// nftTable renders a minimal kube-proxy table with web either in
// service-ips or in no-endpoint-services.
func nftTable(withEndpoints bool) string {
	if withEndpoints {
		return "table ip kube-proxy {\n\tmap no-endpoint-services {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t}\n" +
			"\tmap service-ips {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t\telements = { 10.96.0.10 . udp . 53 : goto service-A-kube-system/kube-dns/udp/dns,\n\t\t\t     10.96.0.50 . tcp . 80 : goto service-B-shop/web/tcp/http }\n\t}\n}\n"
	}
	return "table ip kube-proxy {\n\tmap no-endpoint-services {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t\telements = { 10.96.0.50 . tcp . 80 comment \"shop/web:http\" : goto reject-chain }\n\t}\n" +
		"\tmap service-ips {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t\telements = { 10.96.0.10 . udp . 53 : goto service-A-kube-system/kube-dns/udp/dns }\n\t}\n}\n"
}

// The selector-typo scenario graded against a fake cluster in its broken
// and its fixed state.
func TestGradeSelectorTypo(t *testing.T) {
	s := loadScenario(t, "selector-typo")
	nodes := func(fixed bool) func(string, []string) (string, error) {
		return func(_ string, cmd []string) (string, error) {
			switch strings.Join(cmd, " ") {
			case "curl -sS -f -m 5 http://127.0.0.1:10249/proxyMode":
				return "nftables", nil
			case "nft list table ip kube-proxy":
				return nftTable(fixed), nil
			}
			return "", fmt.Errorf("unexpected %v", cmd)
		}
	}
	probe := func(fixed bool) podExecFunc {
		return func(ns, pod string, cmd []string) (string, error) {
			if ns != "shop" || pod != "client" || !strings.Contains(cmd[2], "http://$H:$P/hostname") || !strings.Contains(cmd[2], "H='10.96.0.50'") {
				return "", fmt.Errorf("unexpected probe %s/%s %q", ns, pod, cmd)
			}
			var b strings.Builder
			for i := 1; i <= 20; i++ {
				switch {
				case !fixed:
					fmt.Fprintf(&b, "@@ %d 7 curl: (7) Failed to connect to 10.96.0.50 port 80 after 0 ms: Connection refused\n", i)
				case i%2 == 0:
					fmt.Fprintf(&b, "@@ %d 0 web-a\n", i)
				default:
					fmt.Fprintf(&b, "@@ %d 0 web-b\n", i)
				}
			}
			return b.String(), nil
		}
	}
	ctx := context.Background()

	broken := newGrader(nodes(false), probe(false), shop("wbe")...)
	base, err := broken.Record(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	rep := broken.Grade(ctx, s, base)
	want := map[string]bool{"slice-has-ready-endpoints": false, "selector-matches-pods": false, "clusterip-answers": false,
		"rules-forward-to-endpoints": false, "service-kept": true, "pod-labels-kept": true}
	for _, r := range rep.Results {
		if r.Passed != want[r.ID] || r.Error != "" {
			t.Errorf("broken: %s passed=%v error=%q detail=%q", r.ID, r.Passed, r.Error, r.Detail)
		}
	}
	if rep.Passed || rep.Score != 100*2.0/9 {
		t.Errorf("broken: passed %v score %v", rep.Passed, rep.Score)
	}
	if fmt.Sprint(rep.UnlockedHints) != "[1 2]" {
		t.Errorf("unlocked hints %v", rep.UnlockedHints)
	}
	r, _ := rep.Result("clusterip-answers")
	if r.Detail != `20 http probes from Pod shop/client to Service shop/web on its ClusterIP 10.96.0.50:80: 20 were refused; all of them should succeed (for example: "curl: (7) Failed to connect to 10.96.0.50 port 80 after 0 ms: Connection refused")` {
		t.Errorf("probe detail: %s", r.Detail)
	}
	if r.Message != s.Checks[2].FailMessage {
		t.Errorf("message %q", r.Message)
	}
	r, _ = rep.Result("selector-matches-pods")
	if r.Detail != `{.spec.selector.app} of Service shop/web is "wbe"` || r.Expected != `expected "web"` || r.Full() != `{.spec.selector.app} of Service shop/web is "wbe"; expected "web"` {
		t.Errorf("api detail: %s", r.Detail)
	}
	r, _ = rep.Result("rules-forward-to-endpoints")
	if !strings.Contains(r.Detail, `lab-worker: nftables port 80 reject (10.96.0.50 . tcp . 80 is in no-endpoint-services: goto reject-chain)`) {
		t.Errorf("dataplane detail: %s", r.Detail)
	}

	fixed := newGrader(nodes(true), probe(true), shop("web", "10.244.1.5", "10.244.2.5")...)
	rep = fixed.Grade(ctx, s, base)
	for _, r := range rep.Results {
		if !r.Passed {
			t.Errorf("fixed: %s failed: %s %s", r.ID, r.Error, r.Detail)
		}
	}
	if !rep.Passed || rep.Score != 100 || len(rep.UnlockedHints) != 0 {
		t.Errorf("fixed: passed %v score %v hints %v", rep.Passed, rep.Score, rep.UnlockedHints)
	}
	r, _ = rep.Result("clusterip-answers")
	if !strings.HasSuffix(r.Detail, "20 succeeded; answered by web-a, web-b") {
		t.Errorf("probe detail: %s", r.Detail)
	}

	// Wrong fixes: the Service recreated, the Pods relabelled.
	recreated := shop("web", "10.244.1.5", "10.244.2.5")
	recreated[0].(*corev1.Service).UID = "new-uid"
	recreated = recreated[:len(recreated)-1] // the Deployment is gone
	g := newGrader(nodes(true), probe(true), recreated...)
	rep = g.Grade(ctx, s, base)
	r, _ = rep.Result("service-kept")
	if r.Passed || r.Detail != "Service shop/web was deleted and created again (its UID changed from svc-uid to new-uid)" {
		t.Errorf("service-kept: %+v", r)
	}
	r, _ = rep.Result("pod-labels-kept")
	if r.Passed || r.Detail != "Deployment shop/web was deleted" {
		t.Errorf("pod-labels-kept: %+v", r)
	}

	// A bare Pod the learner made with the Pods' labels is no replica:
	// its answers do not count, whatever its name.
	withBare := shop("web", "10.244.1.5", "10.244.2.5")
	withBare = append(withBare, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-b", Namespace: "shop", Labels: map[string]string{"app": "web"}}})
	withBare = slices.DeleteFunc(withBare, func(o runtime.Object) bool {
		p, ok := o.(*corev1.Pod)
		return ok && p.Name == "web-b" && p.OwnerReferences != nil
	})
	rep = newGrader(nodes(true), probe(true), withBare...).Grade(ctx, s, base)
	r, _ = rep.Result("clusterip-answers")
	if r.Passed || !strings.Contains(r.Detail, `an answer came from "web-b", a Pod no controller owns: a bare Pod is no replica`) {
		t.Errorf("clusterip-answers with a bare Pod: %+v", r)
	}

	// Nor do the Pods of a second Deployment of the learner's that the
	// Service was pointed at (setupOnly).
	second := shop("web", "10.244.1.5", "10.244.2.5")
	second = slices.DeleteFunc(second, func(o runtime.Object) bool {
		p, ok := o.(*corev1.Pod)
		return ok && p.Name == "web-b"
	})
	second = append(second,
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web2-7f9c", Namespace: "shop", UID: "rs2-uid",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web2", UID: "web2-uid", Controller: boolp(true)}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-b", Namespace: "shop", Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web2-7f9c", UID: "rs2-uid", Controller: boolp(true)}}}})
	rep = newGrader(nodes(true), probe(true), second...).Grade(ctx, s, base)
	r, _ = rep.Result("clusterip-answers")
	if r.Passed || !strings.Contains(r.Detail, `an answer came from "web-b", a Pod of a workload the scenario did not make`) {
		t.Errorf("clusterip-answers with a second Deployment: %+v", r)
	}
}

func TestAPIOperators(t *testing.T) {
	objs := shop("web", "10.244.1.5", "10.244.2.5")
	g := newGrader(nil, nil, objs...)
	svc := scenario.ObjectRef{Kind: "Service", Namespace: "shop", Name: "web"}
	slices := scenario.ObjectRef{Kind: "EndpointSlice", Namespace: "shop", LabelSelector: "kubernetes.io/service-name=web"}
	for _, tc := range []struct {
		ref        scenario.ObjectRef
		path, op   string
		value      string
		pass       bool
		wantDetail string
	}{
		{svc, "{.spec.selector}", scenario.OpEquals, `{"app":"web"}`, true, ""},
		{svc, "{.spec.selector.app} {.spec.ports[0].port}", scenario.OpEquals, "web 80", true, ""},
		{svc, "{.spec.type}", scenario.OpAbsent, "", true, ""},
		{svc, "{.spec.clusterIP}", scenario.OpExists, "", true, ""},
		{svc, "{.spec.clusterIP}", scenario.OpMatches, `^10\.96\.`, true, ""},
		{svc, "{.spec.clusterIP}", scenario.OpNotContains, "10.96", false, `{.spec.clusterIP} of Service shop/web is "10.96.0.50"; expected it not to contain "10.96"`},
		{svc, "{.spec.ports[*].name}", scenario.OpCountEquals, "1", true, ""},
		{slices, "{.endpoints[?(@.conditions.ready==true)].addresses[0]}", scenario.OpCountAtLeast, "3", false,
			"{.endpoints[?(@.conditions.ready==true)].addresses[0]} of EndpointSlices in shop with kubernetes.io/service-name=web yields 2 values; expected at least 3"},
		{slices, "{.endpoints[*].addresses[0]}", scenario.OpContains, "10.244.2.5", true, ""},
		{scenario.ObjectRef{Kind: "Service", Namespace: "shop", Name: "nope"}, "{.metadata.name}", scenario.OpExists, "", false, "there is no Service shop/nope"},
		{scenario.ObjectRef{Kind: "Service", Namespace: "shop", Name: "nope"}, "{.metadata.name}", scenario.OpAbsent, "", true, ""},
	} {
		c := &scenario.Check{ID: "c", Description: "d", Weight: 1, API: &scenario.APICheck{Object: tc.ref, JSONPath: tc.path, Op: tc.op, Value: scenario.Scalar(tc.value)}}
		r := g.Check(context.Background(), c, nil)
		if r.Passed != tc.pass || r.Error != "" || (tc.wantDetail != "" && r.Full() != tc.wantDetail) {
			t.Errorf("%s %s %s: passed=%v error=%q detail=%q", tc.path, tc.op, tc.value, r.Passed, r.Error, r.Detail)
		}
	}
}

func TestProbeJudgement(t *testing.T) {
	objs := []runtime.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ingress", Namespace: "edge"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.60",
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ingress-a", Namespace: "edge", Labels: map[string]string{"app": "ingress"}}},
	}
	probe := &scenario.ProbeCheck{From: scenario.ProbeSource{Node: "control-plane"}, Protocol: "http",
		Target: scenario.ProbeTarget{Service: "ingress", Namespace: "edge", Port: 80, Via: scenario.ViaNodePort, Node: "worker2"},
		Path:   "/clientip", Attempts: 4, Timeout: "3s", Expect: scenario.ProbeExpect{Outcome: scenario.OutcomeSuccess, ClientIP: "preserved"}}
	for _, tc := range []struct {
		name   string
		lines  string
		expect scenario.ProbeExpect
		pass   bool
		detail string
	}{
		{"preserved", "@@ 1 0 172.29.1.2:4000\n@@ 2 0 172.29.1.2:4001\n@@ 3 0 172.29.1.2:4002\n@@ 4 0 172.29.1.2:4003\n",
			probe.Expect, true, "4 http probes from node lab-control-plane to NodePort 30080 of Service edge/ingress on node lab-worker2 (172.29.1.4): 4 succeeded; the backend saw 172.29.1.2"},
		{"masqueraded", "@@ 1 0 172.29.1.2:4000\n@@ 2 0 10.244.2.1:4001\n@@ 3 0 172.29.1.2:4002\n@@ 4 0 172.29.1.2:4003\n",
			probe.Expect, false, "the backend saw the client address 10.244.2.1 instead of the client's own 172.29.1.2"},
		{"dropped", "@@ 1 28 curl: (28) Connection timed out after 3001 milliseconds\n@@ 2 28 x\n@@ 3 28 x\n@@ 4 28 x\n",
			probe.Expect, false, "4 timed out; all of them should succeed (for example: \"curl: (28) Connection timed out after 3001 milliseconds\")"},
		{"expected drop", "@@ 1 28 x\n@@ 2 28 x\n@@ 3 124 \n@@ 4 28 x\n",
			scenario.ProbeExpect{Outcome: scenario.OutcomeTimeout}, true, "4 timed out"},
		// An error the grader cannot read is never the expected outcome.
		{"unreadable errors are not drops", "@@ 1 1 sh: curl: Permission denied\n@@ 2 127 sh: nc: not found\n@@ 3 28 x\n@@ 4 28 x\n",
			scenario.ProbeExpect{Outcome: scenario.OutcomeTimeout}, false, "2 timed out, 2 failed with an error the grader cannot classify"},
		{"half", "@@ 1 0 172.29.1.2:1\n@@ 2 7 Connection refused\n@@ 3 0 172.29.1.2:1\n@@ 4 7 Connection refused\n",
			scenario.ProbeExpect{Outcome: scenario.OutcomeSuccess, Ratio: 0.5}, true, "2 succeeded, 2 were refused"},
		{"too few", "@@ 1 0 172.29.1.2:1\n@@ 2 7 Connection refused\n@@ 3 7 Connection refused\n@@ 4 7 Connection refused\n",
			scenario.ProbeExpect{Outcome: scenario.OutcomeSuccess, Ratio: 0.5}, false, "at least 2 should succeed"},
		{"body matches", "@@ 1 0 110\n@@ 2 0  110 \n@@ 3 0 110\n@@ 4 0 110\n",
			scenario.ProbeExpect{Outcome: scenario.OutcomeSuccess, Body: `^110$`}, true, `4 succeeded; the answers said "110"`},
		{"body differs", "@@ 1 0 110\n@@ 2 0 100\n@@ 3 0 110\n@@ 4 0 110\n",
			scenario.ProbeExpect{Outcome: scenario.OutcomeSuccess, Body: `^110$`}, false, `an answer said "100"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var script string
			g := newGrader(func(node string, cmd []string) (string, error) {
				if node != "lab-control-plane" {
					return "", fmt.Errorf("probe ran on %s", node)
				}
				script = cmd[2]
				return tc.lines, nil
			}, nil, objs...)
			p := *probe
			p.Expect = tc.expect
			r := g.Check(context.Background(), &scenario.Check{ID: "p", Weight: 1, Probe: &p}, nil)
			if r.Passed != tc.pass || r.Error != "" || !strings.Contains(r.Detail, tc.detail) {
				t.Errorf("passed=%v error=%q detail=%q", r.Passed, r.Error, r.Detail)
			}
			if !strings.Contains(script, "H='172.29.1.4'") || !strings.Contains(script, "P=30080") || !strings.Contains(script, `T=3; TS=3; C=1;`) ||
				!strings.Contains(script, `curl -sS --connect-timeout "$C" -m "$T" "http://$H:$P/clientip"`) {
				t.Errorf("script:\n%s", script)
			}
		})
	}
}

// Answers must come from the client's node or zone.
func TestProbeTopology(t *testing.T) {
	zoned := func(name, zone string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if zone != "" {
			n.Labels["topology.kubernetes.io/zone"] = zone
		}
		return n
	}
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: map[string]string{"app": "cache"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c"}}}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.9"}}
	}
	client := pod("client", "lab-worker")
	client.Labels = map[string]string{"app": "client"}
	objs := []runtime.Object{
		zoned("lab-worker", "zone-a"), zoned("lab-worker2", "zone-a"), zoned("lab-worker3", "zone-b"),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "shop"},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.70", Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}},
		pod("cache-1", "lab-worker"), pod("cache-2", "lab-worker2"), pod("cache-3", "lab-worker3"), client,
	}
	for _, tc := range []struct {
		name       string
		lines      string
		responders scenario.Responders
		pass       bool
		detail     string
	}{
		{"same node", "@@ 1 0 cache-1\n@@ 2 0 cache-1\n", scenario.Responders{PodSelector: "app=cache", Namespace: "shop", SameNode: true}, true, "answered by cache-1"},
		{"another node", "@@ 1 0 cache-1\n@@ 2 0 cache-2\n", scenario.Responders{PodSelector: "app=cache", Namespace: "shop", SameNode: true}, false,
			"an answer came from cache-2 on lab-worker2, not from a Pod on lab-worker where the client runs"},
		{"same zone", "@@ 1 0 cache-1\n@@ 2 0 cache-2\n", scenario.Responders{PodSelector: "app=cache", Namespace: "shop", SameZone: true, AtLeast: 2}, true, "answered by cache-1, cache-2"},
		{"another zone", "@@ 1 0 cache-1\n@@ 2 0 cache-3\n", scenario.Responders{PodSelector: "app=cache", Namespace: "shop", SameZone: true}, false,
			"an answer came from cache-3 on lab-worker3 (zone-b), outside the client's zone zone-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGrader(nil, func(ns, pod string, cmd []string) (string, error) { return tc.lines, nil }, objs...)
			p := &scenario.ProbeCheck{From: scenario.ProbeSource{Pod: "client", Namespace: "shop"}, Protocol: "http",
				Target: scenario.ProbeTarget{Service: "cache", Namespace: "shop", Port: 80}, Path: "/hostname", Attempts: 2,
				Expect: scenario.ProbeExpect{Outcome: scenario.OutcomeSuccess, Responders: &tc.responders}}
			r := g.Check(context.Background(), &scenario.Check{ID: "p", Weight: 1, Probe: p}, nil)
			if r.Passed != tc.pass || r.Error != "" || !strings.Contains(r.Detail, tc.detail) {
				t.Errorf("passed=%v error=%q detail=%q", r.Passed, r.Error, r.Detail)
			}
		})
	}
}

// The probe script runs in a real sh: attempts in parallel, one line each,
// with curl, wget, nc and dig replaced by stubs.
func TestProbeScriptRuns(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	stub := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!"+sh+"\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stub("curl", `case "$*" in *10.0.0.1*) echo "curl: (7) Failed to connect: Connection refused" >&2; exit 7;; *10.0.0.2*) sleep 0.2; echo "curl: (28) timed out" >&2; exit 28;; esac; printf 'pod-a'`)
	stub("dig", `echo 10.96.0.50`)
	for _, tc := range []struct {
		protocol, host, resolve, want string
		fromNode                      bool
	}{
		{"http", "10.0.0.9", "", "success", false},
		{"http", "10.0.0.1", "", "refused", false},
		{"http", "10.0.0.2", "", "timeout", true},
		{"http", "$H", "web.shop.svc.cluster.local", "success", true},
		{"dns", "10.96.0.10", "", "success", true},
	} {
		p := &scenario.ProbeCheck{Protocol: tc.protocol, Path: "/hostname", Query: "web.shop.svc.cluster.local"}
		if tc.protocol != "http" {
			p.Path = ""
		}
		script := probeScript(p, probeTarget{host: tc.host, port: 80, resolve: tc.resolve}, tc.fromNode, 5, time.Second, time.Second)
		cmd := exec.Command(sh, "-c", script)
		cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.protocol, err, out)
		}
		as := parseAttempts(string(out), tc.protocol)
		if len(as) != 5 {
			t.Fatalf("%s %s: %d attempts from\n%s", tc.protocol, tc.host, len(as), out)
		}
		for _, a := range as {
			if a.outcome != tc.want {
				t.Errorf("%s %s: outcome %s (%q), want %s", tc.protocol, tc.host, a.outcome, a.raw, tc.want)
			}
		}
	}
}

// A probe that judges who answered sends its first attempt alone, so that
// what it leaves behind (a ClientIP affinity entry) holds for the others;
// other probes send every attempt at once. The stub curl pins the client to
// the first answer it recorded, as an affinity set does, and picks anew
// while nothing is recorded.
func TestProbeScriptFirstAttemptAlone(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, tc := range []struct {
		name       string
		responders bool
		wantPods   func(int) bool
	}{
		{"judges responders: pinned after the first", true, func(n int) bool { return n == 1 }},
		{"outcome only: all at once", false, func(n int) bool { return n > 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pin := filepath.Join(dir, "pinned")
			body := `if [ -f ` + pin + ` ]; then cat ` + pin + `; exit 0; fi; sleep 0.3; printf 'pod-%s' "$$" > ` + pin + `; printf 'pod-%s' "$$"`
			if err := os.WriteFile(filepath.Join(dir, "curl"), []byte("#!"+sh+"\n"+body+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			p := &scenario.ProbeCheck{Protocol: "http", Path: "/hostname", Expect: scenario.ProbeExpect{Outcome: scenario.OutcomeSuccess}}
			if tc.responders {
				p.Expect.Responders = &scenario.Responders{PodSelector: "app=web", AtLeast: 2}
			}
			cmd := exec.Command(sh, "-c", probeScript(p, probeTarget{host: "10.0.0.9", port: 80}, false, 6, time.Second, time.Second))
			cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin"}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			as := parseAttempts(string(out), "http")
			pods := map[string]bool{}
			for _, a := range as {
				pods[a.body] = true
			}
			if len(as) != 6 || !tc.wantPods(len(pods)) {
				t.Errorf("%d attempts answered by %d pods (%v):\n%s", len(as), len(pods), pods, out)
			}
		})
	}
}

func TestProbeTimeouts(t *testing.T) {
	for _, tc := range []struct {
		protocol, outcome, timeout string
		want, connect, dropWait    time.Duration
	}{
		{"http", scenario.OutcomeSuccess, "", 2 * time.Second, time.Second, time.Second},
		{"http", scenario.OutcomeSuccess, "3s", 3 * time.Second, time.Second, time.Second},
		{"http", scenario.OutcomeTimeout, "", time.Second, time.Second, time.Second},
		{"tcp", scenario.OutcomeRefused, "", time.Second, time.Second, time.Second},
		{"tcp", scenario.OutcomeSuccess, "500ms", 500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond},
		{"dns", scenario.OutcomeSuccess, "", 2 * time.Second, time.Second, 2 * time.Second},
		{"udp", scenario.OutcomeTimeout, "", time.Second, time.Second, time.Second},
		{"dns", scenario.OutcomeSuccess, "1s", time.Second, time.Second, time.Second},
	} {
		p := &scenario.ProbeCheck{Protocol: tc.protocol, Timeout: tc.timeout, Expect: scenario.ProbeExpect{Outcome: tc.outcome}}
		timeout, connect, err := probeTimeouts(p)
		if err != nil || timeout != tc.want || connect != tc.connect {
			t.Errorf("%s expecting %s, timeout %q: %s, %s, %v; want %s, %s", tc.protocol, tc.outcome, tc.timeout, timeout, connect, err, tc.want, tc.connect)
		}
		if got := DropWait(p); got != tc.dropWait {
			t.Errorf("%s expecting %s, timeout %q: DropWait %s, want %s", tc.protocol, tc.outcome, tc.timeout, got, tc.dropWait)
		}
	}
}

func TestRules(t *testing.T) {
	nft := readTestdata(t, "worker2.nft")
	ipt := readTestdata(t, "overall.iptables")
	svc := func(ns, name, ip, portName string, port, nodePort int32) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Name: portName, Port: port, NodePort: nodePort, Protocol: corev1.ProtocolTCP}}}}
	}
	ingress := svc("edge", "ingress", "10.96.98.75", "http", 80, 30080)
	dnsSvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}}
	other := svc("edge", "other", "10.96.7.7", "http", 80, 0)
	maps := parseNFTMaps(nft)
	for _, tc := range []struct {
		svc      *corev1.Service
		external bool
		want     string
	}{
		{ingress, true, "drop"},
		{ingress, false, "endpoints"},
		{dnsSvc, false, "endpoints"},
		{other, false, "absent"},
	} {
		if v := nftVerdict(maps, tc.svc, tc.svc.Spec.Ports[0], tc.external); v.kind != tc.want {
			t.Errorf("nft %s external=%v: %s (%s), want %s", tc.svc.Name, tc.external, v.kind, v.why, tc.want)
		}
	}
	for _, tc := range []struct {
		svc      *corev1.Service
		external bool
		want     string
	}{
		{svc("ns6", "svc6", "172.30.0.46", "p80", 80, 0), false, "reject"},
		{svc("ns2", "svc2", "172.30.0.42", "p80", 80, 3001), true, "drop"},
		{svc("ns2", "svc2", "172.30.0.42", "p80", 80, 3001), false, "endpoints"},
		{svc("ns1", "svc1", "172.30.0.41", "p80", 80, 0), false, "endpoints"},
		{svc("ns1", "svc9", "172.30.0.49", "p80", 80, 0), false, "absent"},
	} {
		if v := iptablesVerdict(ipt, tc.svc, tc.svc.Spec.Ports[0], tc.external); v.kind != tc.want {
			t.Errorf("iptables %s external=%v: %s (%s), want %s", tc.svc.Name, tc.external, v.kind, v.why, tc.want)
		}
	}
}

// A node whose proxier does not answer is judged by the rules it left.
func TestRulesOfADeadProxier(t *testing.T) {
	g := newGrader(func(_ string, cmd []string) (string, error) {
		switch strings.Join(cmd, " ") {
		case "nft list table ip kube-proxy":
			return nftTable(true), nil
		}
		return "", errors.New("exit status 7")
	}, nil, shop("web")...)
	c := &scenario.Check{ID: "rules", Weight: 1,
		Dataplane: &scenario.DataplaneCheck{Nodes: []string{"worker"}, Rules: &scenario.RulesAssertion{Service: "web", Namespace: "shop", Expect: scenario.RulesEndpoints}}}
	if r := g.Check(context.Background(), c, nil); !r.Passed || !strings.HasPrefix(r.Detail, "lab-worker: nftables port 80 endpoints") {
		t.Errorf("%+v", r)
	}
}

// A dataplane check asks its nodes at once, at most MaxExecs commands at a
// time, and reports them in the nodes' order.
func TestDataplaneNodesAtOnce(t *testing.T) {
	var mu sync.Mutex
	running, most := 0, 0
	g := newGrader(func(node string, cmd []string) (string, error) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
		if node == "lab-worker" {
			return "iptables", nil
		}
		return "nftables", nil
	}, nil)
	g.MaxExecs = 2
	c := &scenario.Check{ID: "mode", Weight: 1, Dataplane: &scenario.DataplaneCheck{ProxyMode: scenario.ProxyModeNFTables}}
	r := g.Check(context.Background(), c, nil)
	want := "lab-worker: kube-proxy runs in iptables mode; lab-control-plane: kube-proxy runs in nftables mode; lab-worker2: kube-proxy runs in nftables mode"
	if r.Passed || r.Detail != want {
		t.Errorf("passed=%v detail=%q, want %q", r.Passed, r.Detail, want)
	}
	if most != 2 {
		t.Errorf("%d commands ran at once, want 2 (MaxExecs)", most)
	}
}

func TestConntrackMax(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		pass      bool
		detail    string
	}{
		{"capped", "262144\n40\ntable inet svclab-conntrack-max {\n\tchain capacity {\n\t\tct state new ct count over 32 counter packets 9 bytes 540 drop\n\t}\n}\n", false,
			"lab-worker: conntrack table capped at 32 connections (the lab's stand-in for nf_conntrack_max: nft table inet svclab-conntrack-max), 40 entries tracked; it must hold at least 65536"},
		{"raised", "262144\n40\ntable inet svclab-conntrack-max {\n\tchain capacity {\n\t\tct state new ct count over 100000 drop\n\t}\n}\n", true,
			"lab-worker: conntrack table capped at 100000 connections"},
		{"stand-in gone", "262144\n40\n", true, "lab-worker: nf_conntrack_max 262144, 40 entries tracked"},
	} {
		g := newGrader(func(node string, cmd []string) (string, error) {
			if !strings.Contains(strings.Join(cmd, " "), "nf_conntrack_max") {
				return "", fmt.Errorf("unexpected %v", cmd)
			}
			return tc.out, nil
		}, nil)
		c := &scenario.Check{ID: "max", Weight: 1, Dataplane: &scenario.DataplaneCheck{Nodes: []string{"worker"}, ConntrackMax: &scenario.ConntrackMaxAssertion{AtLeast: 65536}}}
		r := g.Check(context.Background(), c, nil)
		if r.Passed != tc.pass || r.Error != "" || !strings.HasPrefix(r.Detail, tc.detail) {
			t.Errorf("%s: passed=%v error=%q detail=%q", tc.name, r.Passed, r.Error, r.Detail)
		}
	}
}

func TestConntrack(t *testing.T) {
	dnsSvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns-x", Namespace: "kube-system", Labels: map[string]string{discoveryv1.LabelServiceName: "kube-dns"}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.2"}, Conditions: discoveryv1.EndpointConditions{Ready: boolp(true)}},
			{Addresses: []string{"10.244.2.2"}, Conditions: discoveryv1.EndpointConditions{Ready: boolp(false)}}}}
	entries := "udp      17 29 src=10.244.1.9 dst=10.96.0.10 sport=53535 dport=53 src=10.244.1.2 dst=10.244.1.9 sport=53 dport=53535 mark=0 use=1\n" +
		"udp      17 20 src=10.244.1.9 dst=10.96.0.10 sport=40000 dport=53 src=10.244.2.2 dst=10.244.1.9 sport=53 dport=40000 mark=0 use=1\n"
	g := newGrader(func(node string, cmd []string) (string, error) {
		if strings.Join(cmd, " ") != "conntrack -L -p udp --orig-dst 10.96.0.10 --orig-port-dst 53" {
			return "", fmt.Errorf("unexpected %v", cmd)
		}
		if node == "lab-worker" {
			return entries, nil
		}
		return "", nil
	}, nil, dnsSvc, slice)
	check := &scenario.Check{ID: "ct", Weight: 1, Dataplane: &scenario.DataplaneCheck{Nodes: []string{"worker", "worker2"},
		Conntrack: &scenario.ConntrackAssertion{Service: "kube-dns", Namespace: "kube-system", Protocol: "udp", Port: 53, Expect: scenario.ConntrackNoStaleEntries}}}
	r := g.Check(context.Background(), check, nil)
	want := "lab-worker: 1 stale udp entries: 10.244.1.9:40000 → 10.244.2.2 (10.96.0.10:53 is answered by 10.244.2.2, which is not a ready endpoint); lab-worker2: 0 udp entries, all toward ready endpoints"
	if r.Passed || r.Detail != want {
		t.Errorf("passed=%v error=%q detail=%q", r.Passed, r.Error, r.Detail)
	}
	check.Dataplane.Conntrack.Expect = scenario.ConntrackNoEntries
	check.Dataplane.Nodes = []string{"worker2"}
	if r := g.Check(context.Background(), check, nil); !r.Passed {
		t.Errorf("noEntries on an empty table: %+v", r)
	}
}

func TestCheckErrors(t *testing.T) {
	g := newGrader(func(string, []string) (string, error) { return "", errors.New("exit status 7") }, nil,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.50", Ports: []corev1.ServicePort{{Port: 80}}}})
	c := &scenario.Check{ID: "rules", Description: "web's rules forward", Weight: 1,
		Dataplane: &scenario.DataplaneCheck{Nodes: []string{"worker"}, Rules: &scenario.RulesAssertion{Service: "web", Namespace: "shop", Expect: scenario.RulesEndpoints}}}
	r := g.Check(context.Background(), c, nil)
	if r.Passed || !strings.Contains(r.Error, "asking the proxier on node lab-worker for its mode (is kube-proxy running there?)") ||
		!strings.Contains(r.Error, "node lab-worker has neither kube-proxy's nftables table nor its iptables chains") || r.Message != "Not yet: web's rules forward" {
		t.Errorf("%+v", r)
	}
	rf := &scenario.Check{ID: "kept", Weight: 1, FailMessage: "m", RightFix: &scenario.RightFixCheck{Object: scenario.ObjectRef{Kind: "Service", Namespace: "shop", Name: "web"}, Rule: scenario.RightFixUIDUnchanged}}
	if r := g.Check(context.Background(), rf, nil); r.Passed || !strings.Contains(r.Error, "no baseline was recorded") {
		t.Errorf("%+v", r)
	}
}

// A rightFix rule on a labelSelector holds every matching object: one Pod
// of a DaemonSet that restarted, or was replaced, breaks it.
func TestRightFixSelectsEveryObject(t *testing.T) {
	ctx := context.Background()
	pod := func(name, uid string, restarts int32) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "monitor", UID: types.UID(uid), Labels: map[string]string{"app": "ledger"}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "ledger", RestartCount: restarts}}}}
	}
	check := &scenario.Check{ID: "kept", Weight: 1, FailMessage: "m", RightFix: &scenario.RightFixCheck{
		Object: scenario.ObjectRef{Kind: "Pod", Namespace: "monitor", LabelSelector: "app=ledger"},
		Rule:   scenario.RightFixUnchanged, JSONPath: "{.metadata.name} {.status.containerStatuses[0].restartCount}"}}
	s := &scenario.Scenario{ID: "x", Checks: []scenario.Check{*check}}
	base, err := newGrader(nil, nil, pod("ledger-a", "a", 0), pod("ledger-b", "b", 0)).Record(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		pods []runtime.Object
		pass bool
	}{
		{"both as they were", []runtime.Object{pod("ledger-a", "a", 0), pod("ledger-b", "b", 0)}, true},
		{"the second one restarted", []runtime.Object{pod("ledger-a", "a", 0), pod("ledger-b", "b", 1)}, false},
		{"the first one replaced", []runtime.Object{pod("ledger-b", "b", 0), pod("ledger-c", "c", 0)}, false},
	} {
		r := newGrader(nil, nil, tc.pods...).Check(ctx, check, base)
		if r.Passed != tc.pass || r.Error != "" {
			t.Errorf("%s: %+v", tc.name, r)
		}
	}
}

func TestBaselineRoundTrip(t *testing.T) {
	b := &Baseline{Scenario: "x", Taken: time.Unix(100, 0).UTC(), Checks: map[string]Snapshot{"a": {Exists: true, UID: "u", Value: "v"}}}
	path := filepath.Join(t.TempDir(), "baseline.json")
	if err := SaveBaseline(path, b); err != nil {
		t.Fatal(err)
	}
	got, err := LoadBaseline(path)
	if err != nil || got.Checks["a"] != b.Checks["a"] || !got.Taken.Equal(b.Taken) {
		t.Errorf("%v %+v", err, got)
	}
}

// keptFromStart reads when the kernel began tracking each entry (conntrack
// -o xml,ktimestamp) against the attempt's start, to the nanosecond: an
// entry from before the attempt passes; entries made since (a flushed
// table picked the connections up again) do not, even a moment after.
func TestKeptFromStart(t *testing.T) {
	taken := time.Unix(10_000, 0)
	base := &Baseline{Taken: taken}
	flow := func(dst string, start time.Time) string {
		ts := ""
		if !start.IsZero() {
			ts = fmt.Sprintf("<timestamp><start>%d</start></timestamp><deltatime>3</deltatime>", start.UnixNano())
		}
		return `<flow><meta direction="original"><layer3 protonum="2" protoname="ipv4"><src>10.244.1.3</src><dst>` + dst +
			`</dst></layer3><layer4 protonum="6" protoname="tcp"><sport>58030</sport><dport>9000</dport></layer4></meta>` +
			`<meta direction="reply"><layer3 protonum="2" protoname="ipv4"><src>10.244.1.2</src><dst>10.244.1.3</dst></layer3></meta>` +
			`<meta direction="independent"><state>ESTABLISHED</state>` + ts + `</meta></flow>`
	}
	doc := func(flows ...string) string {
		return "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<conntrack>\n" + strings.Join(flows, "\n") + "\n</conntrack>\n"
	}
	for _, tc := range []struct {
		name, out string
		base      *Baseline
		pass      bool
		err       string
	}{
		{"tracked since before", doc(flow("10.96.12.7", taken.Add(-95*time.Second))), base, true, ""},
		{"a moment before", doc(flow("10.96.12.7", taken.Add(-time.Millisecond))), base, true, ""},
		{"picked up again right after a flush", doc(flow("10.96.12.7", taken.Add(300*time.Millisecond))), base, false, ""},
		{"old entry of another address only", doc(flow("10.96.12.8", taken.Add(-time.Hour)), flow("10.96.12.7", taken.Add(time.Second))), base, false, ""},
		{"gone", doc(), base, false, ""},
		{"nothing listed", "", base, false, ""},
		{"no timestamps on the node", doc(flow("10.96.12.7", time.Time{})), base, false, "nf_conntrack_timestamp"},
		{"not XML", "tcp 6 431999 ESTABLISHED src=10.244.1.3", base, false, "XML"},
		{"no baseline", doc(flow("10.96.12.7", taken.Add(-time.Hour))), nil, false, "no record of when the attempt began"},
	} {
		line, pass, err := keptFromStart(tc.out, "10.96.12.7", "tcp", tc.base)
		if pass != tc.pass || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %q %v %v", tc.name, line, pass, err)
		}
	}
}
