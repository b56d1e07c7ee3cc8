package grade

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/svclab/svclab/lab/scenario"
)

// api evaluates an API assertion.
func (g *Grader) api(ctx context.Context, a *scenario.APICheck) (string, error) {
	ref := a.Object.Resolve(g.Cluster.Name())
	objs, err := g.Objects.Get(ctx, ref)
	if err != nil {
		return "", err
	}
	what := describeRef(ref)
	if len(objs) == 0 {
		if a.Op == scenario.OpAbsent || (a.Op == scenario.OpCountEquals && string(a.Value) == "0") {
			return fmt.Sprintf("there are no %s", what), nil
		}
		if ref.Name != "" {
			return "", failf("there is no %s", what)
		}
		if a.Op != scenario.OpCountAtLeast && a.Op != scenario.OpCountEquals {
			return "", failf("there are no %s", what)
		}
	}
	joined, values, err := joinValues(objs, a.JSONPath)
	if err != nil {
		return "", err
	}
	want := strings.TrimSpace(string(a.Value))
	got := fmt.Sprintf("%s of %s is %s", a.JSONPath, what, quote(joined))
	if joined == "" {
		got = fmt.Sprintf("%s of %s is empty", a.JSONPath, what)
	}
	ok := false
	var expected string
	switch a.Op {
	case scenario.OpEquals:
		ok, expected = joined == want, "expected "+quote(want)
	case scenario.OpNotEquals:
		ok, expected = joined != want, "expected anything but "+quote(want)
	case scenario.OpContains:
		ok, expected = strings.Contains(joined, want), "expected it to contain "+quote(want)
	case scenario.OpNotContains:
		ok, expected = !strings.Contains(joined, want), "expected it not to contain "+quote(want)
	case scenario.OpMatches:
		re, err := regexp.Compile(want)
		if err != nil {
			return "", fmt.Errorf("value %q is not a regular expression: %w", want, err)
		}
		ok, expected = re.MatchString(joined), "expected it to match "+quote(want)
	case scenario.OpExists:
		ok, expected = joined != "", "expected a value"
	case scenario.OpAbsent:
		ok, expected = joined == "", "expected no value"
	case scenario.OpCountAtLeast, scenario.OpCountEquals:
		n, err := strconv.Atoi(want)
		if err != nil {
			return "", fmt.Errorf("value %q is not a count", want)
		}
		got = fmt.Sprintf("%s of %s yields %d values", a.JSONPath, what, len(values))
		if a.Op == scenario.OpCountAtLeast {
			ok, expected = len(values) >= n, fmt.Sprintf("expected at least %d", n)
		} else {
			ok, expected = len(values) == n, fmt.Sprintf("expected exactly %d", n)
		}
	default:
		return "", fmt.Errorf("unknown operator %q", a.Op)
	}
	if !ok {
		return "", failExpected(got, expected)
	}
	return got, nil
}
