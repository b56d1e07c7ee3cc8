package class

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/svclab/svclab/internal/pgtest"
)

func TestExport(t *testing.T) { pgtest.ForEachBackend(t, DBFileName, testExport) }

func testExport(t *testing.T, b pgtest.Backend) {
	ctx := context.Background()
	r := openRoom(t, b, Spec{Name: "exam", Exam: true, Scenarios: []string{"selector-typo", "targetport-mismatch"}, Weights: map[string]float64{"selector-typo": 40, "targetport-mismatch": 60}})
	r.Board.Started(ctx, r.ann.LearnerID, "selector-typo")
	r.Board.HintUsed(ctx, r.ann.LearnerID, "selector-typo", 1)
	r.clk.Advance(90 * time.Second)
	r.Board.Checked(ctx, r.ann.LearnerID, "selector-typo", report(true, true))
	r.StartExam(ctx, r.ann)
	if _, err := r.FinishExam(ctx, r.ann); err != nil {
		t.Fatal(err)
	}
	rows, err := r.db.Results(ctx, r.Class)
	if err != nil {
		t.Fatal(err)
	}
	// Learner ids are random: name them.
	for i := range rows {
		rows[i].LearnerID = rows[i].Learner[:1] + "1"
	}
	for _, format := range []string{"csv", "json"} {
		var b bytes.Buffer
		if err := WriteResults(&b, rows, format); err != nil {
			t.Fatal(err)
		}
		golden(t, "results."+format, b.Bytes())
	}
	if err := WriteResults(&bytes.Buffer{}, rows, "xml"); err == nil {
		t.Error("xml accepted")
	}
}

func TestCSVText(t *testing.T) {
	for in, want := range map[string]string{
		"Ann":                            "Ann",
		"=HYPERLINK(\"http://x\",\"a\")": "'=HYPERLINK(\"http://x\",\"a\")",
		"+1":                             "'+1",
		"-2+3":                           "'-2+3",
		"@SUM(A1)":                       "'@SUM(A1)",
		"\tcmd":                          "'\tcmd",
		"\rcmd":                          "'\rcmd",
		"":                               "",
		"a=b":                            "a=b",
	} {
		if got := csvText(in); got != want {
			t.Errorf("csvText(%q) = %q, want %q", in, got, want)
		}
	}
}
