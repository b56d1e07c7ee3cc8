package model

import (
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Topology modes chosen from endpoint hints.
const (
	TopologyNone           = ""
	TopologyPreferSameZone = v1.ServiceTrafficDistributionPreferSameZone
	TopologyPreferSameNode = v1.ServiceTrafficDistributionPreferSameNode
)

// Categorized is the result of CategorizeEndpoints.
type Categorized struct {
	// Cluster holds the usable endpoints for Cluster traffic policy, with
	// topology filtering applied; nil if the port never uses Cluster policy.
	Cluster []Endpoint
	// Local holds the usable local endpoints for Local traffic policy; nil if
	// the port never uses Local policy.
	Local []Endpoint
	// AllReachable is the union of Cluster and Local, sorted by "IP:port":
	// the endpoints this node may DNAT to.
	AllReachable []Endpoint
	// HasAnyEndpoints is true if the Service has usable endpoints anywhere in
	// the cluster (even if none are reachable from this node).
	HasAnyEndpoints bool
	// TopologyMode is the mode picked from the hints for Cluster policy.
	TopologyMode string
}

// CategorizeEndpoints splits sp's endpoints into the Cluster and Local lists
// the way kube-proxy v1.37 does (pkg/proxy/topology.go):
//
//   - Cluster: Ready endpoints, filtered by the topology mode derived from the
//     hints; if that is empty, all serving+terminating endpoints (topology
//     ignored).
//   - Local: local Ready endpoints if there are any, else local
//     serving+terminating endpoints. Topology never applies.
//   - AllReachable: the union.
func CategorizeEndpoints(sp *ServicePort, nodeName string, topologyLabels map[string]string) Categorized {
	var c Categorized
	endpoints := sp.Endpoints
	if len(endpoints) == 0 {
		return c
	}
	zone := topologyLabels[v1.LabelTopologyZone]

	useServingTerminating := false
	if sp.UsesClusterEndpoints() {
		c.TopologyMode = topologyModeFromHints(endpoints, nodeName, zone)
		c.Cluster = filter(endpoints, func(ep Endpoint) bool {
			return ep.Ready && availableForTopology(ep, c.TopologyMode, nodeName, zone)
		})
		// No ready endpoints for the chosen topology means no ready
		// endpoints at all (the mode is only chosen if one matches), so
		// fall back to serving+terminating endpoints anywhere.
		if len(c.Cluster) == 0 {
			c.Cluster = filter(endpoints, func(ep Endpoint) bool { return ep.Serving && ep.Terminating })
		}
		if len(c.Cluster) > 0 {
			c.HasAnyEndpoints = true
		}
	}

	if !sp.UsesLocalEndpoints() {
		c.AllReachable = c.Cluster
		return c
	}

	var localReady, localServingTerminating bool
	for _, ep := range endpoints {
		if ep.Ready {
			c.HasAnyEndpoints = true
			if ep.Local {
				localReady = true
			}
		} else if ep.Serving && ep.Terminating {
			c.HasAnyEndpoints = true
			if ep.Local {
				localServingTerminating = true
			}
		}
	}
	switch {
	case localReady:
		c.Local = filter(endpoints, func(ep Endpoint) bool { return ep.Local && ep.Ready })
	case localServingTerminating:
		useServingTerminating = true
		c.Local = filter(endpoints, func(ep Endpoint) bool { return ep.Local && ep.Serving && ep.Terminating })
	}

	if !sp.UsesClusterEndpoints() {
		c.AllReachable = c.Local
		return c
	}
	if c.TopologyMode == TopologyNone && !useServingTerminating {
		// Cluster holds every Ready endpoint, Local only Ready ones: Cluster
		// is a superset.
		c.AllReachable = c.Cluster
		return c
	}

	seen := make(map[string]bool, len(c.Cluster)+len(c.Local))
	for _, list := range [][]Endpoint{c.Cluster, c.Local} {
		for _, ep := range list {
			if !seen[ep.String()] {
				seen[ep.String()] = true
				c.AllReachable = append(c.AllReachable, ep)
			}
		}
	}
	slices.SortFunc(c.AllReachable, func(a, b Endpoint) int { return strings.Compare(a.String(), b.String()) })
	return c
}

// topologyModeFromHints picks PreferSameNode if every ready endpoint has node
// hints and one is for this node; else PreferSameZone if every ready endpoint
// has zone hints and one is for this node's zone; else no topology.
func topologyModeFromHints(endpoints []Endpoint, nodeName, zone string) string {
	hasReady := false
	allNode, forNode := true, false
	allZone, forZone := true, false
	for _, ep := range endpoints {
		if !ep.Ready {
			continue
		}
		hasReady = true
		if len(ep.NodeHints) == 0 {
			allNode = false
		} else if slices.Contains(ep.NodeHints, nodeName) {
			forNode = true
		}
		if len(ep.ZoneHints) == 0 {
			allZone = false
		} else if slices.Contains(ep.ZoneHints, zone) {
			forZone = true
		}
	}
	switch {
	case !hasReady:
		return TopologyNone
	case allNode && forNode:
		return TopologyPreferSameNode
	case allZone && forZone:
		return TopologyPreferSameZone
	}
	return TopologyNone
}

func availableForTopology(ep Endpoint, mode, nodeName, zone string) bool {
	switch mode {
	case TopologyNone:
		return true
	case TopologyPreferSameNode:
		return slices.Contains(ep.NodeHints, nodeName)
	case TopologyPreferSameZone:
		return slices.Contains(ep.ZoneHints, zone)
	}
	return false
}

func filter(endpoints []Endpoint, keep func(Endpoint) bool) []Endpoint {
	out := make([]Endpoint, 0, len(endpoints))
	for _, ep := range endpoints {
		if keep(ep) {
			out = append(out, ep)
		}
	}
	return out
}
