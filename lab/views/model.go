package views

import (
	"strconv"
	"strings"
	"time"
)

// ServiceInfo is what the views know about one of the scenario's Services.
type ServiceInfo struct {
	Namespace, Name string
	ClusterIP       string
	// IPs are the ClusterIPs, external IPs and load-balancer IPs.
	IPs   []string
	Ports []PortInfo
}

// ID is "namespace/name".
func (s ServiceInfo) ID() string { return s.Namespace + "/" + s.Name }

// PortInfo is one port of a Service.
type PortInfo struct {
	Name     string `json:"name,omitempty"`
	Protocol string `json:"protocol"` // tcp, udp, sctp
	Port     int    `json:"port"`
	NodePort int    `json:"nodePort,omitempty"`
}

// NodeInfo is one node as the "nodes" topic lists it.
type NodeInfo struct {
	Name string `json:"name"`
	IP   string `json:"ip"`
	Role string `json:"role"`
}

// SlicesView is the "slices" panel: every EndpointSlice of the scenario's
// Services.
type SlicesView struct {
	Services []ServiceSlices `json:"services"`
}

// ServiceSlices are one Service's EndpointSlices.
type ServiceSlices struct {
	Service   string      `json:"service"`
	Selector  string      `json:"selector"`
	ClusterIP string      `json:"clusterIP"`
	Ports     []PortInfo  `json:"ports"`
	Slices    []SliceView `json:"slices"`
	// Missing is set when the Service does not exist.
	Missing bool `json:"missing,omitempty"`
}

// SliceView is one EndpointSlice.
type SliceView struct {
	Name      string         `json:"name"`
	Ports     []PortInfo     `json:"ports"`
	Endpoints []EndpointView `json:"endpoints"`
}

// EndpointView is one endpoint of a slice. Change is "added" or "changed"
// when it differs from the previous frame, "removed" for an endpoint that
// just went (shown once).
type EndpointView struct {
	Address     string `json:"address"`
	Ready       bool   `json:"ready"`
	Serving     bool   `json:"serving"`
	Terminating bool   `json:"terminating"`
	NodeName    string `json:"nodeName,omitempty"`
	Zone        string `json:"zone,omitempty"`
	Hints       string `json:"hints,omitempty"`
	Target      string `json:"target,omitempty"` // Pod name
	Change      string `json:"change,omitempty"`
}

// RulesView is the "rules/NODE" panel.
type RulesView struct {
	Node string `json:"node"`
	Mode string `json:"mode"` // nftables or iptables
	// Groups are the rules per scenario Service.
	Groups []RuleGroup `json:"groups"`
	// Raw is the whole ruleset as the node lists it.
	Raw string `json:"raw"`
	// Error says why the rules could not be read.
	Error string `json:"error,omitempty"`
	// Changed is when the rules last changed.
	Changed time.Time `json:"changed"`
}

// RuleGroup is the rules of one Service on one node.
type RuleGroup struct {
	Service string     `json:"service"`
	Summary string     `json:"summary"`
	Lines   []RuleLine `json:"lines"`
}

// RuleLine is one rule or map element. Change is "added" or "removed"
// relative to the previous frame.
type RuleLine struct {
	Where  string `json:"where"` // "map service-ips", "chain service-…"
	Text   string `json:"text"`
	Change string `json:"change,omitempty"`
}

// ConntrackView is the "conntrack/NODE" panel.
type ConntrackView struct {
	Node    string         `json:"node"`
	Entries []ConntrackRow `json:"entries"`
	Error   string         `json:"error,omitempty"`
}

// ConntrackRow is one conntrack entry for Service traffic.
type ConntrackRow struct {
	Proto   string `json:"proto"`
	State   string `json:"state,omitempty"`
	TTL     int    `json:"ttl"`
	Src     string `json:"src"`     // original source ip:port
	Dst     string `json:"dst"`     // original destination (the Service) ip:port
	Backend string `json:"backend"` // reply source: who actually answers, ip:port
	Service string `json:"service,omitempty"`
	Flags   string `json:"flags,omitempty"` // ASSURED, UNREPLIED
	New     bool   `json:"new,omitempty"`
}

// ProbeView is the "probes" panel: the latest round of probes.
type ProbeView struct {
	Round   int           `json:"round"`
	Results []ProbeResult `json:"results"`
}

// ProbeResult is one probe: from a source to a Service port.
type ProbeResult struct {
	Source  string `json:"source"`  // "node lab-worker", "pod shop/client"
	Target  string `json:"target"`  // "shop/web:80"
	Outcome string `json:"outcome"` // success, refused, timeout, error
	Backend string `json:"backend,omitempty"`
	Detail  string `json:"detail,omitempty"`
	Millis  int64  `json:"ms"`
}

// TimelineEvent is one entry of the "timeline" panel.
type TimelineEvent struct {
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"` // k8s, proxier, command, check
	Source string    `json:"source,omitempty"`
	Text   string    `json:"text"`
	// Level is "info", "warning" or "error".
	Level string `json:"level,omitempty"`
}

// The bounds of a timeline event's fields, whatever the lab wrote in
// what it came from (a Kubernetes Event's fields, a proxier's log line):
// the timeline is kept in svclab's memory and database, outside the lab's
// limits.
const (
	maxTimelineText   = 4000
	maxTimelineSource = 256
)

// bounded is ev with its fields cut to their bounds.
func (ev TimelineEvent) bounded() TimelineEvent {
	ev.Text = clip(ev.Text, maxTimelineText)
	ev.Source = clip(ev.Source, maxTimelineSource)
	ev.Kind = clip(ev.Kind, 32)
	ev.Level = clip(ev.Level, 32)
	return ev
}

// clip cuts s to at most n bytes (of whole UTF-8 characters), marking the
// cut with "…".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// Timeline kinds.
const (
	KindKubernetes = "k8s"
	KindProxier    = "proxier"
	KindCommand    = "command"
	KindCheck      = "check"
)

func itoa(i int) string { return strconv.Itoa(i) }

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
