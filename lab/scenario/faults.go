package scenario

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Params are a fault's parameters as written in scenario.yaml: strings,
// integers, booleans, floats, or lists of them.
type Params map[string]any

// String returns the string parameter name, or def when it is absent.
func (p Params) String(name, def string) string {
	if s, ok := p[name].(string); ok {
		return s
	}
	return def
}

// Int returns the integer parameter name, or def when it is absent.
func (p Params) Int(name string, def int) int {
	if i, ok := p[name].(int); ok {
		return i
	}
	return def
}

// Bool returns the boolean parameter name, or def when it is absent.
func (p Params) Bool(name string, def bool) bool {
	if b, ok := p[name].(bool); ok {
		return b
	}
	return def
}

// FaultKind is one kind of fault of the fault library, as the validator
// sees it: its name in scenario.yaml and a check of its parameters.
// Validate returns nil, or an error that wraps one *ParamError per problem
// (errors.Join) so that each can be located in the file.
type FaultKind interface {
	Name() string
	Validate(params Params) error
}

// ParamError is a problem with one fault parameter.
type ParamError struct {
	Param string
	Err   error
}

func (e *ParamError) Error() string { return e.Param + ": " + e.Err.Error() }
func (e *ParamError) Unwrap() error { return e.Err }

// ParamType is what kind of value a fault parameter takes.
type ParamType string

const (
	ParamString ParamType = "string"
	ParamInt    ParamType = "integer"
	ParamBool   ParamType = "boolean"
	// ParamNode is a node's short name (control-plane, worker, ...); the
	// validator also checks it against the scenario's cluster shape.
	ParamNode ParamType = "node"
	// ParamObject is the name of an object of ParamSpec.Kind that the setup
	// manifests create, in the namespace given by the fault's "namespace"
	// parameter (default: default); the validator checks that it exists.
	ParamObject ParamType = "object"
	// ParamIntOrString is a port number or a port name.
	ParamIntOrString ParamType = "int-or-string"
)

// ParamSpec declares one fault parameter.
type ParamSpec struct {
	Name     string
	Type     ParamType
	Required bool
	// Kind is the object kind of a ParamObject parameter.
	Kind string
	// Enum lists the allowed values of a string parameter.
	Enum []string
	// Min and Max bound an integer parameter (when Max > 0).
	Min, Max int
	Doc      string
}

// FaultSpec is a fault kind declared by its parameters. The fault library
// implements the faults; their declarations live here so that lint and the
// JSON Schema know every name and parameter.
type FaultSpec struct {
	FaultName string
	// Level is "api" (the fault changes API objects) or "dataplane" (it
	// changes a node's kernel state or the proxier).
	Level   string
	Summary string
	Params  []ParamSpec
	// Disturbs are the parts of the lab's health (HealthProxier,
	// HealthDNS) that the fault breaks on purpose: the lab's health
	// watch leaves them alone, so that it neither cries wolf nor names
	// the fault the learner is there to find.
	Disturbs []string
}

// Parts of a lab's health that a fault may disturb on purpose.
const (
	// HealthProxier: every node's proxier syncs its rules.
	HealthProxier = "proxier"
	// HealthDNS: the cluster's DNS answers from the nodes.
	HealthDNS = "dns"
)

// Disturbed is what of the lab's health the faults break on purpose (see
// FaultSpec.Disturbs), by their declarations.
func Disturbed(faults []Fault) map[string]bool {
	out := map[string]bool{}
	for _, f := range faults {
		for _, s := range FaultSpecs {
			if s.FaultName == f.Name {
				for _, d := range s.Disturbs {
					out[d] = true
				}
			}
		}
	}
	return out
}

// Name is the fault's name in scenario.yaml.
func (f FaultSpec) Name() string { return f.FaultName }

// ParamSpecs are the fault's parameters.
func (f FaultSpec) ParamSpecs() []ParamSpec { return f.Params }

