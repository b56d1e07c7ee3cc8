package session

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/faults"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/scenario"
)

// testDataplaneFaults injects the dataplane faults into the application of
// scenario s (set up without its own faults) on c and checks with the
// grader that each really changes what happens on the node, and that its
// Revert undoes it.
func testDataplaneFaults(t *testing.T, c cluster.Cluster, s *scenario.Scenario, reg *scenario.Registry) {
	ctx := context.Background()
	app := *s
	app.Faults = nil
	ses, err := Start(ctx, &app, c, Options{Faults: reg, Progress: testProgress{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer ses.Teardown(context.Background(), false)
	cs, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	const ns, svcName = "billing", "api"
	short := func(node string) string { return strings.TrimPrefix(node, c.Name()+"-") }

	inject := func(name string, p scenario.Params) {
		t.Helper()
		f, err := faults.Lookup(reg, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Validate(p); err != nil {
			t.Fatal(err)
		}
		if err := f.Inject(ctx, c, p); err != nil {
			t.Fatalf("injecting %s: %v", name, err)
		}
	}
	revert := func(name string, p scenario.Params) {
		t.Helper()
		f, _ := faults.Lookup(reg, name)
		if err := f.(faults.Reverter).Revert(ctx, c, p); err != nil {
			t.Fatalf("reverting %s: %v", name, err)
		}
	}
	check := func(c *scenario.Check) grade.Result {
		c.ID, c.Description, c.Weight = "c", "c", 1
		return ses.Grader.Check(ctx, c, nil)
	}
	// eventually waits for the check to reach pass.
	eventually := func(what string, c func() *scenario.Check, pass bool, timeout time.Duration) grade.Result {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for {
			r := check(c())
			if r.Passed == pass && r.Error == "" {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: still passed=%v after %s: %s %s", what, r.Passed, timeout, r.Error, r.Detail)
			}
			time.Sleep(time.Second)
		}
	}
	rules := func(node string) func() *scenario.Check {
		return func() *scenario.Check {
			return &scenario.Check{Dataplane: &scenario.DataplaneCheck{Nodes: []string{node},
				Rules: &scenario.RulesAssertion{Service: svcName, Namespace: ns, Port: 80, Expect: scenario.RulesEndpoints}}}
		}
	}
	tcpFrom := func(node string, target scenario.ProbeTarget) func() *scenario.Check {
		return func() *scenario.Check {
			return &scenario.Check{Probe: &scenario.ProbeCheck{From: scenario.ProbeSource{Node: node}, Protocol: "tcp",
				Target: target, Attempts: 3, Timeout: "2s", Expect: scenario.ProbeExpect{Outcome: scenario.OutcomeSuccess}}}
		}
	}
	clusterIP := scenario.ProbeTarget{Service: svcName, Namespace: ns, Port: 80}
	setTargetPort := func(port int) {
		t.Helper()
		patch := fmt.Sprintf(`[{"op":"replace","path":"/spec/ports/0/targetPort","value":%d}]`, port)
		if _, err := cs.CoreV1().Services(ns).Patch(ctx, svcName, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("rule-deleted", func(t *testing.T) {
		p := scenario.Params{"service": svcName, "namespace": ns, "node": "worker2"}
		inject("rule-deleted", p)
		r := check(rules("worker2")())
		if r.Passed || !strings.Contains(r.Detail, "is in neither service-ips nor no-endpoint-services") {
			t.Errorf("rules after the rule was deleted: %+v", r)
		}
		if r := check(tcpFrom("worker2", clusterIP)()); r.Passed {
			t.Errorf("worker2 still reaches the ClusterIP without its rule: %s", r.Detail)
		}
		if r := check(rules("worker")()); !r.Passed {
			t.Errorf("worker's rules were touched: %s %s", r.Error, r.Detail)
		}
		revert("rule-deleted", p)
		eventually("the proxier's restart restores the rule", rules("worker2"), true, 30*time.Second)
		eventually("worker2 reaches the ClusterIP again", tcpFrom("worker2", clusterIP), true, 10*time.Second)
	})

	t.Run("proxier-stuck", func(t *testing.T) {
		p := scenario.Params{"node": "worker"}
		inject("proxier-stuck", p)
		setTargetPort(9090)
		defer setTargetPort(8080)
		// worker2 follows the change (the Pods refuse 9090); the stuck
		// worker keeps DNATing to 8080.
		eventually("worker2 follows the new targetPort", tcpFrom("worker2", clusterIP), false, 20*time.Second)
		if r := check(tcpFrom("worker", clusterIP)()); !r.Passed {
			t.Errorf("the stuck proxier's node followed the change: %s %s", r.Error, r.Detail)
		}
		revert("proxier-stuck", p)
		eventually("worker syncs again", tcpFrom("worker", clusterIP), false, 20*time.Second)
	})

	t.Run("ip-forward-off", func(t *testing.T) {
		// A Pod on worker2 with a TCP port, reached from the control
		// plane: worker2 must forward the packets into the Pod.
		node := c.Name() + "-worker2"
		var target scenario.ProbeTarget
		for _, nsName := range []string{ns, "kube-system"} {
			pods, err := cs.CoreV1().Pods(nsName).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
			if err != nil {
				t.Fatal(err)
			}
			for _, pod := range pods.Items {
				if target.Host != "" || pod.Spec.HostNetwork || pod.Status.PodIP == "" || pod.Status.Phase != corev1.PodRunning {
					continue
				}
				for _, port := range pod.Spec.Containers[0].Ports {
					if port.Protocol == corev1.ProtocolTCP || port.Protocol == "" {
						target = scenario.ProbeTarget{Host: pod.Status.PodIP, Port: int(port.ContainerPort)}
						break
					}
				}
			}
		}
		if target.Host == "" {
			t.Skipf("no Pod with a TCP port runs on %s", node)
		}
		eventually("the control plane reaches "+target.Host, tcpFrom("control-plane", target), true, 10*time.Second)
		p := scenario.Params{"node": short(node)}
		inject("ip-forward-off", p)
		r := check(tcpFrom("control-plane", target)())
		if r.Passed || !strings.Contains(r.Detail, "timed out") {
			t.Errorf("with ip_forward off on %s: %s %s", node, r.Error, r.Detail)
		}
		revert("ip-forward-off", p)
		eventually("forwarding again", tcpFrom("control-plane", target), true, 10*time.Second)
	})

	t.Run("proxier-dead", func(t *testing.T) {
		// The proxier must have followed the targetPort back (the end of
		// proxier-stuck) before it dies: the rules it leaves are its last.
		eventually("worker follows the targetPort back", tcpFrom("worker", clusterIP), true, 20*time.Second)
		p := scenario.Params{"node": "worker"}
		inject("proxier-dead", p)
		defer revert("proxier-dead", p)
		// Its rules stay, and the grader reads them without a proxier.
		if r := check(rules("worker")()); !r.Passed {
			t.Errorf("the dead proxier's rules: %s %s", r.Error, r.Detail)
		}
		setTargetPort(9090)
		defer setTargetPort(8080)
		eventually("worker2 follows the new targetPort", tcpFrom("worker2", clusterIP), false, 20*time.Second)
		if r := check(tcpFrom("worker", clusterIP)()); !r.Passed {
			t.Errorf("the node without a proxier followed the change: %s %s", r.Error, r.Detail)
		}
		revert("proxier-dead", p)
		eventually("the proxier is back and follows", tcpFrom("worker", clusterIP), false, 60*time.Second)
	})

	t.Run("stale-udp-conntrack-dns", func(t *testing.T) {
		p := scenario.Params{"node": "worker"}
		inject("stale-udp-conntrack-dns", p)
		defer revert("stale-udp-conntrack-dns", p)
		r := check(&scenario.Check{Dataplane: &scenario.DataplaneCheck{Nodes: []string{"worker"},
			Conntrack: &scenario.ConntrackAssertion{Service: "kube-dns", Namespace: "kube-system", Protocol: "udp", Port: 53, Expect: scenario.ConntrackNoStaleEntries}}})
		if r.Passed || !strings.Contains(r.Detail, "which is not a ready endpoint") {
			t.Errorf("no stale DNS entry after the fault: %s %s", r.Error, r.Detail)
		}
	})
}
