package model

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	netutils "k8s.io/utils/net"
)

// DefaultStickyMaxAgeSeconds is the API default for
// sessionAffinityConfig.clientIP.timeoutSeconds.
const DefaultStickyMaxAgeSeconds = 10800

// Input is everything the model needs to know about the cluster.
type Input struct {
	// Family is the IP family to proxy (IPv4Protocol or IPv6Protocol).
	Family v1.IPFamily
	// Node is this node's Node object. Its name decides which endpoints are
	// local, and its topology.kubernetes.io/zone label drives zone hints.
	// If Node is nil, NodeName is used and there are no topology labels.
	Node     *v1.Node
	NodeName string

	Services       []*v1.Service
	EndpointSlices []*discovery.EndpointSlice
}

// Build computes the per-ServicePort state for one node and IP family, the
// way kube-proxy's ServiceChangeTracker and EndpointSliceCache do:
// headless and ExternalName Services are skipped, as are Services without a
// ClusterIP of this family; EndpointSlices of the other address type, ports
// without a name or number and endpoints without addresses are ignored.
// Skipped objects are logged at debug level on logger (which may be nil).
func Build(ctx context.Context, logger *slog.Logger, in Input) (*Snapshot, error) {
	return new(Builder).Build(ctx, logger, in)
}

// Builder is Build for a sync loop: it remembers what it built for each
// Service, and a Service whose object and EndpointSlices are the same
// objects (pointers) as at its previous Build keeps its ServicePorts, which
// are then the identical *ServicePort values in both snapshots (and keep
// their categorization if the node's topology did not change). Only
// changed Services are recomputed; callers must treat the objects they
// pass in, and the ServicePorts they get, as immutable. The zero Builder
// is ready to use; it is not safe for concurrent use.
type Builder struct {
	family   v1.IPFamily
	nodeName string
	services map[types.NamespacedName]*builtService
	prev     *Snapshot
}

type builtService struct {
	svc    *v1.Service
	slices []*discovery.EndpointSlice // sorted by name
	ports  []*ServicePort
}

