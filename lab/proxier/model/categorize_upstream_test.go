package model

// Cases transcribed from upstream kube-proxy v1.37.2
// pkg/proxy/topology_test.go TestCategorizeEndpoints. The case that disables
// the PreferSameTrafficDistribution gate is left out: the gate is GA and
// locked on since v1.35.

import (
	"slices"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// tep mirrors the fields upstream's test sets on BaseEndpointInfo.
type tep struct {
	endpoint                    string
	zoneHints, nodeHints        []string
	ready, serving, terminating bool
	isLocal                     bool
}

// tsvc mirrors the fields upstream's test sets on BaseServicePortInfo.
type tsvc struct {
	internalPolicyLocal, externalPolicyLocal bool
	nodePort                                 int
}

func strs(s ...string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (e tep) toEndpoint(t *testing.T) Endpoint {
	t.Helper()
	i := len(e.endpoint) - 1
	for e.endpoint[i] != ':' {
		i--
	}
	port, err := strconv.Atoi(e.endpoint[i+1:])
	if err != nil {
		t.Fatalf("bad endpoint %q: %v", e.endpoint, err)
	}
	zh := slices.Clone(e.zoneHints)
	slices.Sort(zh)
	nh := slices.Clone(e.nodeHints)
	slices.Sort(nh)
	return Endpoint{IP: e.endpoint[:i], Port: port, Local: e.isLocal, Ready: e.ready, Serving: e.serving, Terminating: e.terminating, ZoneHints: zh, NodeHints: nh}
}

func endpointStrings(eps []Endpoint) []string {
	out := make([]string, 0, len(eps))
	for _, ep := range eps {
		out = append(out, ep.String())
	}
	slices.Sort(out)
	return out
}

func TestCategorizeEndpointsUpstream(t *testing.T) {
	testCases := []struct {
		name        string
		nodeName    string
		nodeLabels  map[string]string
		serviceInfo tsvc
		endpoints   []tep

		// nil means "service doesn't use this kind of endpoints"; an empty
		// list means "uses them but has none". allEndpoints may be left
		// unset if only one of cluster/local is set.
		clusterEndpoints    []string
		localEndpoints      []string
		allEndpoints        []string
		onlyRemoteEndpoints bool
	}{{
		name:        "should use topology since all endpoints have hints, node has a zone label and and there are endpoints for the node's zone",
		nodeLabels:  map[string]string{v1.LabelTopologyZone: "zone-a"},
		serviceInfo: tsvc{},
		endpoints: []tep{
			tep{endpoint: "10.1.2.3:80", zoneHints: strs("zone-a"), ready: true},
			tep{endpoint: "10.1.2.4:80", zoneHints: strs("zone-b"), ready: true},
			tep{endpoint: "10.1.2.5:80", zoneHints: strs("zone-c"), ready: true},
			tep{endpoint: "10.1.2.6:80", zoneHints: strs("zone-a"), ready: true},
		},
		clusterEndpoints: strs("10.1.2.3:80", "10.1.2.6:80"),
		localEndpoints:   nil,
	}, {
		name:        "externalTrafficPolicy: Local, topology ignored for Local endpoints",
		nodeLabels:  map[string]string{v1.LabelTopologyZone: "zone-a"},
		serviceInfo: tsvc{externalPolicyLocal: true, nodePort: 8080},
		endpoints: []tep{
			tep{endpoint: "10.1.2.3:80", zoneHints: strs("zone-a"), ready: true, isLocal: true},
			tep{endpoint: "10.1.2.4:80", zoneHints: strs("zone-b"), ready: true, isLocal: true},
			tep{endpoint: "10.1.2.5:80", zoneHints: strs("zone-c"), ready: true},
			tep{endpoint: "10.1.2.6:80", zoneHints: strs("zone-a"), ready: true},
		},
		clusterEndpoints: strs("10.1.2.3:80", "10.1.2.6:80"),
		localEndpoints:   strs("10.1.2.3:80", "10.1.2.4:80"),
		allEndpoints:     strs("10.1.2.3:80", "10.1.2.4:80", "10.1.2.6:80"),
	}, {
		name:        "internalTrafficPolicy: Local, topology ignored for Local endpoints",
		nodeLabels:  map[string]string{v1.LabelTopologyZone: "zone-a"},
		serviceInfo: tsvc{internalPolicyLocal: true, externalPolicyLocal: false, nodePort: 8080},
		endpoints: []tep{
			tep{endpoint: "10.1.2.3:80", zoneHints: strs("zone-a"), ready: true, isLocal: true},
			tep{endpoint: "10.1.2.4:80", zoneHints: strs("zone-b"), ready: true, isLocal: true},
			tep{endpoint: "10.1.2.5:80", zoneHints: strs("zone-c"), ready: true},
			tep{endpoint: "10.1.2.6:80", zoneHints: strs("zone-a"), ready: true},
		},
		clusterEndpoints: strs("10.1.2.3:80", "10.1.2.6:80"),
		localEndpoints:   strs("10.1.2.3:80", "10.1.2.4:80"),
		allEndpoints:     strs("10.1.2.3:80", "10.1.2.4:80", "10.1.2.6:80"),
	}, {
		name:        "empty node labels",
		nodeLabels:  map[string]string{},
		serviceInfo: tsvc{},
		endpoints: []tep{
			tep{endpoint: "10.1.2.3:80", zoneHints: strs("zone-a"), ready: true},
		},
		clusterEndpoints: strs("10.1.2.3:80"),
		localEndpoints:   nil,
	}, {
		name:        "empty zone label",
		nodeLabels:  map[string]string{v1.LabelTopologyZone: ""},
		serviceInfo: tsvc{},
		endpoints: []tep{
			tep{endpoint: "10.1.2.3:80", zoneHints: strs("zone-a"), ready: true},
		},
		clusterEndpoints: strs("10.1.2.3:80"),
		localEndpoints:   nil,
	}, {
		name:        "node in different zone, no endpoint filtering",
		nodeLabels:  map[string]string{v1.LabelTopologyZone: "zone-b"},
		serviceInfo: tsvc{},
		endpoints: []tep{
			tep{endpoint: "10.1.2.3:80", zoneHints: strs("zone-a"), ready: true},
		},
		clusterEndpoints: strs("10.1.2.3:80"),
		localEndpoints:   nil,
	}, {
		name:        "unready endpoint",
		nodeLabels:  map[string]string{v1.LabelTopologyZone: "zone-a"},
		serviceInfo: tsvc{},
		endpoints: []tep{
			tep{endpoint: "10.1.2.3:80", zoneHints: strs("zone-a"), ready: true},
			tep{endpoint: "10.1.2.4:80", zoneHints: strs("zone-b"), ready: true},
			tep{endpoint: "10.1.2.5:80", zoneHints: strs("zone-c"), ready: true},
			tep{endpoint: "10.1.2.6:80", zoneHints: strs("zone-a"), ready: false}, // unready
		},
		clusterEndpoints: strs("10.1.2.3:80"),
		localEndpoints:   nil,
	}, {
		name:        "only unready endpoints in same zone (should not filter)",
		nodeLabels:  map[string]string{v1.LabelTopologyZone: "zone-a"},
		serviceInfo: tsvc{},
		endpoints: []tep{
			tep{endpoint: "10.1.2.3:80", zoneHints: strs("zone-a"), ready: false},
			tep{endpoint: "10.1.2.4:80", zoneHints: strs("zone-b"), ready: true},
			tep{endpoint: "10.1.2.5:80", zoneHints: strs("zone-c"), ready: true},
			tep{endpoint: "10.1.2.6:80", zoneHints: strs("zone-a"), ready: false},
		},
		clusterEndpoints: strs("10.1.2.4:80", "10.1.2.5:80"),
		localEndpoints:   nil,
	}, {
		name:        "missing hints, no filtering applied",
		nodeLabels:  map[string]string{v1.LabelTopologyZone: "zone-a"},
		serviceInfo: tsvc{},
		endpoints: []tep{
			tep{endpoint: "10.1.2.3:80", zoneHints: strs("zone-a"), ready: true},
			tep{endpoint: "10.1.2.4:80", zoneHints: strs("zone-b"), ready: true},
			tep{endpoint: "10.1.2.5:80", zoneHints: nil, ready: true}, // Endpoint is missing hint.
			tep{endpoint: "10.1.2.6:80", zoneHints: strs("zone-a"), ready: true},
		},
		clusterEndpoints: strs("10.1.2.3:80", "10.1.2.4:80", "10.1.2.5:80", "10.1.2.6:80"),
		localEndpoints:   nil,
	}, {
		name:        "multiple hints per endpoint, filtering includes any endpoint with zone included",
		nodeLabels:  map[string]string{v1.LabelTopologyZone: "zone-c"},
		serviceInfo: tsvc{},
		endpoints: []tep{
			tep{endpoint: "10.1.2.3:80", zoneHints: strs("zone-a", "zone-b", "zone-c"), ready: true},
			tep{endpoint: "10.1.2.4:80", zoneHints: strs("zone-b", "zone-c"), ready: true},
			tep{endpoint: "10.1.2.5:80", zoneHints: strs("zone-b", "zone-d"), ready: true},
			tep{endpoint: "10.1.2.6:80", zoneHints: strs("zone-c"), ready: true},
		},
		clusterEndpoints: strs("10.1.2.3:80", "10.1.2.4:80", "10.1.2.6:80"),
		localEndpoints:   nil,
	}, {
		name:        "PreferSameNode available",
		nodeName:    "node-1",
		nodeLabels:  map[string]string{v1.LabelTopologyZone: "zone-a"},
		serviceInfo: tsvc{},
		endpoints: []tep{
			tep{endpoint: "10.1.2.3:80", zoneHints: strs("zone-a"), nodeHints: strs("node-1"), ready: true},
			tep{endpoint: "10.1.2.4:80", zoneHints: strs("zone-b"), nodeHints: strs("node-2"), ready: true},
			tep{endpoint: "10.1.2.5:80", zoneHints: strs("zone-c"), nodeHints: strs("node-3"), ready: true},
			tep{endpoint: "10.1.2.6:80", zoneHints: strs("zone-a"), nodeHints: strs("node-4"), ready: true},
		},
		clusterEndpoints: strs("10.1.2.3:80"),
		localEndpoints:   nil,
	}, {
		name:        "PreferSameNode ignored if some endpoints unhinted",
		nodeName:    "node-1",
		nodeLabels:  map[string]string{v1.LabelTopologyZone: "zone-a"},
		serviceInfo: tsvc{},
		endpoints: []tep{
			tep{endpoint: "10.1.2.3:80", zoneHints: strs("zone-a"), nodeHints: strs("node-1"), ready: true},
			tep{endpoint: "10.1.2.4:80", ready: true},
			tep{endpoint: "10.1.2.5:80", zoneHints: strs("zone-c"), nodeHints: strs("node-3"), ready: true},
			tep{endpoint: "10.1.2.6:80", zoneHints: strs("zone-a"), nodeHints: strs("node-4"), ready: true},
		},
		clusterEndpoints: strs("10.1.2.3:80", "10.1.2.4:80", "10.1.2.5:80", "10.1.2.6:80"),
		localEndpoints:   nil,
	}, {
		name:        "PreferSameNode falls back to PreferSameZone if no endpoint for node",
		nodeName:    "node-0",
		nodeLabels:  map[string]string{v1.LabelTopologyZone: "zone-a"},
		serviceInfo: tsvc{},
		endpoints: []tep{
			tep{endpoint: "10.1.2.3:80", zoneHints: strs("zone-a"), nodeHints: strs("node-1"), ready: true},
			tep{endpoint: "10.1.2.4:80", zoneHints: strs("zone-b"), nodeHints: strs("node-2"), ready: true},
			tep{endpoint: "10.1.2.5:80", zoneHints: strs("zone-c"), nodeHints: strs("node-3"), ready: true},
			tep{endpoint: "10.1.2.6:80", zoneHints: strs("zone-a"), nodeHints: strs("node-4"), ready: true},
		},
		clusterEndpoints: strs("10.1.2.3:80", "10.1.2.6:80"),
		localEndpoints:   nil,
	}, {
		name:        "conflicting topology and localness require merging allEndpoints",
		nodeLabels:  map[string]string{v1.LabelTopologyZone: "zone-a"},
		serviceInfo: tsvc{internalPolicyLocal: false, externalPolicyLocal: true, nodePort: 8080},
		endpoints: []tep{
			tep{endpoint: "10.0.0.0:80", zoneHints: strs("zone-a"), ready: true, isLocal: true},
			tep{endpoint: "10.0.0.1:80", zoneHints: strs("zone-b"), ready: true, isLocal: true},
			tep{endpoint: "10.0.0.2:80", zoneHints: strs("zone-a"), ready: true, isLocal: false},
			tep{endpoint: "10.0.0.3:80", zoneHints: strs("zone-b"), ready: true, isLocal: false},
		},
		clusterEndpoints: strs("10.0.0.0:80", "10.0.0.2:80"),
		localEndpoints:   strs("10.0.0.0:80", "10.0.0.1:80"),
		allEndpoints:     strs("10.0.0.0:80", "10.0.0.1:80", "10.0.0.2:80"),
	}, {
		name:             "internalTrafficPolicy: Local, with empty endpoints",
		serviceInfo:      tsvc{internalPolicyLocal: true},
		endpoints:        []tep{},
		clusterEndpoints: nil,
		localEndpoints:   strs(),
	}, {
		name:        "internalTrafficPolicy: Local, but all endpoints are remote",
		serviceInfo: tsvc{internalPolicyLocal: true},
		endpoints: []tep{
			tep{endpoint: "10.0.0.0:80", ready: true, isLocal: false},
			tep{endpoint: "10.0.0.1:80", ready: true, isLocal: false},
		},
		clusterEndpoints:    nil,
		localEndpoints:      strs(),
		onlyRemoteEndpoints: true,
	}, {
		name:        "internalTrafficPolicy: Local, all endpoints are local",
		serviceInfo: tsvc{internalPolicyLocal: true},
		endpoints: []tep{
			tep{endpoint: "10.0.0.0:80", ready: true, isLocal: true},
			tep{endpoint: "10.0.0.1:80", ready: true, isLocal: true},
		},
		clusterEndpoints: nil,
		localEndpoints:   strs("10.0.0.0:80", "10.0.0.1:80"),
	}, {
		name:        "internalTrafficPolicy: Local, some endpoints are local",
		serviceInfo: tsvc{internalPolicyLocal: true},
		endpoints: []tep{
			tep{endpoint: "10.0.0.0:80", ready: true, isLocal: true},
			tep{endpoint: "10.0.0.1:80", ready: true, isLocal: false},
		},
		clusterEndpoints: nil,
		localEndpoints:   strs("10.0.0.0:80"),
	}, {
		name:        "Cluster traffic policy, endpoints not Ready",
		serviceInfo: tsvc{},
		endpoints: []tep{
			tep{endpoint: "10.0.0.0:80", ready: false},
			tep{endpoint: "10.0.0.1:80", ready: false},
		},
		clusterEndpoints: strs(),
		localEndpoints:   nil,
	}, {
		name:        "Cluster traffic policy, some endpoints are Ready",
		serviceInfo: tsvc{},
		endpoints: []tep{
			tep{endpoint: "10.0.0.0:80", ready: false},
			tep{endpoint: "10.0.0.1:80", ready: true},
		},
		clusterEndpoints: strs("10.0.0.1:80"),
		localEndpoints:   nil,
	}, {
		name:        "Cluster traffic policy, all endpoints are terminating",
		serviceInfo: tsvc{},
		endpoints: []tep{
			tep{endpoint: "10.0.0.0:80", ready: false, serving: true, terminating: true, isLocal: true},
			tep{endpoint: "10.0.0.1:80", ready: false, serving: true, terminating: true, isLocal: false},
		},
		clusterEndpoints: strs("10.0.0.0:80", "10.0.0.1:80"),
		localEndpoints:   nil,
	}, {
		name:        "iTP: Local, eTP: Cluster, some endpoints local",
		serviceInfo: tsvc{internalPolicyLocal: true, externalPolicyLocal: false, nodePort: 8080},
		endpoints: []tep{
			tep{endpoint: "10.0.0.0:80", ready: true, isLocal: true},
			tep{endpoint: "10.0.0.1:80", ready: true, isLocal: false},
		},
		clusterEndpoints: strs("10.0.0.0:80", "10.0.0.1:80"),
		localEndpoints:   strs("10.0.0.0:80"),
		allEndpoints:     strs("10.0.0.0:80", "10.0.0.1:80"),
	}, {
		name:        "iTP: Cluster, eTP: Local, some endpoints local",
		serviceInfo: tsvc{internalPolicyLocal: false, externalPolicyLocal: true, nodePort: 8080},
		endpoints: []tep{
			tep{endpoint: "10.0.0.0:80", ready: true, isLocal: true},
			tep{endpoint: "10.0.0.1:80", ready: true, isLocal: false},
		},
		clusterEndpoints: strs("10.0.0.0:80", "10.0.0.1:80"),
		localEndpoints:   strs("10.0.0.0:80"),
		allEndpoints:     strs("10.0.0.0:80", "10.0.0.1:80"),
	}, {
		name:        "iTP: Local, eTP: Local, some endpoints local",
		serviceInfo: tsvc{internalPolicyLocal: true, externalPolicyLocal: true, nodePort: 8080},
		endpoints: []tep{
			tep{endpoint: "10.0.0.0:80", ready: true, isLocal: true},
			tep{endpoint: "10.0.0.1:80", ready: true, isLocal: false},
		},
		clusterEndpoints: strs("10.0.0.0:80", "10.0.0.1:80"),
		localEndpoints:   strs("10.0.0.0:80"),
		allEndpoints:     strs("10.0.0.0:80", "10.0.0.1:80"),
	}, {
		name:        "iTP: Local, eTP: Local, all endpoints remote",
		serviceInfo: tsvc{internalPolicyLocal: true, externalPolicyLocal: true, nodePort: 8080},
		endpoints: []tep{
			tep{endpoint: "10.0.0.0:80", ready: true, isLocal: false},
			tep{endpoint: "10.0.0.1:80", ready: true, isLocal: false},
		},
		clusterEndpoints: strs("10.0.0.0:80", "10.0.0.1:80"),
		localEndpoints:   strs(),
		allEndpoints:     strs("10.0.0.0:80", "10.0.0.1:80"),
	}, {
		name:        "iTP: Local, eTP: Local, all endpoints remote and terminating",
		serviceInfo: tsvc{internalPolicyLocal: true, externalPolicyLocal: true, nodePort: 8080},
		endpoints: []tep{
			tep{endpoint: "10.0.0.0:80", ready: false, serving: true, terminating: true, isLocal: false},
			tep{endpoint: "10.0.0.1:80", ready: false, serving: true, terminating: true, isLocal: false},
		},
		clusterEndpoints:    strs("10.0.0.0:80", "10.0.0.1:80"),
		localEndpoints:      strs(),
		allEndpoints:        strs("10.0.0.0:80", "10.0.0.1:80"),
		onlyRemoteEndpoints: true,
	}, {
		name:        "iTP: Cluster, eTP: Local, with terminating endpoints",
		serviceInfo: tsvc{internalPolicyLocal: false, externalPolicyLocal: true, nodePort: 8080},
		endpoints: []tep{
			tep{endpoint: "10.0.0.0:80", ready: true, isLocal: false},
			tep{endpoint: "10.0.0.1:80", ready: false, serving: false, isLocal: true},
			tep{endpoint: "10.0.0.2:80", ready: false, serving: true, terminating: true, isLocal: true},
			tep{endpoint: "10.0.0.3:80", ready: false, serving: true, terminating: true, isLocal: false},
		},
		clusterEndpoints: strs("10.0.0.0:80"),
		localEndpoints:   strs("10.0.0.2:80"),
		allEndpoints:     strs("10.0.0.0:80", "10.0.0.2:80"),
	}, {
		name:        "externalTrafficPolicy ignored if not externally accessible",
		serviceInfo: tsvc{externalPolicyLocal: true},
		endpoints: []tep{
			tep{endpoint: "10.0.0.0:80", ready: true, isLocal: false},
			tep{endpoint: "10.0.0.1:80", ready: true, isLocal: true},
		},
		clusterEndpoints: strs("10.0.0.0:80", "10.0.0.1:80"),
		localEndpoints:   nil,
		allEndpoints:     strs("10.0.0.0:80", "10.0.0.1:80"),
	}, {
		name:        "no cluster endpoints for iTP:Local internal-only service",
		serviceInfo: tsvc{internalPolicyLocal: true},
		endpoints: []tep{
			tep{endpoint: "10.0.0.0:80", ready: true, isLocal: false},
			tep{endpoint: "10.0.0.1:80", ready: true, isLocal: true},
		},
		clusterEndpoints: nil,
		localEndpoints:   strs("10.0.0.1:80"),
		allEndpoints:     strs("10.0.0.1:80"),
	}, {
		name:             "empty endpoints when no service endpoints exist",
		serviceInfo:      tsvc{},
		endpoints:        nil,
		clusterEndpoints: nil,
		localEndpoints:   nil,
		allEndpoints:     nil,
	}, {
		name:        "single endpoint not ready, not serving, not terminating",
		nodeLabels:  map[string]string{v1.LabelTopologyZone: "zone-a"},
		serviceInfo: tsvc{},
		endpoints: []tep{
			tep{endpoint: "10.0.0.0:80", ready: false, serving: false, terminating: false},
		},
		clusterEndpoints: strs(),
		localEndpoints:   nil,
	}}

	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			sp := &ServicePort{
				InternalPolicyLocal: tc.serviceInfo.internalPolicyLocal,
				ExternalPolicyLocal: tc.serviceInfo.externalPolicyLocal,
				NodePort:            tc.serviceInfo.nodePort,
			}
			for _, e := range tc.endpoints {
				sp.Endpoints = append(sp.Endpoints, e.toEndpoint(t))
			}
			got := CategorizeEndpoints(sp, tc.nodeName, tc.nodeLabels)

			check := func(kind string, want []string, got []Endpoint) {
				t.Helper()
				w := slices.Clone(want)
				slices.Sort(w)
				if g := endpointStrings(got); !slices.Equal(w, g) {
					t.Errorf("%s endpoints: want %v, got %v", kind, w, g)
				}
			}
			check("cluster", tc.clusterEndpoints, got.Cluster)
			check("local", tc.localEndpoints, got.Local)

			want := tc.allEndpoints
			switch {
			case len(tc.clusterEndpoints) != 0 && len(tc.localEndpoints) == 0:
				want = tc.clusterEndpoints
			case len(tc.localEndpoints) != 0 && len(tc.clusterEndpoints) == 0:
				want = tc.localEndpoints
			}
			check("all reachable", want, got.AllReachable)
			if !slices.IsSortedFunc(got.AllReachable, func(a, b Endpoint) int { return compareString(a.String(), b.String()) }) {
				t.Errorf("AllReachable not sorted: %v", endpointStrings(got.AllReachable))
			}
			if wantAny := len(want) > 0 || tc.onlyRemoteEndpoints; wantAny != got.HasAnyEndpoints {
				t.Errorf("HasAnyEndpoints: want %v, got %v", wantAny, got.HasAnyEndpoints)
			}
		})
	}
}

func compareString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

var _ = v1.LabelTopologyZone
