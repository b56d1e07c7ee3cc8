package class

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
