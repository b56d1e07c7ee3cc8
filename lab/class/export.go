package class

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// ResultRow is one learner × scenario of a class's results.
type ResultRow struct {
	Learner   string    `json:"learner"`
	LearnerID string    `json:"learnerId"`
	Scenario  string    `json:"scenario"`
	State     CellState `json:"state"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	SolvedAt  time.Time `json:"solvedAt,omitzero"`
	// Seconds is the time spent: from the start to the solve, or to the
	// last check run.
	Seconds   int     `json:"seconds"`
	HintsUsed int     `json:"hintsUsed"`
	Checks    int     `json:"checks"`
	LastScore float64 `json:"lastScore"`
	// ExamPoints is the task's points in a finished exam.
	ExamPoints *float64 `json:"examPoints,omitempty"`
}

// Results reads a class's results from the database, in join order and
// the class's scenario order.
func (d *DB) Results(ctx context.Context, c *Class) ([]ResultRow, error) {
	learners, err := d.Learners(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	cells, err := d.Cells(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	var out []ResultRow
	for _, l := range learners {
		byScenario := map[string]Cell{}
		for _, cell := range cells[l.ID] {
			byScenario[cell.Scenario] = cell
		}
		var exam *Score
		if c.Exam {
			e, err := d.exam(ctx, l.ID)
			if err != nil && !errors.Is(err, ErrNotFound) {
				return nil, err
			}
			exam = e.Score
		}
		for _, id := range c.Scenarios {
			cell, ok := byScenario[id]
			if !ok {
				cell = Cell{Scenario: id, State: NotStarted}
			}
			r := ResultRow{Learner: l.Name, LearnerID: l.ID, Scenario: id, State: cell.State, StartedAt: cell.StartedAt, SolvedAt: cell.SolvedAt, HintsUsed: cell.HintsUsed, Checks: cell.Checks}
			end := cell.SolvedAt
			if cell.LastCheck != nil {
				r.LastScore = cell.LastCheck.Score
				if end.IsZero() {
					end = cell.LastCheck.At
				}
			}
			if !cell.StartedAt.IsZero() && !end.IsZero() {
				r.Seconds = int(end.Sub(cell.StartedAt).Seconds())
			}
			if exam != nil {
				for _, t := range exam.Tasks {
					if t.Scenario == id {
						p := t.Points
						r.ExamPoints = &p
					}
				}
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// WriteResults writes rows as "csv" or "json".
func WriteResults(w io.Writer, rows []ResultRow, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if rows == nil {
			rows = []ResultRow{}
		}
		return enc.Encode(rows)
	case "csv":
		cw := csv.NewWriter(w)
		cw.Write([]string{"learner", "learner_id", "scenario", "state", "started_at", "solved_at", "seconds", "hints_used", "checks", "last_score", "exam_points"})
		for _, r := range rows {
			points := ""
			if r.ExamPoints != nil {
				points = strconv.FormatFloat(*r.ExamPoints, 'f', -1, 64)
			}
			cw.Write([]string{csvText(r.Learner), csvText(r.LearnerID), csvText(r.Scenario), csvText(string(r.State)), csvTime(r.StartedAt), csvTime(r.SolvedAt),
				strconv.Itoa(r.Seconds), strconv.Itoa(r.HintsUsed), strconv.Itoa(r.Checks), strconv.FormatFloat(r.LastScore, 'f', -1, 64), points})
		}
		cw.Flush()
		return cw.Error()
	}
	return fmt.Errorf("unknown format %q: use csv or json", format)
}

// csvText keeps a text cell a text cell in a spreadsheet: one that starts
// with =, +, -, @, a tab or a carriage return (a learner named
// "=HYPERLINK(…)") is a formula there, so it gets a leading quote, as
// OWASP's CSV-injection advice says.
func csvText(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

func csvTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// Results are the class's results, one row per learner and scenario.
func (cr *Classroom) Results(ctx context.Context) ([]ResultRow, error) {
	return cr.opts.DB.Results(ctx, cr.Class)
}
