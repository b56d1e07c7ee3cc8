package scenario

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/jsonpath"
	"mvdan.cc/sh/v3/syntax"
)

// validator checks the rules of a decoded scenario that span fields: what
// the struct tags cannot say.
type validator struct {
	d      *decoder
	s      *Scenario
	faults *Registry
}

func (v *validator) bad(path, format string, args ...any) {
	v.d.add(v.d.lineOf(path), path, fmt.Sprintf(format, args...))
}

func (v *validator) validate() {
	s := v.s
	for _, node := range sortedKeys(s.Cluster.NodeLabels) {
		p := "cluster.nodeLabels." + node
		if !s.Cluster.HasNode(node) {
			v.bad(p, "no node %q in a %d-node cluster; the nodes are %s", node, s.Cluster.Nodes, strings.Join(s.Cluster.NodeNames(), ", "))
		}
		v.labels(p, s.Cluster.NodeLabels[node])
	}
	for i, f := range s.Faults {
		v.fault(fmt.Sprintf("faults[%d]", i), f)
	}
	ids := map[string]int{}
	for i := range s.Checks {
		c := &s.Checks[i]
		p := fmt.Sprintf("checks[%d]", i)
		if j, dup := ids[c.ID]; dup && c.ID != "" {
			v.bad(p+".id", "%q is also the id of checks[%d]; check ids must be unique", c.ID, j)
		} else {
			ids[c.ID] = i
		}
		v.check(p, c)
	}
	v.commands("solution", s.Solution)
	v.attempts("", s.OtherSolutions, s.WrongFixes, nil)
	v.eitherMode()
}

// kubeProxyNFT is a command on kube-proxy's nftables table: what a
// learner in iptables mode has not got.
var kubeProxyNFT = regexp.MustCompile(`\bnft\s+(-[a-z]+\s+)*(list|add|insert|delete|flush|replace|get)\s+(table|chain|map|set|element|rule)\s+ip\s+kube-proxy\b`)

// eitherMode holds a scenario that names no proxy mode — it runs in the
// cluster's, nftables or iptables — to checks and texts right in both: a
// check of one mode, or a command on kube-proxy's nftables table given
// without the iptables way beside it, makes it a scenario of one mode.
func (v *validator) eitherMode() {
	s := v.s
	if s.Cluster.ProxyMode != "" {
		return
	}
	for i := range s.Checks {
		if d := s.Checks[i].Dataplane; d != nil && d.ProxyMode != "" {
			v.bad(fmt.Sprintf("checks[%d].dataplane.proxyMode", i), "the scenario names no proxy mode, so it runs in iptables mode as well as nftables mode, where this check fails on a right fix: name cluster.proxyMode: %s", d.ProxyMode)
		}
	}
	texts := []struct{ path, text string }{{"task", s.Task}, {"explanation", s.Explanation}}
	for i, h := range s.Hints {
		texts = append(texts, struct{ path, text string }{fmt.Sprintf("hints[%d]", i), h})
	}
	for _, t := range texts {
		if kubeProxyNFT.MatchString(t.text) && !strings.Contains(t.text, "iptables") {
			v.bad(t.path, "%q shows kube-proxy's nftables table, but the scenario names no proxy mode, so a learner in iptables mode reads it too: give the iptables way beside it (iptables-save -t nat | grep ...), or name cluster.proxyMode: nftables", kubeProxyNFT.FindString(t.text))
		}
	}
}

