package scenario

import (
	"fmt"
	"regexp"
)

// FileName is the name of the file that declares a scenario in its
// directory.
const FileName = "scenario.yaml"

// The struct tags below drive both the field rules of the validator and the
// JSON Schema:
//
//	yaml:"name"   the field's name in scenario.yaml
//	rule:"..."    comma-separated rules: required, nonblank (a string, or
//	              each string of a list, has a non-space character),
//	              enum=TABLE, pattern=TABLE (tables in rules.go), min=N,
//	              max=N, gt=N (numbers), minItems=N, unique (list items)
//	doc:"..."     the description editors show

// Scenario is one scenario.yaml.
type Scenario struct {
	ID               string       `yaml:"id" rule:"required,pattern=name" doc:"The scenario's id: a DNS label, equal to the name of its directory."`
	Title            string       `yaml:"title" rule:"required,nonblank" doc:"A short title shown in scenario lists."`
	Domain           string       `yaml:"domain" rule:"required,enum=domains" doc:"The CKA curriculum domain the scenario trains."`
	Difficulty       string       `yaml:"difficulty" rule:"required,enum=difficulties" doc:"How hard the scenario is."`
	EstimatedMinutes int          `yaml:"estimatedMinutes" rule:"required,min=1,max=120" doc:"How long a learner typically needs, in minutes."`
	Cluster          ClusterShape `yaml:"cluster" rule:"required" doc:"The cluster the scenario needs."`
	Setup            Setup        `yaml:"setup" rule:"required" doc:"What makes the working application before the faults break it."`
	Faults           []Fault      `yaml:"faults" doc:"The faults injected after setup, in order (from the fault library)."`
	Task             string       `yaml:"task" rule:"required,nonblank" doc:"The task in exam wording (Markdown)."`
	Hints            []string     `yaml:"hints" rule:"required,minItems=1,nonblank" doc:"Progressive hints (Markdown), from a nudge to almost the answer."`
	Checks           []Check      `yaml:"checks" rule:"required,minItems=1" doc:"The weighted checks that grade the learner's fix."`
	Solution         []string     `yaml:"solution" rule:"required,minItems=1,nonblank" doc:"The reference solution: the shell commands a learner would type, in order (kubectl is on the PATH)."`
	Explanation      string       `yaml:"explanation" rule:"required,nonblank" doc:"Shown after solving (Markdown): ties the fault to the mechanism, which EndpointSlices and rules changed and why."`
	OtherSolutions   []Solution   `yaml:"otherSolutions" doc:"Other right fixes, each of which must pass every check as the reference solution does (svclab exercise run --solve tries each on the broken scenario): a grader must not fail a learner who fixed it another right way."`
	WrongFixes       []WrongFix   `yaml:"wrongFixes" doc:"Plausible wrong fixes that the checks must reject (svclab exercise run --wrong-fixes tries each on the broken scenario)."`
	Sources          []Reference  `yaml:"sources" rule:"required,minItems=1" doc:"Where the texts' statements about Kubernetes, kube-proxy and the kernel come from (upstream documentation, KEPs, source), shown with the explanation."`

	// Dir is the scenario's directory as shown in messages (not part of
	// the file).
	Dir string `yaml:"-"`
	// Manifests are the decoded setup manifests, in Setup.Manifests order
	// (not part of the file).
	Manifests []Manifest `yaml:"-"`
}

// File is the scenario.yaml path as shown in messages.
func (s *Scenario) File() string { return joinDisplay(s.Dir, FileName) }

// Reference is where statements of a scenario's texts come from.
type Reference struct {
	URL string `yaml:"url" json:"url" rule:"required,pattern=sourceURL" doc:"An upstream page: Kubernetes documentation (https://kubernetes.io/docs/...), a KEP or source file of github.com/kubernetes, or the kernel's documentation (https://docs.kernel.org/...)."`
	For string `yaml:"for" json:"for" rule:"required,nonblank" doc:"What the texts take from it, in a few words."`
}

