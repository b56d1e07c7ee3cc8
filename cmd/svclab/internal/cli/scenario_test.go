package cli

import (
	"errors"
	"strings"
	"testing"
)

func TestScenarioLintClean(t *testing.T) {
	out, err := runCLI(t, "scenario", "lint", "../../../../lab/scenario/testdata/valid")
	if err != nil {
		t.Fatalf("lint: %v\n%s", err, out)
	}
	if out != "1 scenario, no problems\n" {
		t.Errorf("output = %q", out)
	}
}

func TestScenarioLintProblems(t *testing.T) {
	out, err := runCLI(t, "scenario", "lint", "../../../../lab/scenario/testdata/valid", "../../../../lab/scenario/testdata/broken/bad-weight")
	var exit *ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("err = %v, want exit code 1", err)
	}
	want := `../../../../lab/scenario/testdata/broken/bad-weight/bad-weight/scenario.yaml:5: estimatedMinutes: must be an integer, not a string
../../../../lab/scenario/testdata/broken/bad-weight/bad-weight/scenario.yaml:22: checks[0].weight: must be a positive number
../../../../lab/scenario/testdata/broken/bad-weight/bad-weight/scenario.yaml:30: checks[1].weight: must be a number, not a string
../../../../lab/scenario/testdata/broken/bad-weight/bad-weight/scenario.yaml:38: checks[2].weight: must be a positive number
4 problems; 1 scenario clean
`
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
}

func TestScenarioList(t *testing.T) {
	out, err := runCLI(t, "scenario", "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ID", "selector-typo", "targetport-mismatch", "etp-local-drop", "Services & Networking"} {
		if !strings.Contains(out, want) {
			t.Errorf("list output lacks %q:\n%s", want, out)
		}
	}
	out, err = runCLI(t, "scenario", "list", "--dir", "../../../../lab/scenario/testdata/valid")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "minimal") || strings.Contains(out, "selector-typo") {
		t.Errorf("list --dir output:\n%s", out)
	}
}