// attempts checks other solutions and wrong fixes (at prefix: "" in a
// scenario.yaml, "scenarios.ID." in an attempts file) against the
// scenario's checks; taken holds the ids of solutions and wrong fixes
// declared before them (by the scenario itself, for an attempts file).
func (v *validator) attempts(prefix string, solutions []Solution, wrongFixes []WrongFix, taken *Attempts) {
	s := v.s
	ids := map[string]int{}
	for i := range s.Checks {
		if _, dup := ids[s.Checks[i].ID]; !dup {
			ids[s.Checks[i].ID] = i
		}
	}
	solutionIDs := map[string]string{}
	wrongIDs := map[string]string{}
	if taken != nil {
		for i, o := range taken.OtherSolutions {
			solutionIDs[o.ID] = fmt.Sprintf("the scenario's otherSolutions[%d]", i)
		}
		for i, w := range taken.WrongFixes {
			wrongIDs[w.ID] = fmt.Sprintf("the scenario's wrongFixes[%d]", i)
		}
	}
	for i, o := range solutions {
		p := fmt.Sprintf("%sotherSolutions[%d]", prefix, i)
		if other, dup := solutionIDs[o.ID]; dup && o.ID != "" {
			v.bad(p+".id", "%q is also the id of %s; solution ids must be unique", o.ID, other)
		} else {
			solutionIDs[o.ID] = fmt.Sprintf("otherSolutions[%d]", i)
		}
		v.commands(p+".commands", o.Commands)
	}
	for i, w := range wrongFixes {
		p := fmt.Sprintf("%swrongFixes[%d]", prefix, i)
		if other, dup := wrongIDs[w.ID]; dup && w.ID != "" {
			v.bad(p+".id", "%q is also the id of %s; wrong fix ids must be unique", w.ID, other)
		} else {
			wrongIDs[w.ID] = fmt.Sprintf("wrongFixes[%d]", i)
		}
		v.commands(p+".commands", w.Commands)
		v.commands(p+".undo", w.Undo)
		for _, id := range slices.Sorted(maps.Keys(w.Answers)) {
			if i, ok := ids[id]; !ok || s.Checks[i].Answer == nil {
				v.bad(p+".answers."+id, "no answer check has the id %q", id)
			} else if len(w.Answers[id]) > MaxAnswerLength {
				v.bad(p+".answers."+id, "is longer than an answer may be (%d bytes)", MaxAnswerLength)
			}
		}
		for j, id := range w.RejectedBy {
			if _, ok := ids[id]; !ok {
				v.bad(fmt.Sprintf("%s.rejectedBy[%d]", p, j), "no check has the id %q", id)
			} else if c := s.Checks[ids[id]]; strings.TrimSpace(c.FailMessage) == "" {
				v.bad(fmt.Sprintf("%s.rejectedBy[%d]", p, j), "check %q has no failMessage: a check that rejects a wrong fix must tell the learner why", id)
			}
		}
	}
}

// answer checks an answer check: its expressions compile and its
// reference answer passes.
func (v *validator) answer(p string, a *AnswerCheck) {
	if _, err := regexp.Compile("(?i)" + a.Accept); err != nil {
		v.bad(p+".accept", "not a regular expression: %v", err)
		return
	}
	if _, err := regexp.Compile("(?i)" + a.Reject); err != nil {
		v.bad(p+".reject", "not a regular expression: %v", err)
		return
	}
	if len(a.Reference) > MaxAnswerLength {
		v.bad(p+".reference", "is longer than an answer may be (%d bytes)", MaxAnswerLength)
	}
	if ok, _ := a.Judge(a.Reference); !ok && strings.TrimSpace(a.Reference) != "" {
		v.bad(p+".reference", "%q does not pass the check: it must match accept and not reject", a.Reference)
	}
}

// commands checks that each command parses as a shell command.
func (v *validator) commands(p string, cmds []string) {
	for i, cmd := range cmds {
		if _, err := syntax.NewParser().Parse(strings.NewReader(cmd), ""); err != nil {
			v.bad(fmt.Sprintf("%s[%d]", p, i), "not a valid shell command: %v", err)
		}
	}
}

func (v *validator) fault(p string, f Fault) {
	if f.Name == "" {
		return // reported as required
	}
	kind, ok := v.faults.Lookup(f.Name)
	if !ok {
		v.bad(p+".name", "unknown fault %q; the fault library has %s", f.Name, strings.Join(v.faults.Names(), ", "))
		return
	}
	if err := kind.Validate(f.Params); err != nil {
		for _, e := range flatten(err) {
			var pe *ParamError
			if errors.As(e, &pe) {
				v.bad(p+".params."+pe.Param, "%v", pe.Err)
			} else {
				v.bad(p+".params", "%v", e)
			}
		}
		return
	}
	if specs, ok := kind.(interface{ ParamSpecs() []ParamSpec }); ok {
		for _, spec := range specs.ParamSpecs() {
			if spec.Type != ParamNode {
				continue
			}
			if node, ok := f.Params[spec.Name].(string); ok && !v.s.Cluster.HasNode(node) {
				v.bad(p+".params."+spec.Name, "no node %q in a %d-node cluster; the nodes are %s", node, v.s.Cluster.Nodes, strings.Join(v.s.Cluster.NodeNames(), ", "))
			}
		}
	}
}

