//go:build linux

package embedded_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/scenario"
)

// fakeTool stands in for curl, wget, nc, dig, nft, iptables-save and
// conntrack: it prints what a passing check would read, and succeeds.
const fakeTool = `#!/bin/sh
echo web-0123456789-abcde
echo "table ip kube-proxy {"
echo "}"
exit 0
`

// TestTamperedToolsDoNotChangeAGrade replaces every network tool in a
// node and in a client Pod with fakeTool, and grades: probes and rule
// checks still see what the dataplane really does — a Service without
// endpoints is refused, one with endpoints answers from its Pods, rules
// are what the proxier wrote.
func TestTamperedToolsDoNotChangeAGrade(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("end-to-end test: needs root, skipped with -short")
	}
	if err := embedded.Preflight(); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p := embedded.New(t.TempDir(), log)
	name := fmt.Sprintf("tamper-%d", os.Getpid()%100000)
	cc, err := p.Create(ctx, cluster.CreateOptions{Name: name, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Delete(context.Background(), name) })
	c := cc.(*embedded.Cluster)
	cs, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	worker := name + "-worker"
	labels := map[string]string{"app": "web"}
	one := int32(1)
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53", Args: []string{"netexec", "--http-port=8080"}}},
			}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, svc := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{Selector: labels,
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "empty"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "nothing"},
			Ports: []corev1.ServicePort{{Port: 80}}}},
	} {
		if _, err := cs.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client", Labels: map[string]string{"app": "client"}},
		Spec: corev1.PodSpec{NodeName: worker, Containers: []corev1.Container{{Name: "c",
			Image: "registry.k8s.io/e2e-test-images/agnhost:2.53", Command: []string{"sleep", "3600"}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	g, err := grade.New(c, log)
	if err != nil {
		t.Fatal(err)
	}
	probe := func(id string, from scenario.ProbeSource, svc, outcome string) *scenario.Check {
		return &scenario.Check{ID: id, Description: id, Weight: 1, Probe: &scenario.ProbeCheck{From: from, Protocol: "http",
			Path: "/hostname", Attempts: 3, Target: scenario.ProbeTarget{Service: svc, Port: 80}, Expect: scenario.ProbeExpect{Outcome: outcome}}}
	}
	node, pod := scenario.ProbeSource{Node: "worker"}, scenario.ProbeSource{Pod: "client"}
	checks := []struct {
		check *scenario.Check
		pass  bool
	}{
		{probe("node-web-answers", node, "web", scenario.OutcomeSuccess), true},
		{probe("node-empty-answers", node, "empty", scenario.OutcomeSuccess), false},
		{probe("node-empty-refused", node, "empty", scenario.OutcomeRefused), true},
		{probe("pod-web-answers", pod, "web", scenario.OutcomeSuccess), true},
		{probe("pod-empty-answers", pod, "empty", scenario.OutcomeSuccess), false},
		{probe("pod-empty-refused", pod, "empty", scenario.OutcomeRefused), true},
		{&scenario.Check{ID: "rules-web", Description: "rules", Weight: 1, Dataplane: &scenario.DataplaneCheck{
			Nodes: []string{"worker"}, Rules: &scenario.RulesAssertion{Service: "web", Expect: "endpoints"}}}, true},
		{&scenario.Check{ID: "rules-empty-endpoints", Description: "rules", Weight: 1, Dataplane: &scenario.DataplaneCheck{
			Nodes: []string{"worker"}, Rules: &scenario.RulesAssertion{Service: "empty", Expect: "endpoints"}}}, false},
		{&scenario.Check{ID: "proxy-mode", Description: "mode", Weight: 1, Dataplane: &scenario.DataplaneCheck{
			Nodes: []string{"worker"}, ProxyMode: "nftables"}}, true},
	}
	gradeAll := func(t *testing.T, when string) {
		t.Helper()
		for _, tc := range checks {
			var r grade.Result
			// The first grading may meet a Pod still starting.
			for i := 0; i < 30; i++ {
				r = g.Check(ctx, tc.check, nil)
				if r.Passed == tc.pass {
					break
				}
				time.Sleep(time.Second)
			}
			if r.Passed != tc.pass {
				t.Errorf("%s: %s passed=%v, want %v: %s %s %s", when, tc.check.ID, r.Passed, tc.pass, r.Message, r.Detail, r.Error)
			}
		}
	}
	gradeAll(t, "before tampering")

	tools := "curl wget nc dig nslookup nft iptables iptables-save iptables-nft-save conntrack bash"
	plant := fmt.Sprintf(`for t in %s; do for d in /usr/bin /usr/sbin /bin /sbin /usr/local/bin; do [ -e $d/$t ] && cat /tmp/fake > $d/$t; done; done; echo PLANTED`, tools)
	var out bytes.Buffer
	if err := c.NodeExec(ctx, worker, []string{"sh", "-c", "cat > /tmp/fake && chmod +x /tmp/fake && " + plant},
		cluster.Stdio{Stdin: strings.NewReader(fakeTool), Stdout: &out, Stderr: &out}); err != nil || !strings.Contains(out.String(), "PLANTED") {
		t.Fatalf("tampering with the node: %v\n%s", err, &out)
	}
	pe, err := grade.NewPodExecutor(c)
	if err != nil {
		t.Fatal(err)
	}
	// The plant is idempotent: it is tried again until the replaced curl
	// answers. An exec whose connection to the node is lost reports
	// success with no output (client-go reads an empty error stream as
	// success: kubernetes/kubernetes#137404), and a busy machine has lost
	// a few seconds of them in a row here; what went wrong is reported in
	// full if the plant never takes.
	var tries []string
	for try := 0; ; try++ {
		out.Reset()
		err := pe.Exec(ctx, "default", "client", "c", []string{"sh", "-c", "printf '%s' '" + fakeTool + "' > /tmp/fake && chmod +x /tmp/fake && " + plant}, &out, &out)
		tries = append(tries, fmt.Sprintf("plant: err %v, output %q", err, &out))
		out.Reset()
		err = pe.Exec(ctx, "default", "client", "c", []string{"curl", "-s", "http://10.96.0.1/"}, &out, &out)
		tries = append(tries, fmt.Sprintf("curl: err %v, output %q", err, &out))
		if strings.Contains(out.String(), "web-0123456789") {
			break
		}
		if try == 9 {
			out.Reset()
			pe.Exec(ctx, "default", "client", "c", []string{"sh", "-c", "ls -la /usr/bin/curl /tmp/fake; head -c 64 /usr/bin/curl | od -c | head -3; mount | grep ' / '"}, &out, &out)
			t.Fatalf("the client Pod's curl was not replaced:\n%s\nnow: %s", strings.Join(tries, "\n"), &out)
		}
		time.Sleep(2 * time.Second)
	}
	// The tampering worked: the lab's own tools now lie.
	out.Reset()
	c.NodeExec(ctx, worker, []string{"curl", "-s", "http://10.96.0.1/"}, cluster.Stdio{Stdout: &out})
	if !strings.Contains(out.String(), "web-0123456789") {
		t.Fatalf("the node's curl was not replaced: %q", &out)
	}
	gradeAll(t, "after tampering")
}