// ClusterShape is the cluster a scenario needs. Nodes are named like kind's:
// "control-plane", "worker", "worker2", ... (a cluster named lab calls them
// lab-control-plane, lab-worker, ...). Scenarios name nodes by these short
// names.
type ClusterShape struct {
	Nodes      int                          `yaml:"nodes" rule:"required,min=1,max=6" doc:"Number of nodes: one control plane, the rest workers."`
	ProxyMode  string                       `yaml:"proxyMode" rule:"enum=proxyModes" doc:"The kube-proxy mode the scenario is written for: its set-up switches a cluster of the other mode to it, and its end switches back. Unset: the scenario runs in the cluster's mode, either one (nftables for a cluster svclab makes for it), so its checks and texts must hold in both (scenario lint and svclab scenario test --mode iptables check)."`
	NodeLabels map[string]map[string]string `yaml:"nodeLabels" doc:"Extra labels per node short name, for example worker: {topology.kubernetes.io/zone: zone-a}."`
	// EmbeddedOnly says why the scenario runs on embedded clusters only.
	EmbeddedOnly string `yaml:"embeddedOnly" doc:"Why the scenario needs the embedded backend (kind's kindnet enforces no NetworkPolicy, say); when set, a kind cluster refuses the scenario and tells the learner this."`
}

// Proxy modes.
const (
	ProxyModeNFTables = "nftables"
	ProxyModeIPTables = "iptables"
)

// Mode is the proxy mode, defaulted.
func (c ClusterShape) Mode() string {
	if c.ProxyMode == "" {
		return ProxyModeNFTables
	}
	return c.ProxyMode
}

// WithProxyMode is s run in mode ("" leaves s as it is): a scenario that
// names no mode runs in either; one written for a mode refuses the other.
func (s *Scenario) WithProxyMode(mode string) (*Scenario, error) {
	switch {
	case mode == "" || mode == s.Cluster.ProxyMode:
		return s, nil
	case mode != ProxyModeNFTables && mode != ProxyModeIPTables:
		return nil, fmt.Errorf("kube-proxy mode %q: give %s or %s", mode, ProxyModeNFTables, ProxyModeIPTables)
	case s.Cluster.ProxyMode != "":
		return nil, fmt.Errorf("scenario %s is written for kube-proxy's %s mode; it does not run in %s mode", s.ID, s.Cluster.ProxyMode, mode)
	}
	c := *s
	c.Cluster.ProxyMode = mode
	return &c, nil
}

// NodeNames are the short names of the shape's nodes: control-plane,
// worker, worker2, ...
func (c ClusterShape) NodeNames() []string {
	var names []string
	for i := range c.Nodes {
		switch i {
		case 0:
			names = append(names, "control-plane")
		case 1:
			names = append(names, "worker")
		default:
			names = append(names, fmt.Sprintf("worker%d", i))
		}
	}
	return names
}

// HasNode reports whether short is one of the shape's node names.
func (c ClusterShape) HasNode(short string) bool {
	for _, n := range c.NodeNames() {
		if n == short {
			return true
		}
	}
	return false
}

// NodeName is the full name of a node of cluster clusterName.
func NodeName(clusterName, short string) string { return clusterName + "-" + short }

// Setup makes the working application.
type Setup struct {
	Manifests []string `yaml:"manifests" rule:"required,minItems=1,unique,pattern=file" doc:"Manifest files in the scenario's directory, applied in order."`
}

// Fault declares one fault to inject, by name, with its parameters.
type Fault struct {
	Name   string `yaml:"name" rule:"required" doc:"The fault's name in the fault library."`
	Params Params `yaml:"params" doc:"The fault's parameters."`
}

// Check kinds.
const (
	CheckAPI       = "api"
	CheckProbe     = "probe"
	CheckDataplane = "dataplane"
	CheckRightFix  = "rightFix"
	CheckAnswer    = "answer"
	// CheckKubeProxyConfig is a kubeProxyConfig check.
	CheckKubeProxyConfig = "kubeProxyConfig"
)