// faultObjects checks that a fault's object parameters name objects that
// the setup manifests create.
func (v *validator) faultObjects() {
	for i, f := range v.s.Faults {
		kind, ok := v.faults.Lookup(f.Name)
		if !ok {
			continue
		}
		specs, ok := kind.(interface{ ParamSpecs() []ParamSpec })
		if !ok || kind.Validate(f.Params) != nil {
			continue
		}
		ns := f.Params.String("namespace", "default")
		for _, spec := range specs.ParamSpecs() {
			name, ok := f.Params[spec.Name].(string)
			if spec.Type != ParamObject || !ok {
				continue
			}
			if !v.s.creates(spec.Kind, ns, name) {
				v.bad(fmt.Sprintf("faults[%d].params.%s", i, spec.Name), "the setup manifests create no %s %s/%s", spec.Kind, ns, name)
			}
		}
	}
}

// witnessEndpoints checks that no Service of the setup manifests selects a
// witness's labels: the witness, which serves nothing, would become one of
// its endpoints.
func (v *validator) witnessEndpoints() {
	for i, c := range v.s.Checks {
		if c.Probe == nil || c.Probe.From.Witness == nil || c.Probe.From.Witness.NamespaceLabels != nil {
			continue
		}
		if svc := v.s.selectingService(c.Probe.From.Namespace, c.Probe.From.Witness.Labels); svc != "" {
			v.bad(fmt.Sprintf("checks[%d].probe.from.witness.labels", i), "the Service %s selects them: the witness, which serves nothing, would become one of its endpoints", svc)
		}
	}
}

// selectingService names a Service of the setup manifests in namespace
// (default: default) whose selector matches set, or returns "".
func (s *Scenario) selectingService(namespace string, set map[string]string) string {
	if namespace == "" {
		namespace = "default"
	}
	for _, m := range s.Manifests {
		for _, o := range m.Objects {
			svc, ok := o.Typed.(*corev1.Service)
			if ok && o.Namespace == namespace && len(svc.Spec.Selector) > 0 && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(set)) {
				return namespace + "/" + o.Name
			}
		}
	}
	return ""
}