// Validate checks params against the declared parameters: no unknown ones,
// the required ones present, each of the right type and range.
func (f FaultSpec) Validate(params Params) error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, &ParamError{Param: name, Err: fmt.Errorf(format, args...)})
	}
	names := make([]string, len(f.Params))
	for i, s := range f.Params {
		names[i] = s.Name
	}
	for _, name := range sortedKeys(params) {
		if !slices.Contains(names, name) {
			if len(names) == 0 {
				bad(name, "unknown parameter; %s takes no parameters", f.FaultName)
			} else {
				bad(name, "unknown parameter; %s takes %s", f.FaultName, strings.Join(names, ", "))
			}
		}
	}
	for _, s := range f.Params {
		v, ok := params[s.Name]
		if !ok {
			if s.Required {
				bad(s.Name, "is required: %s", s.Doc)
			}
			continue
		}
		switch s.Type {
		case ParamString, ParamNode:
			str, ok := v.(string)
			switch {
			case !ok:
				bad(s.Name, "must be a string")
			case str == "" && s.Type == ParamNode:
				bad(s.Name, "must name a node")
			case len(s.Enum) > 0 && !slices.Contains(s.Enum, str):
				bad(s.Name, "%q is not one of %s", str, quoteList(s.Enum))
			}
		case ParamObject:
			str, ok := v.(string)
			if !ok {
				bad(s.Name, "must be the name of a %s", s.Kind)
			} else if msgs := validation.IsDNS1123Subdomain(str); len(msgs) > 0 {
				bad(s.Name, "%q is not a valid %s name: %s", str, s.Kind, strings.Join(msgs, "; "))
			}
		case ParamInt:
			i, ok := v.(int)
			switch {
			case !ok:
				bad(s.Name, "must be an integer")
			case i < s.Min:
				bad(s.Name, "must be at least %d", s.Min)
			case s.Max > 0 && i > s.Max:
				bad(s.Name, "must be at most %d", s.Max)
			}
		case ParamIntOrString:
			switch x := v.(type) {
			case int:
				if x < 1 || x > 65535 {
					bad(s.Name, "port %d must be between 1 and 65535", x)
				}
			case string:
				if msgs := validation.IsValidPortName(x); len(msgs) > 0 {
					bad(s.Name, "%q is not a valid port name: %s", x, strings.Join(msgs, "; "))
				}
			default:
				bad(s.Name, "must be a port number or a port name")
			}
		case ParamBool:
			if _, ok := v.(bool); !ok {
				bad(s.Name, "must be true or false")
			}
		}
	}
	return errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Registry holds the fault kinds that scenario.yaml may name. It is safe for
// concurrent use.
type Registry struct {
	mu    sync.RWMutex
	kinds map[string]FaultKind
}

// NewRegistry returns a registry holding kinds.
func NewRegistry(kinds ...FaultKind) *Registry {
	r := &Registry{kinds: map[string]FaultKind{}}
	for _, k := range kinds {
		r.Register(k)
	}
	return r
}

// Register adds k, replacing a kind of the same name: the fault library
// registers its implementations over the declarations of DefaultFaults.
func (r *Registry) Register(k FaultKind) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kinds[k.Name()] = k
}

// Lookup returns the kind named name.
func (r *Registry) Lookup(name string) (FaultKind, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	k, ok := r.kinds[name]
	return k, ok
}

// Names lists the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return sortedKeys(r.kinds)
}

// Common fault parameters.
var (
	paramNamespace = ParamSpec{Name: "namespace", Type: ParamString, Doc: "the namespace of the objects (default: default)"}
	paramService   = ParamSpec{Name: "service", Type: ParamObject, Kind: "Service", Required: true, Doc: "the Service to break"}
	paramDeploy    = ParamSpec{Name: "deployment", Type: ParamObject, Kind: "Deployment", Required: true, Doc: "the Deployment to break"}
)

func nodeParam(required bool, doc string) ParamSpec {
	return ParamSpec{Name: "node", Type: ParamNode, Required: required, Doc: doc}
}