// Check is one graded check. Exactly one of API, Probe, Dataplane,
// RightFix, Answer and KubeProxyConfig is set.
type Check struct {
	ID          string          `yaml:"id" rule:"required,pattern=name" doc:"The check's id, unique in the scenario."`
	Description string          `yaml:"description" rule:"required,nonblank" doc:"What the check verifies, for the learner (\"The web Service has ready endpoints\")."`
	FailMessage string          `yaml:"failMessage" rule:"nonblank" doc:"Shown to the learner when the check fails; required for rightFix checks."`
	Weight      float64         `yaml:"weight" rule:"required,gt=0" doc:"The check's share of the score."`
	UnlocksHint int             `yaml:"unlocksHint" rule:"min=1" doc:"The hint (1-based) that a failure of this check unlocks."`
	API         *APICheck       `yaml:"api" doc:"An assertion on API objects."`
	Probe       *ProbeCheck     `yaml:"probe" doc:"Traffic sent from a node or pod to a target, with the expected outcome."`
	Dataplane   *DataplaneCheck `yaml:"dataplane" doc:"An assertion on nodes' Service rules or conntrack tables."`
	RightFix    *RightFixCheck  `yaml:"rightFix" doc:"A rule that the fix must respect (the object was fixed in place, not recreated)."`
	Answer      *AnswerCheck    `yaml:"answer" doc:"A question the learner answers in words (their notes), checked against what a right answer says."`
	// KubeProxyConfig judges kube-proxy's configuration as kube-proxy
	// reads it, not its text.
	KubeProxyConfig *KubeProxyConfigCheck `yaml:"kubeProxyConfig" doc:"A field of kube-proxy's configuration as kube-proxy reads it: config.conf of the kube-proxy ConfigMap, decoded by kube-proxy's own (strict) loader with its defaults, so that every spelling kube-proxy accepts means the same (1000ms is 1s, quoted or not, indented any way)."`
}

// Kind is which of the check kinds c is ("" if none or several are set).
func (c *Check) Kind() string {
	var kinds []string
	if c.API != nil {
		kinds = append(kinds, CheckAPI)
	}
	if c.Probe != nil {
		kinds = append(kinds, CheckProbe)
	}
	if c.Dataplane != nil {
		kinds = append(kinds, CheckDataplane)
	}
	if c.RightFix != nil {
		kinds = append(kinds, CheckRightFix)
	}
	if c.Answer != nil {
		kinds = append(kinds, CheckAnswer)
	}
	if c.KubeProxyConfig != nil {
		kinds = append(kinds, CheckKubeProxyConfig)
	}
	if len(kinds) != 1 {
		return ""
	}
	return kinds[0]
}

// MaxAnswerLength bounds a learner's answer to an answer check, in bytes.
const MaxAnswerLength = 2000

// AnswerCheck is a question the learner answers in a few words, such as
// which step of a debugging sequence showed the fault. The answer passes
// when it matches Accept and does not match Reject (both case-insensitive
// RE2 expressions): Reject catches an answer that names every option, or
// a wrong one beside the right one.
type AnswerCheck struct {
	Question  string `yaml:"question" rule:"required,nonblank" doc:"The question, shown beside a field for the answer (Markdown)."`
	Accept    string `yaml:"accept" rule:"required,nonblank" doc:"A regular expression (RE2, case-insensitive) that a right answer matches."`
	Reject    string `yaml:"reject" doc:"A regular expression (RE2, case-insensitive) that a right answer does not match: a wrong option named beside the right one."`
	Reference string `yaml:"reference" rule:"required,nonblank" doc:"A right answer: what svclab exercise run --solve and the reference solution give. It must pass."`
}

// Judge tells whether answer passes the check.
func (a *AnswerCheck) Judge(answer string) (bool, error) {
	accept, err := regexp.Compile("(?i)" + a.Accept)
	if err != nil {
		return false, fmt.Errorf("accept: %w", err)
	}
	if !accept.MatchString(answer) {
		return false, nil
	}
	if a.Reject == "" {
		return true, nil
	}
	reject, err := regexp.Compile("(?i)" + a.Reject)
	if err != nil {
		return false, fmt.Errorf("reject: %w", err)
	}
	return !reject.MatchString(answer), nil
}

