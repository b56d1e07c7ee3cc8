//go:build linux

package flowtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"github.com/svclab/svclab/lab/proxier/manifest"
	"github.com/svclab/svclab/lab/proxier/model"
	"github.com/svclab/svclab/lab/proxier/nftables"
)

// TestBatchingFreshTable programs the same snapshot (the flow test's
// Services, which cover affinity, eTP Local, firewalls and more, and 150
// plain ones) into two new namespaces: once through nftables.Batching,
// which builds a new table's service chains in steps, and once as the
// single "nft -f" transaction knftables writes. The listed tables must be
// identical.
func TestBatchingFreshTable(t *testing.T) {
	requireRoot(t, "nft")
	ctx := t.Context()
	data, err := os.ReadFile("testdata/flows.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.Decode(bytes.NewReader(data), "testdata/flows.yaml")
	if err != nil {
		t.Fatal(err)
	}
	svcs, slices := objs.Services, objs.EndpointSlices
	for i := range 150 {
		name := fmt.Sprintf("bulk-%03d", i)
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "bulk", Name: name},
			Spec: v1.ServiceSpec{
				Type: v1.ServiceTypeNodePort, ClusterIP: fmt.Sprintf("10.96.200.%d", i+1),
				Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: int32(31000 + i)}},
			},
		}
		if i%10 == 0 {
			svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		}
		svcs = append(svcs, svc)
		es := &discovery.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "bulk", Name: name + "-0", Labels: map[string]string{discovery.LabelServiceName: name}},
			AddressType: discovery.AddressTypeIPv4,
			Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8080)}},
		}
		for j := range 4 {
			es.Endpoints = append(es.Endpoints, discovery.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.244.%d.%d", 100+i/50, (i%50)*5+j+1)},
				NodeName:   ptr.To([]string{flowNode, "other-node"}[j%2]),
				Conditions: discovery.EndpointConditions{Ready: ptr.To(true)},
			})
		}
		slices = append(slices, es)
	}
	snap, err := model.Build(ctx, nil, model.Input{
		Family: v1.IPv4Protocol, NodeName: flowNode, Node: objs.Node(flowNode), Services: svcs, EndpointSlices: slices,
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := nftables.Config{
		Family: v1.IPv4Protocol, NodeIP: net.ParseIP("192.168.77.1"),
		ClusterCIDR: clusterCIDR, ServiceCIDRs: []string{serviceCIDR},
	}

	rendered, err := nftables.Render(ctx, nil, cfg, snap)
	if err != nil {
		t.Fatal(err)
	}
	chunks, _ := nftables.SplitFreshTransaction(nftables.BatchTransaction(rendered.Transaction, nil), 25)
	if len(chunks) < 5 {
		t.Fatalf("the transaction splits into %d steps, want several", len(chunks))
	}

	lab := newSandbox(t, "bt")
	batched, err := lab.Netns(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := lab.Netns(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	err = batched.Do(func() error {
		nft, err := knftables.New(knftables.IPv4Family, nftables.Table, knftables.UseNetlink)
		if err != nil {
			return err
		}
		b := &nftables.Batching{Interface: nft, MinOperations: 1, ChunkRules: 25, Logger: testLogger(t)}
		s, err := nftables.New(cfg, b, nil)
		if err != nil {
			return err
		}
		if _, err := s.Sync(context.Background(), snap); err != nil {
			return err
		}
		if b.Steps != len(chunks)+1 {
			return fmt.Errorf("the first sync ran %d nft transactions, want %d", b.Steps, len(chunks)+1)
		}
		// A second full sync goes into the existing table in one step.
		s.ForceFullSync()
		_, err = s.Sync(context.Background(), snap)
		return err
	})
	if err != nil {
		t.Fatalf("sync through Batching: %v", err)
	}
	if err := ApplyNFTables(ctx, plain, rendered.Transaction); err != nil {
		t.Fatal(err)
	}
	got, err := ListNFTables(ctx, batched)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ListNFTables(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(want, "numgen random mod 4") || !strings.Contains(want, "update @affinity-") {
		t.Fatalf("the ruleset lacks the rules the test is about:\n%s", want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("table built in steps differs from the single transaction's (-single +steps):\n%s", diff)
	}
}
