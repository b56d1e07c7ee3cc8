package daemon

import (
	"maps"
	"slices"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

// Labels that make kube-proxy ignore an object (its informers select
// "!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless").
const (
	labelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	labelHeadless         = v1.IsHeadlessService
)

func ignoredByProxy(labels map[string]string) bool {
	_, named := labels[labelServiceProxyName]
	_, headless := labels[labelHeadless]
	return named || headless
}

// store holds the API objects the proxier knows about and what changed
// since the last sync. It is guarded by Proxier.mu.
type store struct {
	services     map[types.NamespacedName]*v1.Service
	slices       map[types.NamespacedName]*discovery.EndpointSlice
	node         *v1.Node
	serviceCIDRs []string

	servicesSynced, slicesSynced bool

	// pendingServices and pendingEndpoints are the Services whose spec or
	// whose endpoints changed since the last sync.
	pendingServices  map[types.NamespacedName]bool
	pendingEndpoints map[types.NamespacedName]bool
	// triggerTimes are the EndpointSlices' last-change-trigger-time
	// annotations of the pending endpoint changes.
	triggerTimes map[types.NamespacedName][]time.Time
	// seenRV is the highest resourceVersion of the Services and
	// EndpointSlices handed to the proxier (see Proxier.Programmed).
	seenRV uint64
}

// see notes the resourceVersion of an object handed to the proxier. The
// API server's resourceVersions are etcd revisions, which only grow; one
// that is not a number (another storage) is not counted.
func (s *store) see(rv string) {
	if n, err := strconv.ParseUint(rv, 10, 64); err == nil && n > s.seenRV {
		s.seenRV = n
	}
}

func newStore() *store {
	return &store{
		services:         map[types.NamespacedName]*v1.Service{},
		slices:           map[types.NamespacedName]*discovery.EndpointSlice{},
		pendingServices:  map[types.NamespacedName]bool{},
		pendingEndpoints: map[types.NamespacedName]bool{},
		triggerTimes:     map[types.NamespacedName][]time.Time{},
	}
}

func nameOf(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: name}
}

func serviceDiffers(a, b *v1.Service) bool {
	if a == nil || b == nil {
		return a != b
	}
	if a.ResourceVersion != "" && a.ResourceVersion == b.ResourceVersion {
		return false
	}
	return !equality.Semantic.DeepEqual(a.Spec, b.Spec) || !equality.Semantic.DeepEqual(a.Status, b.Status)
}

func sliceDiffers(a, b *discovery.EndpointSlice) bool {
	if a == nil || b == nil {
		return a != b
	}
	if a.ResourceVersion != "" && a.ResourceVersion == b.ResourceVersion {
		return false
	}
	return a.AddressType != b.AddressType ||
		!equality.Semantic.DeepEqual(a.Endpoints, b.Endpoints) ||
		!equality.Semantic.DeepEqual(a.Ports, b.Ports) ||
		a.Labels[discovery.LabelServiceName] != b.Labels[discovery.LabelServiceName]
}

// setService records svc (nil: deleted) under name and reports whether
// anything changed.
func (s *store) setService(name types.NamespacedName, svc *v1.Service) bool {
	if svc != nil {
		s.see(svc.ResourceVersion)
	}
	if svc != nil && ignoredByProxy(svc.Labels) {
		svc = nil
	}
	old := s.services[name]
	if !serviceDiffers(old, svc) {
		// Keep the object the model was built from: the model reuses
		// what it built for an unchanged (identical) object.
		return false
	}
	if svc == nil {
		delete(s.services, name)
	} else {
		s.services[name] = svc
	}
	s.pendingServices[name] = true
	return true
}

// setSlice records slice (nil: deleted) under name and reports whether
// anything changed.
func (s *store) setSlice(name types.NamespacedName, slice *discovery.EndpointSlice) bool {
	if slice != nil {
		s.see(slice.ResourceVersion)
	}
	if slice != nil && ignoredByProxy(slice.Labels) {
		slice = nil
	}
	old := s.slices[name]
	if !sliceDiffers(old, slice) {
		return false
	}
	for _, sl := range []*discovery.EndpointSlice{old, slice} {
		if sl == nil {
			continue
		}
		if svc := sl.Labels[discovery.LabelServiceName]; svc != "" {
			nn := nameOf(sl.Namespace, svc)
			s.pendingEndpoints[nn] = true
			if t, err := time.Parse(time.RFC3339, sl.Annotations[v1.EndpointsLastChangeTriggerTime]); err == nil && sl == slice {
				s.triggerTimes[nn] = append(s.triggerTimes[nn], t)
			}
		}
	}
	if slice == nil {
		delete(s.slices, name)
	} else {
		s.slices[name] = slice
	}
	return true
}

// takePending returns and clears the pending changes.
func (s *store) takePending() (svcs, eps map[types.NamespacedName]bool, triggers map[types.NamespacedName][]time.Time) {
	svcs, eps, triggers = s.pendingServices, s.pendingEndpoints, s.triggerTimes
	s.pendingServices = map[types.NamespacedName]bool{}
	s.pendingEndpoints = map[types.NamespacedName]bool{}
	s.triggerTimes = map[types.NamespacedName][]time.Time{}
	return svcs, eps, triggers
}

// restorePending puts changes back after a failed sync, so the retry's
// event still reports them.
func (s *store) restorePending(svcs, eps map[types.NamespacedName]bool) {
	maps.Copy(s.pendingServices, svcs)
	maps.Copy(s.pendingEndpoints, eps)
}

func (s *store) lists() ([]*v1.Service, []*discovery.EndpointSlice) {
	svcs := slices.Collect(maps.Values(s.services))
	sls := slices.Collect(maps.Values(s.slices))
	return svcs, sls
}

func sortedNames(m map[types.NamespacedName]bool) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n.String())
	}
	slices.Sort(out)
	return out
}

func namesOf(list []types.NamespacedName) []string {
	out := make([]string, 0, len(list))
	for _, n := range list {
		out = append(out, n.String())
	}
	return out
}

// topologyLabels are the node labels that matter for topology-aware
// routing.
func topologyLabels(node *v1.Node) map[string]string {
	out := map[string]string{}
	if node != nil {
		if z, ok := node.Labels[v1.LabelTopologyZone]; ok {
			out[v1.LabelTopologyZone] = z
		}
	}
	return out
}