// Build is Build, reusing the ServicePorts of unchanged Services.
func (b *Builder) Build(ctx context.Context, logger *slog.Logger, in Input) (*Snapshot, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if in.Family != v1.IPv4Protocol && in.Family != v1.IPv6Protocol {
		return nil, fmt.Errorf("build model: unknown IP family %q", in.Family)
	}
	nodeName := in.NodeName
	topology := map[string]string{}
	if in.Node != nil {
		if nodeName != "" && nodeName != in.Node.Name {
			return nil, fmt.Errorf("build model: node name %q does not match Node object %q", nodeName, in.Node.Name)
		}
		nodeName = in.Node.Name
		if zone, ok := in.Node.Labels[v1.LabelTopologyZone]; ok {
			topology[v1.LabelTopologyZone] = zone
		}
	}
	// Which endpoints are local depends on the node name.
	if b.services == nil || b.family != in.Family || b.nodeName != nodeName {
		b.services = make(map[types.NamespacedName]*builtService)
		b.family, b.nodeName, b.prev = in.Family, nodeName, nil
	}

	addrType := discovery.AddressTypeIPv4
	if in.Family == v1.IPv6Protocol {
		addrType = discovery.AddressTypeIPv6
	}
	slicesOf := make(map[types.NamespacedName][]*discovery.EndpointSlice)
	for _, slice := range in.EndpointSlices {
		if slice == nil {
			continue
		}
		if slice.AddressType != addrType {
			logger.Debug("ignoring EndpointSlice of another address type", "endpointSlice", slice.Namespace+"/"+slice.Name, "type", slice.AddressType)
			continue
		}
		svcName := slice.Labels[discovery.LabelServiceName]
		if svcName == "" {
			logger.Warn("ignoring EndpointSlice without service name label", "endpointSlice", slice.Namespace+"/"+slice.Name, "label", discovery.LabelServiceName)
			continue
		}
		nn := types.NamespacedName{Namespace: slice.Namespace, Name: svcName}
		slicesOf[nn] = append(slicesOf[nn], slice)
	}

	snap := &Snapshot{Family: in.Family, NodeName: nodeName, TopologyLabels: topology}
	seen := make(map[types.NamespacedName]bool, len(in.Services))
	for _, svc := range in.Services {
		if svc == nil {
			continue
		}
		nn := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		if seen[nn] {
			return nil, fmt.Errorf("build model: Service %s appears twice", nn)
		}
		seen[nn] = true
		sl := slicesOf[nn]
		if len(sl) > 1 {
			slices.SortFunc(sl, func(x, y *discovery.EndpointSlice) int { return strings.Compare(x.Name, y.Name) })
		}
		built := b.services[nn]
		if built == nil || built.svc != svc || !slices.Equal(built.slices, sl) {
			ports := servicePorts(ctx, logger, svc, in.Family)
			names := make(map[ServicePortName]bool, len(ports))
			for _, sp := range ports {
				if names[sp.Name] {
					delete(b.services, nn)
					return nil, fmt.Errorf("build model: Service %s has two ports named %q with protocol %s", sp.Name.NamespacedName, sp.Name.Port, sp.Name.Protocol)
				}
				names[sp.Name] = true
			}
			if len(ports) > 0 {
				for name, eps := range endpointsByPort(ctx, logger, sl, in.Family, nodeName) {
					for _, sp := range ports {
						if sp.Name == name {
							sp.Endpoints = eps
						}
					}
				}
			}
			built = &builtService{svc: svc, slices: sl, ports: ports}
			b.services[nn] = built
		}
		snap.Ports = append(snap.Ports, built.ports...)
	}
	for nn := range b.services {
		if !seen[nn] {
			delete(b.services, nn)
		}
	}
	slices.SortFunc(snap.Ports, func(a, b *ServicePort) int { return a.Name.Compare(b.Name) })

	// Unchanged ports keep their categorization while the topology does.
	if prev := b.prev; prev != nil && maps.Equal(prev.TopologyLabels, topology) && len(prev.categorized) > 0 {
		snap.categorized = make(map[*ServicePort]Categorized, len(snap.Ports))
		for _, sp := range snap.Ports {
			if c, ok := prev.categorized[sp]; ok {
				snap.categorized[sp] = c
			}
		}
	}
	b.prev = snap
	return snap, nil
}

// shouldSkipService mirrors proxyutil.ShouldSkipService.
func shouldSkipService(svc *v1.Service) bool {
	if svc.Spec.ClusterIP == v1.ClusterIPNone || svc.Spec.ClusterIP == "" {
		return true
	}
	return svc.Spec.Type == v1.ServiceTypeExternalName
}

// clusterIPForFamily mirrors proxyutil.GetClusterIPByFamily.
func clusterIPForFamily(family v1.IPFamily, svc *v1.Service) string {
	if len(svc.Spec.IPFamilies) == 0 {
		if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == v1.ClusterIPNone {
			return ""
		}
		if (family == v1.IPv6Protocol) == netutils.IsIPv6String(svc.Spec.ClusterIP) {
			return svc.Spec.ClusterIP
		}
		return ""
	}
	for i, f := range svc.Spec.IPFamilies {
		if f == family && i < len(svc.Spec.ClusterIPs) {
			return svc.Spec.ClusterIPs[i]
		}
	}
	return ""
}