// creates reports whether the setup manifests create the object.
func (s *Scenario) creates(kind, namespace, name string) bool {
	for _, m := range s.Manifests {
		for _, o := range m.Objects {
			if o.GVK.Kind == kind && o.Namespace == namespace && o.Name == name {
				return true
			}
		}
	}
	return false
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

func (v *validator) check(p string, c *Check) {
	if c.Kind() == "" {
		v.bad(p, "set exactly one of api, probe, dataplane, rightFix, answer and kubeProxyConfig")
	}
	if c.UnlocksHint > len(v.s.Hints) {
		v.bad(p+".unlocksHint", "there is no hint %d; the scenario has %d hints", c.UnlocksHint, len(v.s.Hints))
	}
	if c.API != nil {
		v.apiCheck(p+".api", c.API)
	}
	if c.Probe != nil {
		v.probe(p+".probe", c.Probe)
	}
	if c.Dataplane != nil {
		v.dataplane(p+".dataplane", c.Dataplane)
	}
	if a := c.Answer; a != nil {
		v.answer(p+".answer", a)
	}
	if k := c.KubeProxyConfig; k != nil {
		v.kubeProxyConfig(p+".kubeProxyConfig", k)
	}
	if c.RightFix != nil {
		v.rightFix(p+".rightFix", c.RightFix)
		if strings.TrimSpace(c.FailMessage) == "" {
			v.bad(p+".failMessage", "is required for a rightFix check: tell the learner what the fix should have left alone")
		}
	}
}

// GVK resolves the reference's kind (and apiVersion, inferred from the kind
// when empty) against the client-go scheme.
func (r ObjectRef) GVK() (schema.GroupVersionKind, error) {
	if r.APIVersion != "" {
		gv, err := schema.ParseGroupVersion(r.APIVersion)
		if err != nil {
			return schema.GroupVersionKind{}, fmt.Errorf("apiVersion %q: %w", r.APIVersion, err)
		}
		gvk := gv.WithKind(r.Kind)
		if !scheme.Scheme.Recognizes(gvk) {
			return schema.GroupVersionKind{}, fmt.Errorf("the lab knows no kind %s in %s", r.Kind, r.APIVersion)
		}
		return gvk, nil
	}
	// Prefer the stable version, and the kind's current group over the
	// deprecated extensions group.
	best, bestScore := schema.GroupVersionKind{}, -1
	for _, gv := range scheme.Scheme.PrioritizedVersionsAllGroups() {
		gvk := gv.WithKind(r.Kind)
		if !scheme.Scheme.Recognizes(gvk) {
			continue
		}
		score := 0
		if gv.Version == "v1" {
			score += 2
		}
		if gv.Group != "extensions" {
			score++
		}
		if score > bestScore {
			best, bestScore = gvk, score
		}
	}
	if bestScore >= 0 {
		return best, nil
	}
	return schema.GroupVersionKind{}, fmt.Errorf("the lab knows no kind %q (kinds are case-sensitive, such as Service or EndpointSlice)", r.Kind)
}

func (v *validator) objectRef(p string, r ObjectRef, byNameOnly bool) {
	if r.Kind != "" {
		if _, err := r.GVK(); err != nil {
			v.bad(p+".kind", "%v", err)
		}
	}
	if r.Node != "" {
		if r.Kind != "Node" {
			v.bad(p+".node", "goes with kind: Node")
		}
		if r.Name != "" || r.LabelSelector != "" {
			v.bad(p, "set node, name or labelSelector, only one")
		}
		v.node(p+".node", r.Node)
		return
	}
	switch {
	case r.Name != "" && r.LabelSelector != "":
		v.bad(p, "set name or labelSelector, not both")
	case r.Name == "" && r.LabelSelector == "":
		if byNameOnly {
			v.bad(p+".name", "is required")
		} else {
			v.bad(p, "set name or labelSelector")
		}
	case r.LabelSelector != "" && byNameOnly:
		v.bad(p+".labelSelector", "this rule is about one object: use name")
	}
	if r.Name != "" {
		if msgs := validation.IsDNS1123Subdomain(r.Name); len(msgs) > 0 {
			v.bad(p+".name", "%q is not a valid object name: %s", r.Name, strings.Join(msgs, "; "))
		}
	}
	v.selector(p+".labelSelector", r.LabelSelector)
}

// labels checks the keys and values of a label set.
func (v *validator) labels(p string, set map[string]string) {
	for _, k := range sortedKeys(set) {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			v.bad(p+"."+k, "not a valid label key: %s", strings.Join(msgs, "; "))
		}
		if msgs := validation.IsValidLabelValue(set[k]); len(msgs) > 0 {
			v.bad(p+"."+k, "not a valid label value: %s", strings.Join(msgs, "; "))
		}
	}
}

func (v *validator) selector(p, sel string) {
	if sel == "" {
		return
	}
	if _, err := labels.Parse(sel); err != nil {
		v.bad(p, "not a valid label selector: %v", err)
	}
}

func (v *validator) jsonPath(p, expr string) {
	if expr == "" {
		return
	}
	if err := jsonpath.New(p).Parse(expr); err != nil {
		v.bad(p, "not a valid JSONPath: %v", err)
	} else if !strings.Contains(expr, "{") {
		v.bad(p, "write the JSONPath in braces as kubectl does, for example {.spec.selector}")
	}
}

