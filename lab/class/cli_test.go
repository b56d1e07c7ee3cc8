package class

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/internal/pgtest"
	"github.com/svclab/svclab/lab/store"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestPrint(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	track := &Class{ID: "abc123", Spec: Spec{Name: "cka-week-3", Scenarios: []string{"selector-typo", "targetport-mismatch"}, Capacity: 10, Seats: 30, PoolSize: 2, TimeLimit: 2 * time.Hour, IdleTimeout: 20 * time.Minute}, JoinCode: "ABCD-EFGH", CreatedAt: t0, CodeExpiresAt: t0.Add(24 * time.Hour)}
	exam := &Class{ID: "xyz789", Spec: Spec{Name: "mock exam", Exam: true, Scenarios: []string{"selector-typo", "etp-local-drop"}, Weights: map[string]float64{"selector-typo": 30, "etp-local-drop": 70}, Capacity: 1, Seats: 1, PoolSize: 1, TimeLimit: 90 * time.Minute, IdleTimeout: time.Hour}, JoinCode: "WXYZ-2345", CreatedAt: t0.Add(time.Hour), CodeExpiresAt: t0.Add(2 * time.Hour), ClosedAt: t0.Add(3 * time.Hour)}
	learners := []Learner{{ID: "l1", Name: "Ann Lee", JoinedAt: t0.Add(5 * time.Minute)}, {ID: "l2", Name: "Bob", JoinedAt: t0.Add(7 * time.Minute)}}
	cells := map[string][]Cell{"l1": {{Scenario: "selector-typo", State: Solved, HintsUsed: 1}, {Scenario: "targetport-mismatch", State: Passing}}}
	now := t0.Add(30 * time.Minute)

	var b bytes.Buffer
	PrintCreated(&b, Created{Class: track, InstructorToken: "svi_secret"}, "http://lab.example:8080/")
	golden(t, "create.txt", b.Bytes())

	b.Reset()
	PrintList(&b, []*Class{exam, track}, map[string]int{"abc123": 2}, now)
	golden(t, "list.txt", b.Bytes())

	b.Reset()
	PrintList(&b, nil, nil, now)
	golden(t, "list-empty.txt", b.Bytes())

	b.Reset()
	PrintShow(&b, track, learners, cells, []string{"cabc123-k2f9", "cabc123-p0q1"}, "http://127.0.0.1:8080", now)
	golden(t, "show.txt", b.Bytes())

	b.Reset()
	PrintShow(&b, exam, nil, nil, nil, "http://127.0.0.1:8080", now)
	golden(t, "show-exam-closed.txt", b.Bytes())
}

// svclab runs "svclab class ARGS" against stateDir and databaseURL (the
// database in stateDir when "").
func svclab(t *testing.T, stateDir, databaseURL string, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "svclab", SilenceErrors: true, SilenceUsage: true}
	root.PersistentFlags().String("state-dir", stateDir, "")
	root.PersistentFlags().String("database-url", databaseURL, "")
	root.PersistentFlags().String("log-level", "error", "")
	root.AddCommand(NewCommand())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"class"}, args...))
	err := root.Execute()
	return out.String(), err
}

func TestCommands(t *testing.T) { pgtest.ForEachBackend(t, DBFileName, testCommands) }

func testCommands(t *testing.T, b pgtest.Backend) {
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
		out, err := svclab(t, dir, databaseURL, tc.args...)
		got := out
		if err != nil {
			got += err.Error()
		}
		if (err != nil) != tc.err || !strings.Contains(got, tc.want) {
			t.Errorf("svclab class %s: %q, %v; want %q", strings.Join(tc.args, " "), out, err, tc.want)
		}
	}
	// The token printed once is the one that opens the class.
	out, _ := svclab(t, dir, databaseURL, "create", "--name", "tok", "--scenarios", "selector-typo")
	i := strings.Index(out, InstructorTokenPrefix)
	token := strings.TrimSpace(out[i:])
	db, err := OpenDB(context.Background(), store.Location(dir, databaseURL), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := db.Class(context.Background(), "tok")
	if err != nil || !c.CheckInstructorToken(token) {
		t.Errorf("the printed token %q does not open the class: %v", token, err)
	}
}

func TestCapacityAdvice(t *testing.T) {
	for _, tc := range []struct {
		capacity, cpus int
		want           string
	}{
		{10, 2, ""},
		{1, 1, ""},
		{11, 2, "this machine has 2 CPUs, which keep about 10 labs responsive (5 per CPU). With 11 labs at once, learners' clusters start late and their checks may time out; use --capacity 10, or serve the class from a machine with 3 CPUs."},
		{30, 2, "use --capacity 10, or serve the class from a machine with 6 CPUs"},
		{6, 1, "this machine has 1 CPU, which"},
		{30, 0, ""},
	} {
		got := CapacityAdvice(tc.capacity, tc.cpus)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("CapacityAdvice(%d, %d) = %q, want %q", tc.capacity, tc.cpus, got, tc.want)
		}
	}
}