func ipFamilyOf(ip net.IP) v1.IPFamily {
	if ip.To4() != nil {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

func externallyAccessible(svc *v1.Service) bool {
	t := serviceType(svc)
	return t == v1.ServiceTypeLoadBalancer || t == v1.ServiceTypeNodePort ||
		(t == v1.ServiceTypeClusterIP && len(svc.Spec.ExternalIPs) > 0)
}

func serviceType(svc *v1.Service) v1.ServiceType {
	if svc.Spec.Type == "" {
		return v1.ServiceTypeClusterIP
	}
	return svc.Spec.Type
}

func servicePorts(_ context.Context, logger *slog.Logger, svc *v1.Service, family v1.IPFamily) []*ServicePort {
	if svc == nil {
		return nil
	}
	nn := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	if shouldSkipService(svc) {
		logger.Debug("skipping service", "service", nn, "clusterIP", svc.Spec.ClusterIP, "type", svc.Spec.Type)
		return nil
	}
	cip := clusterIPForFamily(family, svc)
	if cip == "" {
		logger.Debug("skipping service without a ClusterIP of this family", "service", nn, "family", family)
		return nil
	}
	clusterIP := netutils.ParseIPSloppy(cip)
	if clusterIP == nil {
		logger.Warn("skipping service with invalid ClusterIP", "service", nn, "clusterIP", cip)
		return nil
	}

	extLocal := externallyAccessible(svc) && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
	intLocal := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal

	affinity := svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP
	sticky := 0
	if affinity {
		sticky = DefaultStickyMaxAgeSeconds
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			sticky = int(*c.ClientIP.TimeoutSeconds)
		}
	}

	var externalIPs []net.IP
	for _, s := range svc.Spec.ExternalIPs {
		ip := netutils.ParseIPSloppy(s)
		if ip == nil {
			if strings.TrimSpace(s) != "" {
				logger.Warn("skipping invalid external IP", "service", nn, "ip", s)
			}
			continue
		}
		if ipFamilyOf(ip) == family {
			externalIPs = append(externalIPs, ip)
		}
	}

	var sourceRanges []*net.IPNet
	zero := false
	for _, s := range svc.Spec.LoadBalancerSourceRanges {
		s = strings.TrimSpace(s)
		_, cidr, err := netutils.ParseCIDRSloppy(s)
		if err != nil {
			if s != "" {
				logger.Warn("skipping invalid loadBalancerSourceRange", "service", nn, "cidr", s)
			}
			continue
		}
		if ipFamilyOf(cidr.IP) != family {
			continue
		}
		if ones, _ := cidr.Mask.Size(); ones == 0 {
			zero = true
		}
		sourceRanges = append(sourceRanges, cidr)
	}
	if zero {
		sourceRanges = nil
	}

	var lbVIPs []net.IP
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP == "" {
			continue
		}
		if ing.IPMode != nil && *ing.IPMode != v1.LoadBalancerIPModeVIP {
			continue
		}
		ip := netutils.ParseIPSloppy(ing.IP)
		if ip == nil {
			logger.Warn("skipping invalid load balancer ingress IP", "service", nn, "ip", ing.IP)
			continue
		}
		if ipFamilyOf(ip) == family {
			lbVIPs = append(lbVIPs, ip)
		}
	}

	hcnp := 0
	if serviceType(svc) == v1.ServiceTypeLoadBalancer && extLocal {
		hcnp = int(svc.Spec.HealthCheckNodePort)
		if hcnp == 0 {
			logger.Warn("service has no healthCheckNodePort", "service", nn)
		}
	}

	out := make([]*ServicePort, 0, len(svc.Spec.Ports))
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		proto := p.Protocol
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		out = append(out, &ServicePort{
			Name:                     ServicePortName{NamespacedName: nn, Port: p.Name, Protocol: proto},
			ClusterIP:                clusterIP,
			Port:                     int(p.Port),
			Protocol:                 proto,
			NodePort:                 int(p.NodePort),
			ExternalIPs:              externalIPs,
			LoadBalancerVIPs:         lbVIPs,
			LoadBalancerSourceRanges: sourceRanges,
			HealthCheckNodePort:      hcnp,
			SessionAffinityClientIP:  affinity,
			StickyMaxAgeSeconds:      sticky,
			ExternalPolicyLocal:      extLocal,
			InternalPolicyLocal:      intLocal,
		})
	}
	return out
}