// Disruptive tells whether grading the check changes the cluster (a probe
// during a rollout restart, the grader's own Service of a follows
// assertion): such checks run only when the learner asks for a grade,
// after the others.
func (c *Check) Disruptive() bool {
	return (c.Probe != nil && c.Probe.During != nil) || (c.Dataplane != nil && c.Dataplane.Follows != nil)
}

// ObjectRef names API objects: one by name, or all that match a label
// selector.
type ObjectRef struct {
	APIVersion    string `yaml:"apiVersion" doc:"The object's API version; inferred from the kind when left out."`
	Kind          string `yaml:"kind" rule:"required" doc:"The object's kind, for example Service or EndpointSlice."`
	Namespace     string `yaml:"namespace" rule:"pattern=name" doc:"The namespace (default: default)."`
	Name          string `yaml:"name" doc:"The object's name (or use labelSelector)."`
	LabelSelector string `yaml:"labelSelector" doc:"A label selector such as kubernetes.io/service-name=web (or use name)."`
	Node          string `yaml:"node" doc:"With kind Node: the node's short name (control-plane, worker, worker2, ...), whatever the cluster is called (or use name)."`
}

// Resolve names the object a Node reference's short name stands for in
// cluster clusterName.
func (r ObjectRef) Resolve(clusterName string) ObjectRef {
	if r.Node != "" {
		r.Name, r.Node = NodeName(clusterName, r.Node), ""
	}
	return r
}

// KubeProxyConfigCheck compares one field of kube-proxy's configuration
// with a value.
type KubeProxyConfigCheck struct {
	Field string `yaml:"field" rule:"required" doc:"The field, as its path in KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1): mode, clusterCIDR, nftables.minSyncPeriod, iptables.syncPeriod, conntrack.maxPerCore, ..."`
	Op    string `yaml:"op" rule:"required,enum=configOps" doc:"equals or notEquals (durations and numbers compared as values), atMost or atLeast (durations and numbers)."`
	Value Scalar `yaml:"value" rule:"required" doc:"The value to compare with: a duration such as 1s, a number, or text."`
}

// kubeProxyConfig check operators (equals and notEquals are the API
// check's).
const (
	OpAtMost  = "atMost"
	OpAtLeast = "atLeast"
)

// API check operators.
const (
	OpEquals       = "equals"
	OpNotEquals    = "notEquals"
	OpContains     = "contains"
	OpNotContains  = "notContains"
	OpMatches      = "matches"
	OpExists       = "exists"
	OpAbsent       = "absent"
	OpCountAtLeast = "countAtLeast"
	OpCountEquals  = "countEquals"
)

// APICheck asserts on a JSONPath (kubectl syntax) over the referenced
// objects: the values it yields across all of them, joined with spaces, are
// compared with Value; the count operators count the values.
type APICheck struct {
	Object   ObjectRef `yaml:"object" rule:"required" doc:"The objects to read."`
	JSONPath string    `yaml:"jsonPath" rule:"required" doc:"A kubectl JSONPath, for example {.spec.selector.app}."`
	Op       string    `yaml:"op" rule:"required,enum=apiOps" doc:"How to compare."`
	Value    Scalar    `yaml:"value" doc:"The value to compare with (a regular expression for matches, a number for the count operators)."`
}

// ProbeCheck sends Attempts probes and compares the outcomes with Expect.
type ProbeCheck struct {
	From       ProbeSource  `yaml:"from" rule:"required" doc:"Where the probes start."`
	Protocol   string       `yaml:"protocol" rule:"required,enum=protocols" doc:"What to send."`
	Target     ProbeTarget  `yaml:"target" rule:"required" doc:"Where the probes go."`
	Path       string       `yaml:"path" rule:"pattern=httpPath" doc:"The HTTP path (http only; default /). agnhost netexec answers /hostname and /clientip."`
	Query      string       `yaml:"query" doc:"The name to resolve (dns only)."`
	Attempts   int          `yaml:"attempts" rule:"min=1,max=100" doc:"How many probes to send (default 10), at once; when responders are judged, the first goes alone so that the state it leaves (a ClientIP affinity entry) holds for the rest."`
	SourcePort int          `yaml:"sourcePort" rule:"min=1,max=65535" doc:"dns probes from a node: send from this UDP source port, as a resolver that keeps its socket does; the attempts then run one after the other."`
	Timeout    string       `yaml:"timeout" rule:"pattern=duration" doc:"Each attempt's timeout, such as 2s (default 2s; 1s when the attempts should be refused or time out). The TCP handshake of http and tcp attempts gets at most 1s of it."`
	During     *ProbeDuring `yaml:"during" doc:"Something the grader does while the probe runs: the attempts repeat, round after round, until it is over, and every attempt of every round is judged. It changes the cluster, so the check runs only when the learner asks for a grade, after the other checks."`
	Expect     ProbeExpect  `yaml:"expect" rule:"required" doc:"The expected outcome."`
}

