package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/scenario"
)

// stateVersion is the version of the state that State writes.
const stateVersion = 1

// savedState is what a started session keeps so that another process can
// resume it: the baseline of the rightFix checks and the cluster-wide state
// Teardown puts back. It is an envelope: fields can be added without
// breaking saved states.
type savedState struct {
	Version  int    `json:"version"`
	Scenario string `json:"scenario"`
	Cluster  string `json:"cluster"`
	// Generation is the life of the cluster the session was set up on
	// (cluster.Generation; empty in states saved before it was kept).
	Generation string          `json:"generation,omitempty"`
	Baseline   *grade.Baseline `json:"baseline"`
	Guard      *savedGuard     `json:"guard,omitempty"`
}

// savedGuard is a guard in JSON.
type savedGuard struct {
	ProxyConfig   map[string]string    `json:"proxyConfig,omitempty"`
	ProxyTemplate *corev1.PodSpec      `json:"proxyTemplate,omitempty"`
	DNSConfig     map[string]string    `json:"dnsConfig,omitempty"`
	DNSTemplate   *corev1.PodSpec      `json:"dnsTemplate,omitempty"`
	DNSReplicas   *int32               `json:"dnsReplicas,omitempty"`
	Nodes         map[string]savedNode `json:"nodes,omitempty"`
}

type savedNode struct {
	Labels map[string]string `json:"labels,omitempty"`
	Taints []corev1.Taint    `json:"taints,omitempty"`
}

func saveGuard(g *guard) *savedGuard {
	if g == nil {
		return nil
	}
	sg := &savedGuard{ProxyConfig: g.proxyConfig, ProxyTemplate: g.proxyTemplate, DNSConfig: g.dnsConfig, DNSTemplate: g.dnsTemplate, DNSReplicas: g.dnsReplicas, Nodes: map[string]savedNode{}}
	for name, n := range g.nodes {
		sg.Nodes[name] = savedNode{Labels: n.labels, Taints: n.taints}
	}
	return sg
}

func (sg *savedGuard) guard() *guard {
	if sg == nil {
		return nil
	}
	g := &guard{proxyConfig: sg.ProxyConfig, proxyTemplate: sg.ProxyTemplate, dnsConfig: sg.DNSConfig, dnsTemplate: sg.DNSTemplate, dnsReplicas: sg.DNSReplicas, nodes: map[string]nodeState{}}
	for name, n := range sg.Nodes {
		g.nodes[name] = nodeState{labels: n.Labels, taints: n.Taints}
	}
	return g
}

// State returns what Resume needs to pick the session up in another
// process (JSON): the scenario, the cluster, the baseline and the
// cluster-wide state to put back.
func (s *Session) State() ([]byte, error) {
	if s.Baseline == nil {
		return nil, errors.New("the session has no baseline yet: it did not finish starting")
	}
	return json.Marshal(savedState{Version: stateVersion, Scenario: s.Scenario.ID, Cluster: s.Cluster.Name(), Generation: s.generation, Baseline: s.Baseline, Guard: saveGuard(s.guard)})
}

// Resume picks up a session that Start set up earlier, maybe in another
// process, from the state it saved (State): it grades against the saved
// baseline, solves and tears down (putting the saved cluster-wide state
// back) like the original session.
func Resume(s *scenario.Scenario, c cluster.Cluster, state []byte, opts Options) (*Session, error) {
	opts.defaults()
	var st savedState
	if err := json.Unmarshal(state, &st); err != nil {
		return nil, fmt.Errorf("the saved state of scenario %s is damaged: %w", s.ID, err)
	}
	switch {
	case st.Version != stateVersion:
		return nil, fmt.Errorf("the saved state of scenario %s has version %d; this svclab reads version %d", s.ID, st.Version, stateVersion)
	case st.Scenario != s.ID:
		return nil, fmt.Errorf("the saved state is of scenario %s, not %s", st.Scenario, s.ID)
	case st.Cluster != c.Name():
		return nil, fmt.Errorf("the saved state of scenario %s is of cluster %s, not %s", s.ID, st.Cluster, c.Name())
	case st.Baseline == nil:
		return nil, fmt.Errorf("the saved state of scenario %s has no baseline", s.ID)
	}
	ses := &Session{Scenario: s, Cluster: c, Baseline: st.Baseline, guard: st.Guard.guard(), generation: st.Generation, opts: opts}
	var err error
	if ses.apply, err = newApplier(c); err != nil {
		return nil, err
	}
	if ses.Grader, err = grade.New(c, opts.Log); err != nil {
		return nil, err
	}
	return ses, nil
}

// Attach returns a session for scenario s as it may be set up on c,
// without a baseline: for Teardown (revert the faults, remove what the
// setup created) when the process that started it is gone and no state was
// saved, for example because Start failed. It must not be used to grade.
func Attach(s *scenario.Scenario, c cluster.Cluster, opts Options) (*Session, error) {
	opts.defaults()
	ses := &Session{Scenario: s, Cluster: c, opts: opts}
	var err error
	if ses.apply, err = newApplier(c); err != nil {
		return nil, err
	}
	return ses, nil
}

// Abort removes what a Start that failed left on the cluster (the faults it
// injected, what the setup created); it does nothing when Start failed
// before it touched the cluster.
func (s *Session) Abort(ctx context.Context) error {
	if s == nil || s.apply == nil {
		return nil
	}
	return s.Teardown(ctx, false)
}
