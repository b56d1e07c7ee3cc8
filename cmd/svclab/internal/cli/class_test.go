package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/svclab/svclab/internal/pgtest"
	"github.com/svclab/svclab/lab/class"
	"github.com/svclab/svclab/lab/store"
)

// svclabClass runs "svclab class ARGS" against stateDir and databaseURL
// (the database in stateDir when "").
func svclabClass(t *testing.T, stateDir, databaseURL string, args ...string) (string, error) {
	t.Helper()
	return runCLI(t, append([]string{"--state-dir", stateDir, "--database-url", databaseURL, "--log-level", "error", "class"}, args...)...)
}

func TestClassCommands(t *testing.T) { pgtest.ForEachBackend(t, class.DBFileName, testClassCommands) }

func testClassCommands(t *testing.T, b pgtest.Backend) {
	dir, databaseURL := t.TempDir(), ""
	if b.Name != "sqlite" {
		databaseURL = b.Location(t)
	}
	for _, tc := range []struct {
		args []string
		want string // in the output, or in the error
		err  bool
	}{
		{[]string{"list"}, "No classes yet", false},
		{[]string{"create", "--name", "cka", "--scenarios", "selector-typo,targetport-mismatch", "--capacity", "2", "--warm-pool", "1"}, "Instructor token (shown only now", false},
		{[]string{"create", "--name", "cka", "--scenarios", "selector-typo"}, `a class named "cka" exists already`, true},
		{[]string{"create", "--name", "x", "--scenarios", "nope"}, `no scenario "nope"`, true},
		{[]string{"create", "--name", "x", "--scenarios", "selector-typo", "--weights", "selector-typo=2"}, "--weights is for exams: add --exam", true},
		{[]string{"create", "--name", "x", "--scenarios", "selector-typo", "--capacity", "1", "--warm-pool", "2"}, "--warm-pool 2: use 0 to 1", true},
		{[]string{"create", "--name", "mock", "--exam", "--scenarios", "selector-typo,targetport-mismatch", "--weights", "selector-typo=30,targetport-mismatch=70", "--time-limit", "45m"}, `Created exam "mock"`, false},
		{[]string{"list"}, "mock", false},
		{[]string{"show", "mock"}, "45m long, weights selector-typo=30, targetport-mismatch=70", false},
		{[]string{"show", "nope"}, `no class "nope"`, true},
		{[]string{"export", "cka", "--format", "json"}, "[]", false},
		{[]string{"export", "cka", "--format", "xml"}, "use csv or json", true},
		{[]string{"close", "mock"}, `Class "mock" is closed.`, false},
		{[]string{"show", "mock"}, "closed", false},
	} {
		out, err := svclabClass(t, dir, databaseURL, tc.args...)
		got := out
		if err != nil {
			got += err.Error()
		}
		if (err != nil) != tc.err || !strings.Contains(got, tc.want) {
			t.Errorf("svclab class %s: %q, %v; want %q", strings.Join(tc.args, " "), out, err, tc.want)
		}
	}
	// The token printed once is the one that opens the class.
	out, _ := svclabClass(t, dir, databaseURL, "create", "--name", "tok", "--scenarios", "selector-typo")
	i := strings.Index(out, class.InstructorTokenPrefix)
	token := strings.TrimSpace(out[i:])
	db, err := class.OpenDB(context.Background(), store.Location(dir, databaseURL), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := db.Class(context.Background(), "tok")
	if err != nil || !c.CheckInstructorToken(token) {
		t.Errorf("the printed token %q does not open the class: %v", token, err)
	}
}
