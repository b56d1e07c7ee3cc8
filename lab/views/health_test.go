package views_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/lab/views"
	"github.com/svclab/svclab/lab/views/viewstest"
)

// waitHealth waits for a health frame that ok accepts.
func waitHealth(t *testing.T, sub *views.Subscriber, ok func(views.Health) bool) views.Health {
	t.Helper()
	deadline := time.After(30 * time.Second)
	var last views.Health
	for {
		select {
		case <-deadline:
			t.Fatalf("no such health; the last: %+v", last)
		case <-sub.Ready():
		}
		for _, f := range sub.Take() {
			var fr struct {
				Topic string       `json:"topic"`
				Data  views.Health `json:"data"`
			}
			if json.Unmarshal(f, &fr) == nil && fr.Topic == views.TopicHealth {
				last = fr.Data
				if ok(fr.Data) {
					return fr.Data
				}
			}
		}
	}
}

func part(h views.Health, id string) views.HealthPart {
	for _, p := range h.Parts {
		if p.ID == id {
			return p
		}
	}
	return views.HealthPart{}
}

// The health watch says in a learner's words what broke, and leaves alone
// what the scenario breaks on purpose.
func TestHealth(t *testing.T) {
	c := viewstest.New("lab", "table ip kube-proxy {\n}\n", "10.244.1.5")
	for _, tc := range []struct {
		name      string
		break_    []string
		disturbed map[string]bool
		state     string
		summary   string
		skipped   string
	}{
		{name: "healthy", state: views.HealthHealthy, summary: "The lab is healthy (API server, nodes, traffic between nodes, kube-proxy, DNS)."},
		{name: "a proxier stuck", break_: []string{"proxier/lab-worker"}, state: views.HealthDegraded,
			summary: "kube-proxy on lab-worker has not synced its rules for 1m0s."},
		{name: "a proxier gone", break_: []string{"proxier-dead/lab-control-plane"}, state: views.HealthDegraded,
			summary: "kube-proxy on lab-control-plane is not running."},
		{name: "the scenario stops a proxier", break_: []string{"proxier/lab-worker"}, disturbed: map[string]bool{views.PartProxier: true},
			state: views.HealthHealthy, skipped: views.PartProxier},
		{name: "traffic cut and DNS down", break_: []string{"fabric/lab-worker", "dns"}, state: views.HealthDegraded,
			summary: "Traffic between the nodes does not flow: lab-control-plane cannot reach lab-worker. (and 1 more problem)"},
		{name: "DNS down", break_: []string{"dns"}, state: views.HealthDegraded,
			summary: "DNS does not answer: lab-control-plane got no address for kubernetes.default.svc.cluster.local from 10.96.0.10."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, b := range tc.break_ {
				c.Break(b)
				defer c.Mend(b)
			}
			lab, err := views.Start(context.Background(), views.Config{Cluster: c, Services: []string{"shop/web"}, Disturbed: tc.disturbed})
			if err != nil {
				t.Fatal(err)
			}
			defer lab.Stop()
			sub := lab.Bus().Subscribe()
			defer sub.Close()
			h := waitHealth(t, sub, func(h views.Health) bool { return h.State != views.HealthChecking })
			if h.State != tc.state || (tc.summary != "" && h.Summary != tc.summary) {
				t.Errorf("health %s %q, want %s %q", h.State, h.Summary, tc.state, tc.summary)
			}
			if h.StartOver != (tc.state != views.HealthHealthy) {
				t.Errorf("start over offered: %v", h.StartOver)
			}
			if tc.skipped != "" && !part(h, tc.skipped).Skipped {
				t.Errorf("%s is watched: %+v", tc.skipped, part(h, tc.skipped))
			}
			for _, p := range h.Parts {
				if !p.OK && !p.Skipped && p.Detail == "" {
					t.Errorf("%s is broken without details: %+v", p.ID, p)
				}
			}
			if got := lab.Health(); got.State != h.State {
				t.Errorf("Health() %s, the frame %s", got.State, h.State)
			}
		})
	}
	// A node that stops being Ready turns the lab degraded while it runs,
	// and the timeline says so.
	lab, err := views.Start(context.Background(), views.Config{Cluster: c, Services: []string{"shop/web"}})
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Stop()
	sub := lab.Bus().Subscribe()
	defer sub.Close()
	waitHealth(t, sub, func(h views.Health) bool { return h.State == views.HealthHealthy })
	n, _ := c.Clientset().CoreV1().Nodes().Get(context.Background(), "lab-worker", metav1.GetOptions{})
	n.Status.Conditions[0].Status, n.Status.Conditions[0].Reason, n.Status.Conditions[0].Message = corev1.ConditionFalse, "KubeletNotReady", "PLEG is not healthy"
	c.Clientset().CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{})
	h := waitHealth(t, sub, func(h views.Health) bool { return h.State == views.HealthDegraded })
	if h.Summary != "Node lab-worker is not Ready." || !strings.Contains(part(h, views.PartNodes).Detail, "PLEG is not healthy") {
		t.Errorf("not ready: %+v", h)
	}
}
