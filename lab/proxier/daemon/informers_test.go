//go:build linux

package daemon

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/svclab/svclab/lab/proxier/events"
)

func TestRunInformers(t *testing.T) {
	h := newHarness(t)
	objs := decode(t, baseObjects)
	var initial []runtime.Object
	for _, s := range objs.Services {
		initial = append(initial, s)
	}
	for _, s := range objs.EndpointSlices {
		initial = append(initial, s)
	}
	other := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2", Labels: map[string]string{v1.LabelTopologyZone: "zone-z"}}}
	initial = append(initial, objs.Node(testNode), other,
		&networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"172.30.0.0/16"}}},
	)
	client := fake.NewClientset(initial...)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := RunInformers(ctx, discardLogger(), client, h.p, 0); err != nil {
		t.Fatal(err)
	}
	// Once both Services and EndpointSlices are synced, the node is
	// programmed at once (not through the sync runner, as upstream).
	if ev := h.nextEvent(t); !ev.Full || ev.Reason != ReasonInitial || len(ev.ServicesChanged) != 3 {
		t.Fatalf("initial sync event %+v", ev)
	}
	waitFor(t, func() bool { return h.p.Node() != nil })
	if h.p.Node().Name != testNode {
		t.Fatalf("node %s", h.p.Node().Name)
	}
	waitFor(t, func() bool {
		h.p.mu.Lock()
		defer h.p.mu.Unlock()
		return len(h.p.st.serviceCIDRs) == 1
	})

	// An EndpointSlice update reaches the rules through the informer.
	sl := objs.EndpointSlices[0].DeepCopy()
	sl.Endpoints[1].Addresses = []string{"10.180.2.77"}
	sl.ResourceVersion = "2"
	if _, err := client.DiscoveryV1().EndpointSlices(sl.Namespace).Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		h.p.mu.Lock()
		defer h.p.mu.Unlock()
		return len(h.p.st.pendingEndpoints) == 1
	})
	h.clock.Step(2 * time.Second)
	// (Full if this node's Node object arrived after the initial sync: its
	// topology labels force one.)
	ev := h.syncOne(events.KindSync)
	if !slices.Equal(ev.EndpointsChanged, []string{"demo/web"}) || !strings.Contains(h.nft.Dump(), "10.180.2.77") {
		t.Errorf("event %+v", ev)
	}

	// Deleting a Service removes its rules.
	if err := client.CoreV1().Services("demo").Delete(ctx, "lb", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		h.p.mu.Lock()
		defer h.p.mu.Unlock()
		return len(h.p.st.pendingServices) == 1
	})
	ev = h.syncOne(events.KindSync)
	if !slices.Equal(ev.ServicesChanged, []string{"demo/lb"}) || strings.Contains(h.nft.Dump(), "172.30.0.20") {
		t.Errorf("after delete: %+v", ev)
	}

	// A zone change of this node forces a full sync; node-2 is ignored.
	node := objs.Node(testNode).DeepCopy()
	node.Labels[v1.LabelTopologyZone] = "zone-b"
	if _, err := client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return h.p.Node().Labels[v1.LabelTopologyZone] == "zone-b" })
	if ev := h.syncOne(events.KindSync); !ev.Full || ev.Reason != ReasonTopology {
		t.Errorf("topology event %+v", ev)
	}
}