// ProbeDuring is what the grader does while a probe repeats.
type ProbeDuring struct {
	RolloutRestart *RolloutRestart `yaml:"rolloutRestart" rule:"required" doc:"Restart a Deployment's rollout, as kubectl rollout restart does; the probe repeats until the rollout is complete and the replaced Pods are gone."`
}

// RolloutRestart names the Deployment a probe's grader restarts.
type RolloutRestart struct {
	Deployment string `yaml:"deployment" rule:"required,pattern=name" doc:"The Deployment's name."`
	Namespace  string `yaml:"namespace" rule:"pattern=name" doc:"Its namespace (default: default)."`
}

// ProbeSource is a node, a named pod, any pod matching a selector, a
// witness Pod of the grader's own, or a client outside the cluster.
type ProbeSource struct {
	Node        string   `yaml:"node" doc:"A node's short name (control-plane, worker, worker2, ...)."`
	Outside     bool     `yaml:"outside" doc:"A client outside the cluster, in front of its load balancer: connections to a load-balancer address go through the lab's load balancer, as any outside client's would (embedded clusters)."`
	Pod         string   `yaml:"pod" rule:"pattern=name" doc:"A pod's name."`
	PodSelector string   `yaml:"podSelector" doc:"A label selector: one running matching Pod, the scenario's own (a Pod of its setup, or one its Deployments, StatefulSets, DaemonSets or ReplicaSets own) before any the learner added, Ready first, the oldest first."`
	Witness     *Witness `yaml:"witness" doc:"A Pod the grader makes for this check alone, with a fresh name, and deletes after it: the probe starts from it. A learner cannot single out a Pod that did not exist when they made their fix, so a check that some class of Pods is allowed or denied is judged on a new member of the class rather than on the one the learner was shown."`
	Namespace   string   `yaml:"namespace" rule:"pattern=name" doc:"The pod's namespace (default: default); for a witness, the namespace it is made in (unless it gets a namespace of its own)."`
	OnNode      string   `yaml:"onNode" doc:"With podSelector: a matching Pod on this node (short name), for checks that depend on where the client runs; with witness: the node the witness runs on."`
}

// Witness is a Pod the grader makes to probe from: a busybox that sleeps,
// with exactly the labels given (nothing marks it as the grader's, so no
// selector can leave it out), in the source's namespace or in a new
// namespace of its own. Before it judges traffic, the grader waits until
// every node's NetworkPolicy agent enforces the witness (embedded
// clusters), so a policy is judged on what it selects, not on how fast it
// is.
type Witness struct {
	Labels          map[string]string `yaml:"labels" doc:"The Pod's labels: the class of Pods it stands for (labels a Service selects would make the witness, which serves nothing, one of its endpoints)."`
	RandomLabels    []string          `yaml:"randomLabels" doc:"Label keys the witness gets with a value made up for each check (w- and eight random characters): a kind of Pod the learner cannot have seen, so no selector that leaves out the values they know (NotIn) leaves it out."`
	NamespaceLabels map[string]string `yaml:"namespaceLabels" doc:"When set ({} for none), the witness runs in a namespace the grader makes for it (with a fresh name, these labels and kubernetes.io/metadata.name) rather than in the source's namespace: a namespace the learner has never seen."`
}

