package scenario

import (
	"fmt"
	"maps"
	"slices"
)

// Attempts are fixes tried on a scenario beyond the reference solution:
// other right fixes, which must pass every check, and wrong fixes, which
// must fail the checks they name.
type Attempts struct {
	OtherSolutions []Solution `yaml:"otherSolutions" doc:"Other right fixes: each must pass every check."`
	WrongFixes     []WrongFix `yaml:"wrongFixes" doc:"Wrong fixes: each must fail exactly the checks it names in rejectedBy."`
}

// AttemptsFile is a file of attempts kept outside the scenarios (svclab
// scenario test --wrong-fixes-from FILE): an author's or a reviewer's
// extra tries, by scenario id.
type AttemptsFile struct {
	Scenarios map[string]Attempts `yaml:"scenarios" rule:"required" doc:"The attempts, by scenario id."`
}

// LoadAttempts decodes an attempts file (file is its name in messages) and
// validates each scenario's attempts against cat: the scenario exists,
// ids do not repeat the scenario's own, commands parse, rejectedBy and
// answers name the scenario's checks.
func LoadAttempts(file string, data []byte, cat *Catalog) (map[string]Attempts, Problems) {
	d := newDecoder(file)
	var f AttemptsFile
	d.decodeDocument(data, &f, "an attempts file")
	if _, parsed := d.lines[""]; !parsed {
		return nil, d.problems
	}
	for _, id := range slices.Sorted(maps.Keys(f.Scenarios)) {
		p := "scenarios." + id
		s := cat.Get(id)
		if s == nil {
			d.add(d.lineOf(p), p, fmt.Sprintf("no scenario has the id %q", id))
			continue
		}
		a := f.Scenarios[id]
		if len(a.OtherSolutions) == 0 && len(a.WrongFixes) == 0 {
			d.add(d.lineOf(p), p, "names no otherSolutions and no wrongFixes")
		}
		v := &validator{d: d, s: s}
		v.attempts(p+".", a.OtherSolutions, a.WrongFixes, &Attempts{OtherSolutions: s.OtherSolutions, WrongFixes: s.WrongFixes})
	}
	if len(d.problems) > 0 {
		d.problems.sort()
		return nil, d.problems
	}
	return f.Scenarios, nil
}

// WithAttempts is a copy of s that also tries a's attempts, after its own.
func (s *Scenario) WithAttempts(a Attempts) *Scenario {
	c := *s
	c.OtherSolutions = append(slices.Clip(s.OtherSolutions), a.OtherSolutions...)
	c.WrongFixes = append(slices.Clip(s.WrongFixes), a.WrongFixes...)
	return &c
}
