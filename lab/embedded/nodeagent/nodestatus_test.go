//go:build linux

package nodeagent

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func readyCondition(n *corev1.Node) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	return corev1.NodeCondition{}
}

func TestNodeObject(t *testing.T) {
	cfg := Config{NodeName: "lab-worker", NodeIP: "172.29.1.3", StateDir: t.TempDir()}
	n := nodeObject(cfg, "1.1.5", nil)
	// Only the labels a kubelet keeps reconciling: anything else the node
	// sent would come back on every status update.
	if n.Labels["kubernetes.io/hostname"] != "lab-worker" || len(n.Labels) != 5 {
		t.Errorf("labels %v", n.Labels)
	}
	if n.Status.Addresses[0] != (corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "172.29.1.3"}) || n.Status.DaemonEndpoints.KubeletEndpoint.Port != KubeletPort {
		t.Errorf("addresses %v, kubelet endpoint %v", n.Status.Addresses, n.Status.DaemonEndpoints)
	}
	if c := readyCondition(n); c.Status != corev1.ConditionTrue || c.Reason != "KubeletReady" {
		t.Errorf("Ready %+v", c)
	}
	n = nodeObject(cfg, "unknown", runtimeCheck(func(string) (string, error) { return "", errors.New("not found") }))
	if c := readyCondition(n); c.Status != corev1.ConditionFalse || c.Reason != "KubeletNotReady" || !strings.Contains(c.Message, "container runtime is down: runc is not installed") {
		t.Errorf("Ready without runc %+v", c)
	}
}

// TestNodeProviderReportsRuntime: runc going away makes the node
// NotReady, and coming back Ready again.
func TestNodeProviderReportsRuntime(t *testing.T) {
	var missing atomic.Bool
	lookPath := func(string) (string, error) {
		if missing.Load() {
			return "", errors.New("not found")
		}
		return "/usr/sbin/runc", nil
	}
	p := nodeProvider{node: nodeObject(Config{NodeName: "n", NodeIP: "172.29.1.3", StateDir: t.TempDir()}, "1", nil), lookPath: lookPath, interval: 10 * time.Millisecond}
	updates := make(chan *corev1.Node, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.NotifyNodeStatus(ctx, func(n *corev1.Node) { updates <- n })
	select {
	case n := <-updates:
		t.Fatalf("an update with nothing changed: %+v", readyCondition(n))
	case <-time.After(50 * time.Millisecond):
	}
	missing.Store(true)
	for _, want := range []corev1.ConditionStatus{corev1.ConditionFalse, corev1.ConditionTrue} {
		select {
		case n := <-updates:
			if got := readyCondition(n).Status; got != want {
				t.Fatalf("Ready %s, want %s", got, want)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("no update to Ready %s", want)
		}
		missing.Store(false)
	}
}