// Probe target routes to a Service.
const (
	ViaClusterIP = "clusterIP"
	ViaDNSName   = "dnsName"
	ViaNodePort  = "nodePort"
	// ViaLoadBalancer is the Service's load-balancer address (its
	// status.loadBalancer.ingress), at the Service port.
	ViaLoadBalancer = "loadBalancer"
)

// ProbeTarget is a Service (reached through its ClusterIP, its DNS name or
// its NodePort on a node), a node's address, or a literal host.
type ProbeTarget struct {
	Service   string `yaml:"service" rule:"pattern=name" doc:"A Service's name."`
	Namespace string `yaml:"namespace" rule:"pattern=name" doc:"The Service's namespace (default: default)."`
	Via       string `yaml:"via" rule:"enum=vias" doc:"How to reach the Service (default clusterIP); nodePort needs node; loadBalancer is the address the lab's load balancer gave it (a client outside the cluster reaches it through the load balancer)."`
	Node      string `yaml:"node" doc:"A node's short name: its address is the target (with via: nodePort, the Service's NodePort on it)."`
	Host      string `yaml:"host" doc:"A literal IP address or DNS name."`
	Address   string `yaml:"address" rule:"enum=nodeAddresses" doc:"With node: which of the node's addresses: primary (its InternalIP, default) or secondary (another address on the same interface)."`
	Port      int    `yaml:"port" rule:"required,min=1,max=65535" doc:"The Service port (for a Service) or the port."`
}

// Probe outcomes.
const (
	OutcomeSuccess = "success"
	OutcomeRefused = "refused"
	OutcomeTimeout = "timeout"
)

// ProbeExpect is what the probes must show.
type ProbeExpect struct {
	Outcome    string      `yaml:"outcome" rule:"required,enum=outcomes" doc:"success; refused (a REJECT: connection refused or ICMP unreachable); timeout (a DROP: no answer)."`
	Ratio      float64     `yaml:"ratio" rule:"gt=0,max=1" doc:"The least fraction of attempts with that outcome (default 1)."`
	Responders *Responders `yaml:"responders" doc:"Which pods must have answered (http to /hostname)."`
	ClientIP   string      `yaml:"clientIP" rule:"enum=clientIPs" doc:"The client address the backend saw (http to /clientip): preserved (the probe's own address) or masqueraded (a node's address)."`
	Body       string      `yaml:"body" doc:"A regular expression (RE2) that the body of every answer must match, surrounding white space trimmed (http with outcome success): what an application reports."`
}

// Responders are the pods expected to answer.
type Responders struct {
	PodSelector string `yaml:"podSelector" rule:"required" doc:"Every answer must come from a pod matching this selector, and one a controller owns or the setup made: a bare Pod the learner made is no replica."`
	Namespace   string `yaml:"namespace" rule:"pattern=name" doc:"The pods' namespace (default: default)."`
	AtLeast     int    `yaml:"atLeast" rule:"min=1" doc:"How many distinct pods must have answered (default 1)."`
	// SetupOnly narrows the answering Pods to the scenario's own.
	SetupOnly bool `yaml:"setupOnly" doc:"Every answer must come from one of the scenario's own Pods: made by its setup, or by a Deployment, StatefulSet, DaemonSet or ReplicaSet its setup made (owners read from the API). A second workload of the learner's with the same labels, or the Service pointed at it, does not count. Leave it off where a new workload is a right fix."`
	// Topology constraints on the answers, for traffic policies and
	// trafficDistribution.
	SameNode bool `yaml:"sameNode" doc:"Every answer must come from a Pod on the node the probe starts from (its node, or the source Pod's node)."`
	SameZone bool `yaml:"sameZone" doc:"Every answer must come from a Pod on a node in the zone (topology.kubernetes.io/zone) of the node the probe starts from."`
	// Nodes is how many nodes the answering Pods must span.
	Nodes int `yaml:"nodes" rule:"min=1" doc:"The answers must come from Pods on at least this many different nodes."`
}

