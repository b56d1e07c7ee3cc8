//go:build linux

package embedded_test

import (
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

// TestStaleHalfOpenEntriesDoNotFailAProbe leaves on the client's node what a
// check of a broken lab leaves: conntrack entries of connection attempts
// that were DNATed to a Pod that is gone and never answered (SYN_SENT,
// UNREPLIED). The client Pod may only use ten source ports, all of them
// pinned so: a connection of its own fails. A probe of the
// grader from that Pod must still reach the Service's live Pod, and the
// learner's established connection toward it must stay.
func TestStaleHalfOpenEntriesDoNotFailAProbe(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("end-to-end test: needs root, skipped with -short")
	}
	if err := embedded.Preflight(); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p := embedded.New(t.TempDir(), log)
	name := fmt.Sprintf("halfopen-%d", os.Getpid()%100000)
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
	svc, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{Selector: labels,
		Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{NodeName: worker, Containers: []corev1.Container{{Name: "c",
			Image: "registry.k8s.io/e2e-test-images/agnhost:2.53", Command: []string{"sleep", "3600"}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	g, err := grade.New(c, log)
	if err != nil {
		t.Fatal(err)
	}
	check := &scenario.Check{ID: "web-answers", Description: "web answers", Weight: 1, Probe: &scenario.ProbeCheck{
		From: scenario.ProbeSource{Pod: "client"}, Protocol: "http", Path: "/hostname", Attempts: 20,
		Target: scenario.ProbeTarget{Service: "web", Port: 80}, Expect: scenario.ProbeExpect{Outcome: scenario.OutcomeSuccess}}}
	var r grade.Result
	for i := 0; i < 60 && !r.Passed; i++ { // the Pods start
		if r = g.Check(ctx, check, nil); !r.Passed {
			time.Sleep(time.Second)
		}
	}
	if !r.Passed {
		t.Fatalf("before the stale entries: %s %s %s", r.Message, r.Detail, r.Error)
	}

	client, err := cs.CoreV1().Pods("default").Get(ctx, "client", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	podNS, err := c.PodNetns(client)
	if err != nil {
		t.Fatal(err)
	}
	nodeNS, err := c.NodeNetns(worker)
	if err != nil {
		t.Fatal(err)
	}
	run := func(ns cluster.Netns, argv ...string) string {
		t.Helper()
		out, err := cluster.NetnsOutput(ctx, ns, "test", argv...)
		if err != nil {
			t.Fatalf("%s: %v", strings.Join(argv, " "), err)
		}
		return out
	}
	const first, last = 40000, 40009
	run(podNS, "sysctl", "-w", fmt.Sprintf("net.ipv4.ip_local_port_range=%d %d", first, last))
	// A Pod address on the worker's CIDR that no Pod has: the dead one.
	dead := strings.Join(strings.Split(client.Status.PodIP, ".")[:3], ".") + ".250"
	clusterIP := svc.Spec.ClusterIP
	poison := func() {
		t.Helper()
		for port := first; port <= last; port++ {
			// A failed connection may have left or changed it.
			cluster.NetnsOutput(ctx, nodeNS, "test", "conntrack", "-D", "-p", "tcp", "-s", client.Status.PodIP, "--sport", fmt.Sprint(port))
			run(nodeNS, "conntrack", "-I", "-p", "tcp", "-s", client.Status.PodIP, "-d", clusterIP, "--sport", fmt.Sprint(port), "--dport", "80",
				"-r", dead, "-q", client.Status.PodIP, "--reply-port-src", "8080", "--reply-port-dst", fmt.Sprint(port),
				"--state", "SYN_SENT", "-u", "UNREPLIED", "-t", "120")
		}
	}
	poison()
	// An established connection of the learner's on another port stays.
	run(nodeNS, "conntrack", "-I", "-p", "tcp", "-s", client.Status.PodIP, "-d", clusterIP, "--sport", "39999", "--dport", "80",
		"-r", dead, "-q", client.Status.PodIP, "--reply-port-src", "8080", "--reply-port-dst", "39999",
		"--state", "ESTABLISHED", "-u", "ASSURED", "-t", "120")

	// The stale entries do what they do to any client: a connection from
	// the Pod fails.
	conn, err := podNS.DialFrom(ctx, "tcp", "", clusterIP+":80")
	if err == nil {
		conn.Close()
		t.Fatalf("a connection from the client with every source port pinned to %s reached the Service: the stale entries do not act as a real stale entry does", dead)
	}
	t.Logf("with the stale entries, a connection from the client fails: %v", err)

	poison()
	// Fewer attempts than ports: the client's own closed sockets hold
	// theirs for a while.
	check.Probe.Attempts = 5
	r = g.Check(ctx, check, nil)
	if !r.Passed {
		t.Fatalf("a probe over stale half-open entries failed: %s %s %s", r.Message, r.Detail, r.Error)
	}
	left := run(nodeNS, "conntrack", "-L", "-p", "tcp", "--orig-src", client.Status.PodIP, "--orig-dst", clusterIP)
	if strings.Contains(left, dead) && strings.Contains(left, "SYN_SENT") {
		t.Errorf("stale half-open entries are left after the probe:\n%s", left)
	}
	if !strings.Contains(left, "sport=39999") {
		t.Errorf("the established entry of port 39999 is gone:\n%s", left)
	}
}