// endpointsByPort mirrors EndpointSliceCache: it merges all EndpointSlices of
// a Service into per-ServicePortName endpoint lists sorted by "IP:port".
func endpointsByPort(_ context.Context, logger *slog.Logger, slicesIn []*discovery.EndpointSlice, family v1.IPFamily, nodeName string) map[ServicePortName][]Endpoint {
	addrType := discovery.AddressTypeIPv4
	if family == v1.IPv6Protocol {
		addrType = discovery.AddressTypeIPv6
	}
	sets := make(map[ServicePortName]map[string]Endpoint)
	for _, slice := range slicesIn {
		if slice == nil {
			continue
		}
		if slice.AddressType != addrType {
			logger.Debug("ignoring EndpointSlice of another address type", "endpointSlice", slice.Namespace+"/"+slice.Name, "type", slice.AddressType)
			continue
		}
		svcName := slice.Labels[discovery.LabelServiceName]
		if svcName == "" {
			logger.Warn("ignoring EndpointSlice without service name label", "endpointSlice", slice.Namespace+"/"+slice.Name, "label", discovery.LabelServiceName)
			continue
		}
		nn := types.NamespacedName{Namespace: slice.Namespace, Name: svcName}
		for _, port := range slice.Ports {
			if port.Name == nil {
				logger.Warn("ignoring EndpointSlice port with nil name", "endpointSlice", slice.Namespace+"/"+slice.Name)
				continue
			}
			if port.Port == nil || *port.Port == 0 {
				logger.Warn("ignoring EndpointSlice port without number", "endpointSlice", slice.Namespace+"/"+slice.Name, "port", *port.Name)
				continue
			}
			proto := v1.ProtocolTCP
			if port.Protocol != nil {
				proto = *port.Protocol
			}
			name := ServicePortName{NamespacedName: nn, Port: *port.Name, Protocol: proto}
			set := sets[name]
			if set == nil {
				set = make(map[string]Endpoint)
				sets[name] = set
			}
			for _, ep := range slice.Endpoints {
				if len(ep.Addresses) == 0 {
					continue
				}
				ip := netutils.ParseIPSloppy(ep.Addresses[0])
				if ip == nil {
					logger.Warn("ignoring endpoint with invalid address", "endpointSlice", slice.Namespace+"/"+slice.Name, "address", ep.Addresses[0])
					continue
				}
				e := Endpoint{
					IP:          ip.String(),
					Port:        int(*port.Port),
					Local:       nodeName != "" && ep.NodeName != nil && *ep.NodeName == nodeName,
					Ready:       ep.Conditions.Ready == nil || *ep.Conditions.Ready,
					Serving:     ep.Conditions.Serving == nil || *ep.Conditions.Serving,
					Terminating: ep.Conditions.Terminating != nil && *ep.Conditions.Terminating,
				}
				if ep.Hints != nil {
					for _, z := range ep.Hints.ForZones {
						e.ZoneHints = appendUnique(e.ZoneHints, z.Name)
					}
					for _, n := range ep.Hints.ForNodes {
						e.NodeHints = appendUnique(e.NodeHints, n.Name)
					}
				}
				key := e.String()
				// A non-terminating copy of an endpoint wins over a
				// terminating one (an endpoint can briefly appear in two
				// slices while it moves).
				if _, exists := set[key]; !exists || !e.Terminating {
					set[key] = e
				}
			}
		}
	}

	out := make(map[ServicePortName][]Endpoint, len(sets))
	for name, set := range sets {
		if len(set) == 0 {
			continue
		}
		eps := make([]Endpoint, 0, len(set))
		for _, e := range set {
			eps = append(eps, e)
		}
		slices.SortFunc(eps, func(a, b Endpoint) int { return strings.Compare(a.String(), b.String()) })
		out[name] = eps
	}
	return out
}

func appendUnique(list []string, s string) []string {
	i, found := slices.BinarySearch(list, s)
	if found {
		return list
	}
	return slices.Insert(list, i, s)
}
