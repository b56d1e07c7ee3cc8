//go:build linux

package nftables

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"github.com/svclab/svclab/lab/proxier/model"
)

// benchObjects is the workload of lab/proxier/bench: n Services with ten
// endpoints each over three nodes, the first nodePorts of them NodePort
// Services.
func benchObjects(n, nodePorts int) ([]*v1.Service, []*discovery.EndpointSlice) {
	nodes := []string{testNodeName, "node-b", "node-c"}
	var svcs []*v1.Service
	var slices []*discovery.EndpointSlice
	for i := range n {
		name := fmt.Sprintf("svc-%05d", i)
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name},
			Spec: v1.ServiceSpec{
				Type:      v1.ServiceTypeClusterIP,
				ClusterIP: fmt.Sprintf("172.30.%d.%d", i/250, i%250+1),
				Ports:     []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
			},
		}
		if i < nodePorts {
			svc.Spec.Type = v1.ServiceTypeNodePort
			svc.Spec.Ports[0].NodePort = int32(30000 + i)
		}
		svcs = append(svcs, svc)
		es := &discovery.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "bench", Name: name + "-0", Labels: map[string]string{discovery.LabelServiceName: name}},
			AddressType: discovery.AddressTypeIPv4,
			Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8080)}},
		}
		for j := range 10 {
			k := i*10 + j
			es.Endpoints = append(es.Endpoints, discovery.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 128+k>>16, k>>8&255, k&255)},
				NodeName:   ptr.To(nodes[j%3]),
				Conditions: discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			})
		}
		slices = append(slices, es)
	}
	return svcs, slices
}

func benchSnapshot(tb testing.TB, n int) *model.Snapshot {
	tb.Helper()
	svcs, slices := benchObjects(n, min(n, 2491))
	snap, err := model.Build(context.Background(), nil, model.Input{
		Family: v1.IPv4Protocol, NodeName: testNodeName, Services: svcs, EndpointSlices: slices,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return snap
}

func benchConfig() Config {
	return Config{
		Family:       v1.IPv4Protocol,
		NodeIP:       net.ParseIP(testNodeIP),
		ClusterCIDR:  "10.128.0.0/9",
		ServiceCIDRs: []string{"172.30.0.0/16"},
	}
}

// textOnly is a knftables.Interface on an empty table (a Fake that is
// never run, so listing finds no table) that renders every
// transaction as Batching would pipe it into nft, and keeps the last text.
type textOnly struct {
	knftables.Interface
	last string
}

func (t *textOnly) Run(_ context.Context, tx *knftables.Transaction) error {
	t.last = BatchTransaction(tx.String(), nil)
	return nil
}

// BenchmarkFullSyncText measures what a full sync computes before nft
// runs: the model's categorization, the transaction and its batched text.
// With SVCLAB_NFT_DUMP=FILE it writes the text of each size's sync to
// FILE.SIZE (to time "nft -f" on its own).
func BenchmarkFullSyncText(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			snap := benchSnapshot(b, n)
			nft := &textOnly{Interface: knftables.NewFake(knftables.IPv4Family, Table)}
			s, err := New(benchConfig(), nft, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				s.ForceFullSync()
				if _, err := s.Sync(context.Background(), snap); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(nft.last))/(1<<20), "MiB-text")
			if path := os.Getenv("SVCLAB_NFT_DUMP"); path != "" {
				if err := os.WriteFile(path+"."+strconv.Itoa(n), []byte(nft.last), 0o644); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPartialSyncText measures the Go side of a partial sync in
// which one Service's endpoints changed, with 10,000 Services. With
// SVCLAB_NFT_DUMP=FILE it writes the transaction to FILE.partial.
func BenchmarkPartialSyncText(b *testing.B) {
	const n = 10000
	svcs, slices := benchObjects(n, 2491)
	var builder model.Builder
	build := func() *model.Snapshot {
		snap, err := builder.Build(context.Background(), nil, model.Input{
			Family: v1.IPv4Protocol, NodeName: testNodeName, Services: svcs, EndpointSlices: slices,
		})
		if err != nil {
			b.Fatal(err)
		}
		return snap
	}
	nft := &textOnly{Interface: knftables.NewFake(knftables.IPv4Family, Table)}
	s, err := New(benchConfig(), nft, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Sync(context.Background(), build()); err != nil {
		b.Fatal(err)
	}
	gen := 0
	b.ReportAllocs()
	for b.Loop() {
		gen++
		es := slices[n/2].DeepCopy()
		es.Endpoints[9].Addresses = []string{fmt.Sprintf("10.255.255.%d", gen%250+1)}
		slices[n/2] = es
		if _, err := s.Sync(context.Background(), build()); err != nil {
			b.Fatal(err)
		}
	}
	if path := os.Getenv("SVCLAB_NFT_DUMP"); path != "" {
		if err := os.WriteFile(path+".partial", []byte(nft.last), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
