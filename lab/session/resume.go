package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/scenario"
)

// stateVersion is the version of the state that State writes.
const stateVersion = 1

// savedState is what a started session keeps so that another process can
// resume it: for now the baseline of the rightFix checks. It is an
// envelope so that more can be added without breaking saved states.
type savedState struct {
	Version  int             `json:"version"`
	Scenario string          `json:"scenario"`
	Cluster  string          `json:"cluster"`
	Baseline *grade.Baseline `json:"baseline"`
}

// State returns what Resume needs to pick the session up in another
// process (JSON): the scenario, the cluster and the baseline.
func (s *Session) State() ([]byte, error) {
	if s.Baseline == nil {
		return nil, errors.New("the session has no baseline yet: it did not finish starting")
	}
	return json.Marshal(savedState{Version: stateVersion, Scenario: s.Scenario.ID, Cluster: s.Cluster.Name(), Baseline: s.Baseline})
}

// Resume picks up a session that Start set up earlier, maybe in another
// process, from the state it saved (State): it grades against the saved
// baseline, solves and tears down like the original session. Cluster-wide
// state recorded only in the original process is not restored by Teardown.
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
	ses := &Session{Scenario: s, Cluster: c, Baseline: st.Baseline, opts: opts}
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
