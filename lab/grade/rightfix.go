package grade

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/svclab/svclab/lab/scenario"
)

// Baseline is what the rightFix checks compare with: each one's object as
// it was right after the faults were injected (a fault may itself recreate
// an object, so the state after setup alone would not do).
type Baseline struct {
	Scenario string              `json:"scenario"`
	Taken    time.Time           `json:"taken"`
	Checks   map[string]Snapshot `json:"checks"`
}

// Snapshot is one object as a rightFix check sees it.
type Snapshot struct {
	Exists bool   `json:"exists"`
	UID    string `json:"uid,omitempty"`
	// Value is the check's JSONPath on the object (rule unchanged).
	Value string `json:"value,omitempty"`
}

// Record takes the baseline of every rightFix check of s.
func (g *Grader) Record(ctx context.Context, s *scenario.Scenario) (*Baseline, error) {
	b := &Baseline{Scenario: s.ID, Taken: time.Now(), Checks: map[string]Snapshot{}}
	for _, c := range s.Checks {
		if c.RightFix == nil {
			continue
		}
		snap, err := g.snapshot(ctx, c.RightFix)
		if err != nil {
			return nil, fmt.Errorf("recording check %s: %w", c.ID, err)
		}
		b.Checks[c.ID] = snap
	}
	return b, nil
}

func (g *Grader) snapshot(ctx context.Context, r *scenario.RightFixCheck) (Snapshot, error) {
	objs, err := g.Objects.Get(ctx, r.Object.Resolve(g.Cluster.Name()))
	if err != nil {
		return Snapshot{}, err
	}
	if len(objs) == 0 {
		return Snapshot{}, nil
	}
	// A labelSelector's objects count together, in the API's order (by
	// name): one of them replaced or changed changes the snapshot.
	uids := make([]string, len(objs))
	for i, o := range objs {
		uids[i] = string(o.GetUID())
	}
	s := Snapshot{Exists: true, UID: strings.Join(uids, " ")}
	if r.JSONPath != "" {
		s.Value, _, err = joinValues(objs, r.JSONPath)
		if err != nil {
			return Snapshot{}, err
		}
	}
	return s, nil
}

// SaveBaseline writes b as JSON to path; LoadBaseline reads it back.
func SaveBaseline(path string, b *Baseline) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// LoadBaseline reads a baseline written by SaveBaseline.
func LoadBaseline(path string) (*Baseline, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var b Baseline
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &b, nil
}

// rightFix compares an object with its baseline.
func (g *Grader) rightFix(ctx context.Context, c *scenario.Check, base *Baseline) (string, error) {
	r := c.RightFix
	what := describeRef(r.Object.Resolve(g.Cluster.Name()))
	var before Snapshot
	var ok bool
	if base != nil {
		before, ok = base.Checks[c.ID]
	}
	if !ok && r.Rule != scenario.RightFixExists {
		return "", fmt.Errorf("no baseline was recorded for this check when the scenario started, so there is nothing to compare %s with", what)
	}
	now, err := g.snapshot(ctx, r)
	if err != nil {
		return "", err
	}
	switch r.Rule {
	case scenario.RightFixExists:
		if !now.Exists {
			return "", failf("%s no longer exists", what)
		}
		return what + " exists", nil
	case scenario.RightFixUIDUnchanged:
		switch {
		case !before.Exists:
			return "", fmt.Errorf("%s did not exist when the scenario started", what)
		case !now.Exists:
			return "", failf("%s was deleted", what)
		case now.UID != before.UID:
			return "", failf("%s was deleted and created again (its UID changed from %s to %s)", what, before.UID, now.UID)
		}
		return fmt.Sprintf("%s is the same object (UID %s)", what, now.UID), nil
	case scenario.RightFixUnchanged:
		switch {
		case !before.Exists:
			return "", fmt.Errorf("%s did not exist when the scenario started", what)
		case !now.Exists:
			return "", failf("%s was deleted", what)
		case now.Value != before.Value:
			return "", failf("%s of %s changed from %s to %s", r.JSONPath, what, quote(before.Value), quote(now.Value))
		}
		return fmt.Sprintf("%s of %s is unchanged", r.JSONPath, what), nil
	}
	return "", fmt.Errorf("unknown rightFix rule %q", r.Rule)
}