// DataplaneCheck asserts on the rules or conntrack tables of nodes, on the
// mode their proxier runs in, or on whether the lab's load balancer sends
// them traffic. Exactly one of Rules, Conntrack, ConntrackMax, ProxyMode and
// LoadBalancer is set.
type DataplaneCheck struct {
	Nodes        []string               `yaml:"nodes" rule:"unique" doc:"Nodes' short names (default: every node)."`
	Rules        *RulesAssertion        `yaml:"rules" doc:"What the node's proxy rules do with a Service's traffic."`
	Conntrack    *ConntrackAssertion    `yaml:"conntrack" doc:"What the node's conntrack table holds."`
	ConntrackMax *ConntrackMaxAssertion `yaml:"conntrackMax" doc:"How many connections the node's conntrack table may hold."`
	ProxyMode    string                 `yaml:"proxyMode" rule:"enum=proxyModes" doc:"The mode the node's kube-proxy runs in (it answers on 127.0.0.1:10249/proxyMode)."`
	LoadBalancer *LoadBalancerAssertion `yaml:"loadBalancer" doc:"Whether the lab's load balancer sends a Service's traffic to the node (embedded clusters)."`
	Follows      *FollowsAssertion      `yaml:"follows" doc:"Whether kube-proxy programs the node: at check time svclab makes a change of its own (a Service of its own gets an endpoint, then loses it) and the node's rules must follow each step. Rules written by hand and a stuck or dead proxier fail it, however right the rules for the scenario's own Services look."`
}

// DefaultFollowsWithin is how long a node's rules may take to follow each
// change of a follows assertion unless it says otherwise: kube-proxy's
// minSyncPeriod (1s by default) and a sync, with room for a busy machine.
const DefaultFollowsWithin = 8

// FollowsAssertion asks that a node's proxy rules follow the API: the
// owner of the dataplane (kube-proxy) fixed, not the node's rules by hand.
// The grader creates a Service of its own (in kube-system, a fresh name a
// learner cannot have targeted) with one endpoint, waits for every node's
// rules to send its ClusterIP to endpoints, takes the endpoint away, waits
// for them to reject it, and removes the Service.
type FollowsAssertion struct {
	WithinSeconds int `yaml:"withinSeconds" rule:"min=1,max=60" doc:"How long each node's rules may take to follow each change, in seconds (default 8)."`
}

// Load-balancer expectations.
const (
	LoadBalancerSends = "sends"
	LoadBalancerSkips = "skips"
)

// LoadBalancerAssertion says whether the lab's load balancer sends the
// traffic of a Service's load-balancer address to a node (sends) or not
// (skips): whether the node is in its healthy set.
type LoadBalancerAssertion struct {
	Service   string `yaml:"service" rule:"required,pattern=name" doc:"The LoadBalancer Service's name."`
	Namespace string `yaml:"namespace" rule:"pattern=name" doc:"The Service's namespace (default: default)."`
	Expect    string `yaml:"expect" rule:"required,enum=loadBalancerExpects" doc:"sends or skips."`
}

// ConntrackMaxAssertion says how many connections a node's conntrack table
// must be able to hold: its net.netfilter.nf_conntrack_max, or the lower
// cap of the lab's stand-in for it (the conntrack-table-small fault).
type ConntrackMaxAssertion struct {
	AtLeast int `yaml:"atLeast" rule:"required,min=1" doc:"The lowest limit that passes."`
}

// Rule verdicts of RulesAssertion.
const (
	RulesEndpoints = "endpoints"
	RulesReject    = "reject"
	RulesDrop      = "drop"
	RulesAbsent    = "absent"
)

// RulesAssertion says what a node's proxy rules do with a Service's traffic:
// send it to endpoints, reject it (no endpoints), drop it (no local
// endpoints under a Local traffic policy), or have no rules for it at all.
type RulesAssertion struct {
	Service   string `yaml:"service" rule:"required,pattern=name" doc:"The Service's name."`
	Namespace string `yaml:"namespace" rule:"pattern=name" doc:"The Service's namespace (default: default)."`
	Port      int    `yaml:"port" rule:"min=1,max=65535" doc:"The Service port (default: every port)."`
	Traffic   string `yaml:"traffic" rule:"enum=traffics" doc:"internal (ClusterIP, default) or external (NodePorts, external and load-balancer IPs)."`
	Expect    string `yaml:"expect" rule:"required,enum=ruleVerdicts" doc:"endpoints, reject, drop or absent."`
}