func (v *validator) apiCheck(p string, a *APICheck) {
	v.objectRef(p+".object", a.Object, false)
	v.jsonPath(p+".jsonPath", a.JSONPath)
	val := string(a.Value)
	switch a.Op {
	case OpExists, OpAbsent:
		if val != "" {
			v.bad(p+".value", "%s takes no value", a.Op)
		}
	case OpContains, OpNotContains:
		if val == "" {
			v.bad(p+".value", "is required with %s", a.Op)
		}
	case OpMatches:
		if _, err := regexp.Compile(val); err != nil {
			v.bad(p+".value", "not a valid regular expression: %v", err)
		}
	case OpCountAtLeast, OpCountEquals:
		if n, err := strconv.Atoi(val); err != nil || n < 0 {
			v.bad(p+".value", "%s needs a count: a whole number of at least 0", a.Op)
		}
	}
}

func (v *validator) node(p, short string) {
	if short != "" && !v.s.Cluster.HasNode(short) {
		v.bad(p, "no node %q in a %d-node cluster; the nodes are %s", short, v.s.Cluster.Nodes, strings.Join(v.s.Cluster.NodeNames(), ", "))
	}
}

func count(flags ...bool) int {
	n := 0
	for _, f := range flags {
		if f {
			n++
		}
	}
	return n
}

