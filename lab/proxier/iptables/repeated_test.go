package iptables

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/proxier/model"
)

func yamlClusterIP(ns, name, ip, portName string, port int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {namespace: %s, name: %s}
spec:
  clusterIP: %s
  ports: [{name: %s, port: %d, protocol: TCP}]
---
`, ns, name, ip, portName, port)
}

func yamlSlice(ns, svc, portName string, port int, ips ...string) string {
	var eps []string
	for _, ip := range ips {
		eps = append(eps, "{addresses: ["+ip+"]}")
	}
	return fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: %s, name: %s-1, labels: {kubernetes.io/service-name: %s}}
addressType: IPv4
endpoints: [%s]
ports: [{name: %s, port: %d, protocol: TCP}]
---
`, ns, svc, svc, strings.Join(eps, ", "), portName, port)
}

// natChains lists the chains declared in the nat table of a restore input.
func natChains(restore string) []string {
	var out []string
	inNAT := false
	for _, l := range strings.Split(restore, "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			inNAT = l == "*nat"
		case inNAT && strings.HasPrefix(l, ":"):
			out = append(out, strings.Fields(l[1:])[0])
		}
	}
	return out
}

// TestSyncProxyRulesRepeated transcribes the first steps of upstream's test
// of the same name: partial syncs only write the chains of changed
// Services, and deleted Services' chains are removed with -X.
func TestSyncProxyRulesRepeated(t *testing.T) {
	svc1 := yamlClusterIP("ns1", "svc1", "172.30.0.41", "p80", 80) + yamlSlice("ns1", "svc1", "p80", 80, "10.0.1.1")
	svc2 := yamlClusterIP("ns2", "svc2", "172.30.0.42", "p8080", 8080) + yamlSlice("ns2", "svc2", "p8080", 8080, "10.0.2.1")
	svc3 := yamlClusterIP("ns3", "svc3", "172.30.0.43", "p80", 80) + yamlSlice("ns3", "svc3", "p80", 80, "10.0.3.1")

	var prev *model.Snapshot
	existing := map[string]bool{}
	steps := []struct {
		manifest    string
		wantChanged []string
		wantDeleted []string
	}{
		{svc1 + svc2, nil, nil},
		{svc1 + svc2 + svc3, []string{"ns3/svc3"}, nil},
		{svc1 + svc3, []string{"ns2/svc2"}, []string{"KUBE-SEP-UHEGFW77JX3KXTOV", "KUBE-SVC-2VJB64SDSIJUP5T6"}},
	}
	var names NameCache
	for i, step := range steps {
		snap := decodeSnapshot(t, "step"+strconv.Itoa(i+1), step.manifest)
		opts := Options{Names: &names}
		for c := range existing {
			opts.ExistingNATChains = append(opts.ExistingNATChains, c)
		}
		if prev != nil {
			opts.Changed = model.ChangedServices(prev, snap)
			var got []string
			for n := range opts.Changed {
				got = append(got, n.String())
			}
			slices.Sort(got)
			if !slices.Equal(got, step.wantChanged) {
				t.Errorf("step %d: changed = %v, want %v", i+1, got, step.wantChanged)
			}
		}
		res := render(t, upstreamConfig(), snap, opts)
		assertRestoreEqual(t, readFile(t, fmt.Sprintf("testdata/upstream/repeated-%d.iptables", i+1)), res.Restore)
		if !slices.Equal(res.DeletedChains, step.wantDeleted) {
			t.Errorf("step %d: deleted %v, want %v", i+1, res.DeletedChains, step.wantDeleted)
		}
		for _, c := range natChains(res.Restore) {
			existing[c] = true
		}
		for _, c := range res.DeletedChains {
			delete(existing, c)
		}
		// ServiceChains is what the applier remembers instead of running
		// iptables-save: the service chains the table now holds.
		var want, got []string
		for c := range existing {
			if isServiceChainName(c) {
				want = append(want, c)
			}
		}
		for c := range res.ServiceChains {
			got = append(got, c)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("step %d: service chains %v, want %v", i+1, got, want)
		}
		prev = snap
	}
}

// A partial sync still rewrites the whole of KUBE-SERVICES (and
// KUBE-NODEPORTS), as upstream's does: a Service's jump rule that someone
// deleted by hand comes back with the next sync of any other Service. (The
// nftables mode's partial syncs write only what changed, which is why the
// rule-deleted-resync scenario runs in nftables mode: see its explanation.)
func TestPartialSyncRewritesServicesChain(t *testing.T) {
	svc1 := yamlClusterIP("ns1", "svc1", "172.30.0.41", "p80", 80) + yamlSlice("ns1", "svc1", "p80", 80, "10.0.1.1")
	svc2 := yamlClusterIP("ns2", "svc2", "172.30.0.42", "p8080", 8080) + yamlSlice("ns2", "svc2", "p8080", 8080, "10.0.2.1")
	var names NameCache
	first := decodeSnapshot(t, "first", svc1)
	res := render(t, upstreamConfig(), first, Options{Names: &names})
	opts := Options{Names: &names, ExistingNATChains: natChains(res.Restore)}
	second := decodeSnapshot(t, "second", svc1+svc2)
	opts.Changed = model.ChangedServices(first, second)
	if len(opts.Changed) != 1 {
		t.Fatalf("changed %v, want only ns2/svc2", opts.Changed)
	}
	partial := render(t, upstreamConfig(), second, opts).Restore
	for _, want := range []string{":KUBE-SERVICES - [0:0]", ":KUBE-NODEPORTS - [0:0]", `-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP"`} {
		if !strings.Contains(partial, want) {
			t.Errorf("the partial sync (only ns2/svc2 changed) has no %q:\n%s", want, partial)
		}
	}
}