// FaultSpecs declares every fault of the fault library (issue 5's list).
var FaultSpecs = []FaultSpec{
	// API level.
	{FaultName: "selector-typo", Level: "api", Summary: "change one value of a Service's selector so that it matches no pod",
		Params: []ParamSpec{paramService, paramNamespace,
			{Name: "key", Type: ParamString, Doc: "the selector key to change (default: the first)"},
			{Name: "value", Type: ParamString, Doc: "the wrong value (default: the right one with two letters swapped)"}}},
	{FaultName: "targetport-mismatch", Level: "api", Summary: "point a Service port's targetPort at a port the pods do not listen on",
		Params: []ParamSpec{paramService, paramNamespace,
			{Name: "port", Type: ParamInt, Min: 1, Max: 65535, Doc: "the Service port to change (default: the first)"},
			{Name: "targetPort", Type: ParamIntOrString, Required: true, Doc: "the wrong target port (number or name)"}}},
	{FaultName: "port-name-mismatch", Level: "api", Summary: "give a port of a multi-port Service a wrong name, or none",
		Params: []ParamSpec{paramService, paramNamespace,
			{Name: "port", Type: ParamInt, Min: 1, Max: 65535, Required: true, Doc: "the Service port to rename"},
			{Name: "name", Type: ParamString, Doc: "the wrong name (default: remove the name)"}}},
	{FaultName: "failing-readiness-probe", Level: "api", Summary: "give a Deployment's pods a readiness probe that always fails",
		Params: []ParamSpec{paramDeploy, paramNamespace,
			{Name: "container", Type: ParamString, Doc: "the container (default: the first)"},
			{Name: "path", Type: ParamString, Doc: "the HTTP path the probe asks for (default: /not-ready; an application that answers every path, as agnhost netexec does, needs port instead)"},
			{Name: "port", Type: ParamInt, Min: 1, Max: 65535, Doc: "the port the probe asks, where the application does not listen (instead of a wrong path)"}}},
	{FaultName: "scale-to-zero", Level: "api", Summary: "scale a Deployment to zero replicas",
		Params: []ParamSpec{paramDeploy, paramNamespace}},
	{FaultName: "etp-local-single-node", Level: "api", Summary: "set externalTrafficPolicy: Local on a Service and pin all its pods to one node",
		Params: []ParamSpec{paramService, paramDeploy, paramNamespace, nodeParam(true, "the node that gets every replica")}},
	{FaultName: "itp-local-no-local-replica", Level: "api", Summary: "set internalTrafficPolicy: Local on a Service and keep its pods off one node",
		Params: []ParamSpec{paramService, paramDeploy, paramNamespace, nodeParam(true, "the node left without a replica")}},
	{FaultName: "traffic-distribution", Level: "api", Summary: "set trafficDistribution on a Service while the zone labels or replicas do not fit",
		Params: []ParamSpec{paramService, paramNamespace,
			{Name: "mode", Type: ParamString, Required: true, Enum: []string{"PreferClose", "PreferSameZone", "PreferSameNode"}, Doc: "the trafficDistribution value"},
			nodeParam(false, "a node whose zone label is removed")}},
	{FaultName: "topology-mode-annotation", Level: "api", Summary: "annotate a Service with service.kubernetes.io/topology-mode (Topology Aware Routing), which takes precedence over its trafficDistribution; setting up waits until the EndpointSlice controller has taken the hints off",
		Params: []ParamSpec{paramService, paramNamespace,
			{Name: "value", Type: ParamString, Enum: []string{"Auto", "auto"}, Doc: "the annotation's value (default: Auto)"}}},
	{FaultName: "traffic-policy", Level: "api", Summary: "set a Service's externalTrafficPolicy and/or internalTrafficPolicy (each row of the Cluster/Local table)",
		Params: []ParamSpec{paramService, paramNamespace,
			{Name: "external", Type: ParamString, Enum: []string{"Cluster", "Local"}, Doc: "the externalTrafficPolicy (NodePort and LoadBalancer Services)"},
			{Name: "internal", Type: ParamString, Enum: []string{"Cluster", "Local"}, Doc: "the internalTrafficPolicy"}}},
	{FaultName: "stuck-rollout", Level: "api", Summary: "roll a Deployment out to a Pod template whose readiness probe never passes, so the rollout stalls with old and new Pods side by side",
		Params: []ParamSpec{paramDeploy, paramNamespace,
			{Name: "container", Type: ParamString, Doc: "the container (default: the first)"},
			{Name: "version", Type: ParamString, Doc: "the value of the Pod template's version label in the new revision (default: v2)"},
			{Name: "path", Type: ParamString, Doc: "the HTTP path the new readiness probe asks for (default: /ready)"},
			{Name: "port", Type: ParamInt, Min: 1, Max: 65535, Doc: "the port the new readiness probe asks, where the application does not listen (instead of a wrong path)"}}},
	{FaultName: "rollout-restart", Level: "api", Summary: "restart a Deployment's Pods as kubectl rollout restart does: they come back with new IP addresses (what a node whose proxier no longer follows changes trips over)",
		Params: []ParamSpec{paramDeploy, paramNamespace}},
	{FaultName: "scale-deployment", Level: "api", Summary: "scale a Deployment to a number of replicas, as an autoscaler or a traffic peak would",
		Params: []ParamSpec{paramDeploy, paramNamespace, {Name: "replicas", Type: ParamInt, Required: true, Min: 1, Max: 250, Doc: "the replicas"}}},
	{FaultName: "abrupt-shutdown", Level: "api", Summary: "take away what keeps a Deployment's Pods serving while they terminate (preStop hooks, a --delay-shutdown of the application) and cut the grace period to one second, as a change that speeds deploys up would",
		Params: []ParamSpec{paramDeploy, paramNamespace}},
	{FaultName: "session-affinity-snat", Level: "api", Summary: "set ClientIP session affinity on a Service whose clients are masqueraded to one address",
		Params: []ParamSpec{paramService, paramNamespace}},
	{FaultName: "label-client-backend", Level: "api", Summary: "label the Pod of a Service that answers a client Pod (the last one the client's log names, as agnhost's /hostname prints it), as a monitoring system flags a hot replica",
		Params: []ParamSpec{paramService, paramNamespace,
			{Name: "client", Type: ParamObject, Kind: "Pod", Required: true, Doc: "the client Pod, whose log prints each answer"},
			{Name: "label", Type: ParamString, Doc: "the label to set, key=value (default: load=high)"}}},
	{FaultName: "statefulset-not-ready-peers", Level: "api", Summary: "leave publishNotReadyAddresses off the headless Service of a StatefulSet whose peers must find each other before they are ready",
		Params: []ParamSpec{paramService, paramNamespace,
			{Name: "statefulset", Type: ParamObject, Kind: "StatefulSet", Required: true, Doc: "the StatefulSet"}}},
	{FaultName: "headless-clusterip-confusion", Level: "api", Summary: "make a Service headless (clusterIP: None) where clients expect one virtual IP, or the reverse",
		Params: []ParamSpec{paramService, paramNamespace}},
	{FaultName: "external-name", Level: "api", Summary: "turn a Service into an ExternalName Service pointing at a wrong name, or point an ExternalName Service at a wrong name",
		Params: []ParamSpec{paramService, paramNamespace,
			{Name: "externalName", Type: ParamString, Required: true, Doc: "the DNS name the Service aliases"}}},
	{FaultName: "default-deny-networkpolicy", Level: "api", Summary: "add a default-deny ingress NetworkPolicy to a namespace",
		Params: []ParamSpec{paramNamespace}},
	{FaultName: "networkpolicy-and-or", Level: "api", Summary: "turn a NetworkPolicy's from rule between AND (one element) and OR (two elements)",
		Params: []ParamSpec{paramNamespace,
			{Name: "policy", Type: ParamObject, Kind: "NetworkPolicy", Required: true, Doc: "the NetworkPolicy"}}},
	{FaultName: "node-marked-for-deletion", Level: "api", Summary: "leave the cluster autoscaler's ToBeDeletedByClusterAutoscaler taint on a node, as an autoscaler that stopped halfway through a scale-down does: its kube-proxy fails /healthz and load balancers skip it",
		Params: []ParamSpec{nodeParam(true, "the node")}},
	// Dataplane level.
	{FaultName: "stale-udp-conntrack-dns", Level: "dataplane", Summary: "keep a UDP conntrack entry pinning DNS to a CoreDNS pod that was deleted",
		Params: []ParamSpec{nodeParam(false, "the node whose clients keep the stale entry (default: every node)")}, Disturbs: []string{HealthDNS}},
	{FaultName: "proxier-dead", Level: "dataplane", Summary: "stop the proxier on one node while its old rules stay",
		Params: []ParamSpec{nodeParam(true, "the node")}, Disturbs: []string{HealthProxier, HealthDNS}},
	{FaultName: "proxier-stuck", Level: "dataplane", Summary: "keep the proxier on one node running but stop it from syncing, so new endpoints never appear",
		Params: []ParamSpec{nodeParam(true, "the node")}, Disturbs: []string{HealthProxier, HealthDNS}},
	{FaultName: "nodeport-primary-ip-only", Level: "dataplane", Summary: "give a node a second address that nftables-mode NodePorts do not answer on",
		Params: []ParamSpec{nodeParam(true, "the node"),
			{Name: "address", Type: ParamString, Doc: "the second address in CIDR form (default: one picked from the node's subnet)"}}},
	{FaultName: "conntrack-table-small", Level: "dataplane", Summary: "shrink a node's conntrack table so that new connections are dropped",
		Params: []ParamSpec{nodeParam(true, "the node"),
			{Name: "max", Type: ParamInt, Min: 1, Doc: "nf_conntrack_max (default: 64)"},
			{Name: "waitFull", Type: ParamBool, Doc: "whether setting up waits until the scenario's workloads have filled the table and a new connection was dropped (default: true)"}}, Disturbs: []string{HealthDNS}},
	{FaultName: "ip-forward-off", Level: "dataplane", Summary: "turn net.ipv4.ip_forward off on a node",
		Params: []ParamSpec{nodeParam(true, "the node")}, Disturbs: []string{HealthDNS}},
	{FaultName: "outside-route", Level: "dataplane", Summary: "route a CIDR (the Service range by default) from the network outside the cluster through one node, as a router's static route or a BGP speaker that advertises ClusterIPs would (embedded clusters)",
		Params: []ParamSpec{nodeParam(true, "the node the route goes through"),
			{Name: "cidr", Type: ParamString, Doc: "the destination (default: the Service range, 10.96.0.0/16)"}}},
	{FaultName: "rule-deleted", Level: "dataplane", Summary: "delete a Service's rules by hand on a node; only the proxier's next full resync repairs them",
		Params: []ParamSpec{paramService, paramNamespace, nodeParam(true, "the node")}},
	{FaultName: "kube-proxy-config", Level: "api", Summary: "edit config.conf in the kube-proxy ConfigMap (its mode, its mode's minSyncPeriod and syncPeriod, clusterCIDR) and restart the kube-proxy Pods so that they read it",
		Params: []ParamSpec{
			{Name: "mode", Type: ParamString, Enum: []string{"nftables", "iptables", "ipvs", "blank"}, Doc: "the mode to write (blank writes mode: \"\", which kube-proxy on Linux runs as iptables); default: keep the mode"},
			{Name: "minSyncPeriod", Type: ParamString, Doc: "the minimum time between syncs, such as 10m, in the section of the mode config.conf names (iptables for a blank mode)"},
			{Name: "syncPeriod", Type: ParamString, Doc: "the retry and resync period, such as 10m (kube-proxy refuses a minSyncPeriod above it)"},
			{Name: "clusterCIDR", Type: ParamString, Doc: "the Pod CIDR kube-proxy tells local traffic by (detectLocalMode ClusterCIDR): traffic from outside it to a ClusterIP is masqueraded; blank removes it, and with it that masquerading"}},
		Disturbs: []string{HealthProxier, HealthDNS}},
	{FaultName: "hairpin", Level: "dataplane", Summary: "break hairpin traffic: a pod reaching itself through its own Service",
		Params: []ParamSpec{paramService, paramNamespace, nodeParam(false, "the node whose bridge ports lose hairpin mode (default: every node)")}},
}

// DefaultFaults returns a registry of FaultSpecs.
func DefaultFaults() *Registry {
	r := NewRegistry()
	for _, f := range FaultSpecs {
		r.Register(f)
	}
	return r
}