// Conntrack expectations.
const (
	ConntrackNoStaleEntries = "noStaleEntries"
	ConntrackNoEntries      = "noEntries"
	ConntrackKeptFromStart  = "keptFromStart"
)

// ConntrackAssertion says what a node's conntrack table must not hold for a
// Service: entries whose reply comes from an address that is no longer a
// ready endpoint (noStaleEntries), or any entry at all (noEntries); or
// what it must still hold: an entry tracked since before the attempt began
// (keptFromStart: the table was not flushed under a long-lived connection).
type ConntrackAssertion struct {
	Service   string `yaml:"service" rule:"required,pattern=name" doc:"The Service whose ClusterIP the entries are for."`
	Namespace string `yaml:"namespace" rule:"pattern=name" doc:"The Service's namespace (default: default)."`
	Protocol  string `yaml:"protocol" rule:"required,enum=l4protocols" doc:"tcp or udp."`
	Port      int    `yaml:"port" rule:"min=1,max=65535" doc:"The Service port (default: every port)."`
	Expect    string `yaml:"expect" rule:"required,enum=conntrackExpects" doc:"noStaleEntries, noEntries, or keptFromStart (an entry older than the attempt is still there; needs a node that records when its connections began: net.netfilter.nf_conntrack_timestamp, on in embedded clusters)."`
}

// Right-fix rules.
const (
	RightFixUIDUnchanged = "uidUnchanged"
	RightFixUnchanged    = "unchanged"
	RightFixExists       = "exists"
)

// RightFixCheck is a rule the fix must respect, compared with the state
// right after the faults were injected: the object was not deleted and
// recreated (uidUnchanged), a field was left alone (unchanged, with
// JSONPath), or the object still exists (exists).
type RightFixCheck struct {
	Object   ObjectRef `yaml:"object" rule:"required" doc:"The object the rule is about; with a labelSelector, every matching object (a DaemonSet's Pods, say): one of them replaced or changed breaks the rule."`
	Rule     string    `yaml:"rule" rule:"required,enum=rightFixRules" doc:"uidUnchanged, unchanged or exists."`
	JSONPath string    `yaml:"jsonPath" doc:"With unchanged: the field that must keep its value, such as {.spec.template.metadata.labels}."`
}

// Solution is another right fix than the reference solution.
type Solution struct {
	ID          string   `yaml:"id" rule:"required,pattern=name" doc:"The solution's id, unique among the scenario's other solutions."`
	Description string   `yaml:"description" rule:"required,nonblank" doc:"What the learner does (\"Restart kube-proxy on the worker\")."`
	Commands    []string `yaml:"commands" rule:"required,minItems=1,nonblank" doc:"The commands, in order."`
}

// WrongFix is a plausible wrong fix: shell commands a learner might type
// (kubectl is on the PATH) and the checks that must fail afterwards, each
// with a failMessage that tells the learner why.
type WrongFix struct {
	ID          string            `yaml:"id" rule:"required,pattern=name" doc:"The wrong fix's id, unique in the scenario."`
	Description string            `yaml:"description" rule:"required,nonblank" doc:"What the learner tries (\"Delete and recreate the Service\")."`
	Commands    []string          `yaml:"commands" rule:"required,minItems=1,nonblank" doc:"The commands, in order. A command that fails (the API server refuses it) is part of the lesson, not an error."`
	RejectedBy  []string          `yaml:"rejectedBy" rule:"required,minItems=1,unique" doc:"Ids of the checks that must fail after the wrong fix."`
	Undo        []string          `yaml:"undo" rule:"nonblank" doc:"Commands that bring the broken scenario back; without them the scenario is set up afresh after this wrong fix (for fixes that cannot be undone, such as recreating an object)."`
	Answers     map[string]string `yaml:"answers" doc:"Answers the wrong fix gives to answer checks, by check id (a wrong answer is a wrong fix too); they are taken back with the undo."`
}

// Scalar is a YAML scalar kept as its text, so that value: true and
// value: "true" mean the same.
type Scalar string
