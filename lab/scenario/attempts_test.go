package scenario

import (
	"strings"
	"testing"
)

func TestLoadAttempts(t *testing.T) {
	cat, problems := Load(Options{}, DirSource("testdata/valid"))
	if err := problems.Err(); err != nil {
		t.Fatal(err)
	}
	s := cat.Get("minimal")
	s.Checks[0].FailMessage = "web does not answer."
	s.WrongFixes = []WrongFix{{ID: "recreate", Description: "d", Commands: []string{"true"}, RejectedBy: []string{"answers"}}}
	const good = `scenarios:
  minimal:
    wrongFixes:
      - id: delete-service
        description: Delete the Service
        commands: ["kubectl delete service web"]
        rejectedBy: [answers]
    otherSolutions:
      - id: patch
        description: Patch the replicas
        commands: ["kubectl patch deployment web -p '{\"spec\":{\"replicas\":1}}'"]
`
	tests := []struct {
		name, file string
		want       []string // substrings of the problems, in order; none: valid
	}{
		{"valid", good, nil},
		{"unknown scenario", "scenarios:\n  nope:\n    wrongFixes: []\n", []string{`attempts.yaml:3: scenarios.nope: no scenario has the id "nope"`}},
		{"nothing to try", "scenarios:\n  minimal: {}\n", []string{"scenarios.minimal: names no otherSolutions and no wrongFixes"}},
		{"id of the scenario's own", strings.Replace(good, "delete-service", "recreate", 1), []string{`attempts.yaml:4: scenarios.minimal.wrongFixes[0].id: "recreate" is also the id of the scenario's wrongFixes[0]`}},
		{"unknown check", strings.Replace(good, "[answers]", "[answer]", 1), []string{`scenarios.minimal.wrongFixes[0].rejectedBy[0]: no check has the id "answer"`}},
		{"bad shell", strings.Replace(good, `"kubectl delete service web"`, `"kubectl delete 'service"`, 1), []string{"scenarios.minimal.wrongFixes[0].commands[0]: not a valid shell command"}},
		{"unknown field", good + "    notes: x\n", []string{"scenarios.minimal.notes: unknown field"}},
		{"missing rejectedBy", strings.Replace(good, "        rejectedBy: [answers]\n", "", 1), []string{"scenarios.minimal.wrongFixes[0].rejectedBy: "}},
		{"two documents", good + "---\nscenarios: {}\n", []string{"an attempts file holds a single YAML document"}},
		{"not YAML", "scenarios: [", []string{"invalid YAML"}},
		{"empty", "", []string{"the file is empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problems := LoadAttempts("attempts.yaml", []byte(tt.file), cat)
			if len(tt.want) == 0 {
				if len(problems) > 0 {
					t.Fatalf("problems: %v", problems)
				}
				a := got["minimal"]
				if len(a.WrongFixes) != 1 || a.WrongFixes[0].ID != "delete-service" || len(a.OtherSolutions) != 1 {
					t.Fatalf("attempts = %+v", a)
				}
				w := s.WithAttempts(a)
				if len(w.WrongFixes) != 2 || len(w.OtherSolutions) != 1 || len(s.WrongFixes) != 1 || len(s.OtherSolutions) != 0 {
					t.Errorf("WithAttempts: %d wrong fixes, %d solutions; the scenario's own now %d, %d", len(w.WrongFixes), len(w.OtherSolutions), len(s.WrongFixes), len(s.OtherSolutions))
				}
				return
			}
			if got != nil {
				t.Errorf("attempts %v returned with problems", got)
			}
			text := problems.Error()
			if len(problems) != len(tt.want) {
				t.Errorf("%d problems, want %d:\n%s", len(problems), len(tt.want), text)
			}
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("problems do not say %q:\n%s", w, text)
				}
			}
		})
	}
}