func (v *validator) probe(p string, pr *ProbeCheck) {
	from := pr.From
	if count(from.Node != "", from.Pod != "", from.PodSelector != "", from.Witness != nil, from.Outside) != 1 {
		v.bad(p+".from", "set exactly one of node, pod, podSelector, witness and outside")
	}
	if w := from.Witness; w != nil {
		v.labels(p+".from.witness.labels", w.Labels)
		v.labels(p+".from.witness.namespaceLabels", w.NamespaceLabels)
		if len(w.Labels) == 0 && len(w.RandomLabels) == 0 {
			v.bad(p+".from.witness.labels", "a witness stands for a class of Pods: give it the labels of that class (or randomLabels)")
		}
		for i, k := range w.RandomLabels {
			if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
				v.bad(fmt.Sprintf("%s.from.witness.randomLabels[%d]", p, i), "not a valid label key: %s", strings.Join(msgs, "; "))
			}
			if _, ok := w.Labels[k]; ok {
				v.bad(fmt.Sprintf("%s.from.witness.randomLabels[%d]", p, i), "%s is in labels too", k)
			}
		}
		if w.NamespaceLabels != nil && from.Namespace != "" {
			v.bad(p+".from.namespace", "a witness with namespaceLabels runs in a namespace of its own")
		}
	}
	if from.Outside && from.Namespace != "" {
		v.bad(p+".from.namespace", "a client outside the cluster has no namespace")
	}
	v.node(p+".from.node", from.Node)
	v.node(p+".from.onNode", from.OnNode)
	if from.OnNode != "" && from.PodSelector == "" && from.Witness == nil {
		v.bad(p+".from.onNode", "goes with podSelector or witness: which Pod on the node")
	}
	v.selector(p+".from.podSelector", from.PodSelector)
	if from.Node != "" && from.Namespace != "" {
		v.bad(p+".from.namespace", "a node has no namespace")
	}

	t := pr.Target
	switch {
	case t.Service != "" && t.Host != "":
		v.bad(p+".target", "set service or host, not both")
	case t.Service == "" && t.Host == "" && t.Node == "":
		v.bad(p+".target", "set service, host or node")
	case t.Host != "" && t.Node != "":
		v.bad(p+".target", "set host or node, not both")
	}
	if t.Service == "" {
		if t.Via != "" {
			v.bad(p+".target.via", "only a service target has a via")
		}
		if t.Namespace != "" {
			v.bad(p+".target.namespace", "only a service target has a namespace")
		}
	} else {
		switch {
		case t.Via == ViaNodePort && t.Node == "":
			v.bad(p+".target.node", "is required with via: nodePort (whose address to probe)")
		case t.Via != ViaNodePort && t.Node != "":
			v.bad(p+".target.node", "a node with a service target needs via: nodePort")
		}
	}
	v.node(p+".target.node", t.Node)
	if t.Address != "" && t.Node == "" {
		v.bad(p+".target.address", "goes with node: which of the node's addresses")
	}
	if t.Host != "" && net.ParseIP(t.Host) == nil {
		if msgs := validation.IsDNS1123Subdomain(strings.TrimSuffix(t.Host, ".")); len(msgs) > 0 {
			v.bad(p+".target.host", "%q is neither an IP address nor a DNS name", t.Host)
		}
	}

	if pr.SourcePort != 0 && (pr.Protocol != "dns" || from.Node == "") {
		v.bad(p+".sourcePort", "only dns probes from a node have a source port")
	}
	if pr.Path != "" && pr.Protocol != "http" {
		v.bad(p+".path", "only http probes have a path")
	}
	switch {
	case pr.Protocol == "dns" && pr.Query == "":
		v.bad(p+".query", "is required for a dns probe: the name to resolve")
	case pr.Protocol != "dns" && pr.Query != "":
		v.bad(p+".query", "only dns probes have a query")
	}
	if pr.Timeout != "" && pattern("duration").MatchString(pr.Timeout) {
		if d, err := time.ParseDuration(pr.Timeout); err != nil || d <= 0 || d > time.Minute {
			v.bad(p+".timeout", "must be a duration between 1ms and 1m")
		}
	}

	e := pr.Expect
	if e.Responders != nil || e.ClientIP != "" {
		if pr.Protocol != "http" || e.Outcome != OutcomeSuccess {
			v.bad(p+".expect", "responders and clientIP need an http probe with outcome: success")
		}
	}
	if e.Responders != nil {
		v.selector(p+".expect.responders.podSelector", e.Responders.PodSelector)
		if pr.Path != "/hostname" {
			v.bad(p+".path", "must be /hostname to learn the responders (agnhost netexec answers it with the pod's name)")
		}
	}
	if e.ClientIP != "" && pr.Path != "/clientip" {
		v.bad(p+".path", "must be /clientip to learn the client address the backend saw")
	}
	if r := e.Responders; r != nil && (r.SameNode || r.SameZone) && from.Outside {
		v.bad(p+".expect.responders", "sameNode and sameZone need a source on a node: a client outside the cluster is on none")
	}
	if e.Responders != nil && e.ClientIP != "" {
		v.bad(p+".expect", "set responders or clientIP, not both: they need different paths")
	}
	if e.Body != "" {
		if pr.Protocol != "http" || e.Outcome != OutcomeSuccess {
			v.bad(p+".expect.body", "needs an http probe with outcome: success")
		}
		if e.Responders != nil || e.ClientIP != "" {
			v.bad(p+".expect.body", "set body, responders or clientIP: each reads the body its own way")
		}
		if _, err := regexp.Compile(e.Body); err != nil {
			v.bad(p+".expect.body", "not a regular expression: %v", err)
		}
	}
	if pr.During != nil && (e.Responders != nil || e.ClientIP != "") {
		v.bad(p+".during", "judges every attempt's outcome: responders and clientIP change while Pods are replaced")
	}
}

func (v *validator) dataplane(p string, d *DataplaneCheck) {
	if count(d.Rules != nil, d.Conntrack != nil, d.ConntrackMax != nil, d.ProxyMode != "", d.LoadBalancer != nil, d.Follows != nil) != 1 {
		v.bad(p, "set exactly one of rules, conntrack, conntrackMax, proxyMode, loadBalancer and follows")
	}
	for i, n := range d.Nodes {
		v.node(fmt.Sprintf("%s.nodes[%d]", p, i), n)
	}
}

func (v *validator) rightFix(p string, r *RightFixCheck) {
	v.objectRef(p+".object", r.Object, r.Rule != RightFixUnchanged)
	switch {
	case r.Rule == RightFixUnchanged && r.JSONPath == "":
		v.bad(p+".jsonPath", "is required with rule: unchanged (which field must keep its value)")
	case r.Rule != RightFixUnchanged && r.JSONPath != "":
		v.bad(p+".jsonPath", "only rule: unchanged takes a jsonPath")
	}
	v.jsonPath(p+".jsonPath", r.JSONPath)
}
