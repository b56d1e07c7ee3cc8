package model

import (
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ServicePortName identifies one load-balanced port of a Service. It is the
// key that ties a Service port to the EndpointSlice ports that serve it: the
// port name and protocol must match, the target port number is taken from the
// EndpointSlice.
type ServicePortName struct {
	types.NamespacedName
	Port     string
	Protocol v1.Protocol
}

// String renders "namespace/name:port", or "namespace/name" for an unnamed
// port, exactly as kube-proxy does in rule comments.
func (n ServicePortName) String() string {
	if n.Port == "" {
		return n.NamespacedName.String()
	}
	return n.NamespacedName.String() + ":" + n.Port
}

// Compare orders ServicePortNames by namespace, name, port name, protocol.
func (n ServicePortName) Compare(o ServicePortName) int {
	if c := strings.Compare(n.Namespace, o.Namespace); c != 0 {
		return c
	}
	if c := strings.Compare(n.Name, o.Name); c != 0 {
		return c
	}
	if c := strings.Compare(n.Port, o.Port); c != 0 {
		return c
	}
	return strings.Compare(string(n.Protocol), string(o.Protocol))
}

// Endpoint is one backend address of a ServicePort as seen from this node.
type Endpoint struct {
	// IP is the canonical text form of the endpoint address.
	IP string
	// Port is the target port number (from the EndpointSlice port).
	Port int

	// Local is true when the endpoint's nodeName is this node.
	Local bool
	// Ready, Serving and Terminating mirror the EndpointSlice conditions,
	// with kube-proxy's defaults for unset conditions.
	Ready       bool
	Serving     bool
	Terminating bool

	// ZoneHints and NodeHints are the topology hints (sorted, deduplicated).
	ZoneHints []string
	NodeHints []string
}

// String returns "IP:port" ("[IP]:port" for IPv6).
func (e Endpoint) String() string {
	return net.JoinHostPort(e.IP, strconv.Itoa(e.Port))
}

// ServicePort is the proxier's view of one port of one Service, for one IP
// family, together with all of its endpoints.
type ServicePort struct {
	Name ServicePortName

	ClusterIP net.IP
	Port      int
	Protocol  v1.Protocol
	NodePort  int

	// ExternalIPs are spec.externalIPs of this family.
	ExternalIPs []net.IP
	// LoadBalancerVIPs are the status.loadBalancer.ingress IPs of this family
	// whose ipMode is VIP (or unset). ipMode Proxy ingress IPs are not VIPs.
	LoadBalancerVIPs []net.IP
	// LoadBalancerSourceRanges of this family. Empty if any range is a zero
	// CIDR (which would allow everything anyway).
	LoadBalancerSourceRanges []*net.IPNet
	// HealthCheckNodePort is set for LoadBalancer Services with
	// externalTrafficPolicy Local.
	HealthCheckNodePort int

	// SessionAffinityClientIP is true for sessionAffinity ClientIP, with the
	// timeout in StickyMaxAgeSeconds.
	SessionAffinityClientIP bool
	StickyMaxAgeSeconds     int

	// ExternalPolicyLocal is true if the Service is externally accessible and
	// has externalTrafficPolicy Local.
	ExternalPolicyLocal bool
	// InternalPolicyLocal is true for internalTrafficPolicy Local.
	InternalPolicyLocal bool

	// Endpoints are all endpoints of this port (any condition), sorted by
	// their "IP:port" string.
	Endpoints []Endpoint
}

// ExternallyAccessible reports whether the port is reachable through a
// NodePort, an ExternalIP or a LoadBalancer VIP.
func (sp *ServicePort) ExternallyAccessible() bool {
	return sp.NodePort != 0 || len(sp.LoadBalancerVIPs) != 0 || len(sp.ExternalIPs) != 0
}

// UsesClusterEndpoints reports whether some traffic uses Cluster policy.
func (sp *ServicePort) UsesClusterEndpoints() bool {
	// If InternalTrafficPolicy is Local but the service is externally
	// accessible, short-circuited local/pod traffic still uses cluster
	// endpoints.
	return !sp.InternalPolicyLocal || sp.ExternallyAccessible()
}

// UsesLocalEndpoints reports whether some traffic uses Local policy.
func (sp *ServicePort) UsesLocalEndpoints() bool {
	return sp.InternalPolicyLocal || (sp.ExternalPolicyLocal && sp.ExternallyAccessible())
}

// ProtocolLower is the lowercase protocol name ("tcp", "udp", "sctp").
func (sp *ServicePort) ProtocolLower() string {
	return strings.ToLower(string(sp.Protocol))
}

// Snapshot is the complete proxier input for one node and one IP family:
// every proxied ServicePort, sorted by name.
type Snapshot struct {
	Family   v1.IPFamily
	NodeName string
	// TopologyLabels are the node labels that matter for topology-aware
	// routing (currently topology.kubernetes.io/zone).
	TopologyLabels map[string]string
	Ports          []*ServicePort

	// categorized memoizes Categorize.
	categorized map[*ServicePort]Categorized
}

// Zone returns the node's topology zone, or "".
func (s *Snapshot) Zone() string {
	return s.TopologyLabels[v1.LabelTopologyZone]
}

// Port returns the ServicePort with the given name, or nil.
func (s *Snapshot) Port(name ServicePortName) *ServicePort {
	i, ok := slices.BinarySearchFunc(s.Ports, name, func(sp *ServicePort, n ServicePortName) int {
		return sp.Name.Compare(n)
	})
	if !ok {
		return nil
	}
	return s.Ports[i]
}

// Categorize runs CategorizeEndpoints for sp with this snapshot's node.
// The result is remembered per ServicePort (a Builder carries it over to
// the next snapshot for unchanged ports); callers must not modify it. A
// Snapshot is not safe for concurrent Categorize calls.
func (s *Snapshot) Categorize(sp *ServicePort) Categorized {
	if c, ok := s.categorized[sp]; ok {
		return c
	}
	c := CategorizeEndpoints(sp, s.NodeName, s.TopologyLabels)
	if s.categorized == nil {
		s.categorized = make(map[*ServicePort]Categorized, len(s.Ports))
	}
	s.categorized[sp] = c
	return c
}

// Services returns the set of Service names in the snapshot.
func (s *Snapshot) Services() map[types.NamespacedName]bool {
	out := make(map[types.NamespacedName]bool)
	for _, sp := range s.Ports {
		out[sp.Name.NamespacedName] = true
	}
	return out
}

// ChangedServices compares two snapshots and returns the Services whose
// ports or endpoints differ (including added and removed Services). It is
// the input of a partial sync.
func ChangedServices(prev, cur *Snapshot) map[types.NamespacedName]bool {
	changed := make(map[types.NamespacedName]bool)
	if prev != nil && cur != nil && sortedPorts(prev.Ports) && sortedPorts(cur.Ports) {
		changedSorted(prev.Ports, cur.Ports, changed)
		return changed
	}
	group := func(s *Snapshot) map[types.NamespacedName][]*ServicePort {
		m := make(map[types.NamespacedName][]*ServicePort)
		if s == nil {
			return m
		}
		for _, sp := range s.Ports {
			m[sp.Name.NamespacedName] = append(m[sp.Name.NamespacedName], sp)
		}
		return m
	}
	p, c := group(prev), group(cur)
	for name, ports := range c {
		if !portsEqual(p[name], ports) {
			changed[name] = true
		}
	}
	for name := range p {
		if _, ok := c[name]; !ok {
			changed[name] = true
		}
	}
	return changed
}

func portsEqual(a, b []*ServicePort) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		// A Builder hands out the same *ServicePort for an unchanged port.
		if a[i] != b[i] && !reflect.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

func sortedPorts(ports []*ServicePort) bool {
	return slices.IsSortedFunc(ports, func(a, b *ServicePort) int { return a.Name.Compare(b.Name) })
}

// changedSorted is ChangedServices for two sorted port lists, in one walk:
// the ports of a Service are adjacent.
func changedSorted(prev, cur []*ServicePort, changed map[types.NamespacedName]bool) {
	// next returns the ports of the Service ports[0] belongs to.
	next := func(ports []*ServicePort) []*ServicePort {
		n := 1
		for n < len(ports) && ports[n].Name.NamespacedName == ports[0].Name.NamespacedName {
			n++
		}
		return ports[:n]
	}
	for len(prev) > 0 || len(cur) > 0 {
		var p, c []*ServicePort
		switch {
		case len(prev) == 0:
			c = next(cur)
		case len(cur) == 0:
			p = next(prev)
		default:
			switch cmpNames(prev[0].Name.NamespacedName, cur[0].Name.NamespacedName) {
			case -1:
				p = next(prev)
			case 1:
				c = next(cur)
			default:
				p, c = next(prev), next(cur)
			}
		}
		prev, cur = prev[len(p):], cur[len(c):]
		if !portsEqual(p, c) {
			if len(p) > 0 {
				changed[p[0].Name.NamespacedName] = true
			} else {
				changed[c[0].Name.NamespacedName] = true
			}
		}
	}
}

func cmpNames(a, b types.NamespacedName) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}
