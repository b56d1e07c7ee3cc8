package class

import (
	"math"
	"time"

	"github.com/svclab/svclab/lab/scenario"
)

// Task is one weighted task of an exam: a scenario.
type Task struct {
	Scenario string  `json:"scenario"`
	Title    string  `json:"title"`
	Weight   float64 `json:"weight"`
}

// CheckCredit is one check of a task in the score.
type CheckCredit struct {
	ID          string  `json:"id"`
	Description string  `json:"description"`
	Weight      float64 `json:"weight"`
	Passed      bool    `json:"passed"`
	// Message is what the last check run said ("not checked" when the
	// task was never checked).
	Message string `json:"message"`
}

// TaskScore is one task's partial credit: the share of its checks'
// weight that passed, times the task's weight.
type TaskScore struct {
	Task
	Checked bool `json:"checked"`
	// Note says why the task was scored from its last check rather than
	// graded at the deadline (its lab was gone, say).
	Note   string        `json:"note,omitempty"`
	Checks []CheckCredit `json:"checks"`
	// Credit is the passed share of the checks' weight, 0 to 1.
	Credit float64 `json:"credit"`
	Points float64 `json:"points"`
}

// Score is an exam's result.
type Score struct {
	Tasks   []TaskScore `json:"tasks"`
	Points  float64     `json:"points"`
	Max     float64     `json:"max"`
	Percent float64     `json:"percent"`
}

// ExamSession is one learner's exam.
type ExamSession struct {
	Learner    string    `json:"learner"`
	StartedAt  time.Time `json:"startedAt"`
	Deadline   time.Time `json:"deadline"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	// Score is set once the exam is finished.
	Score *Score `json:"score,omitempty"`
}

// Finished tells whether the exam is over at now: submitted, or out of
// time.
func (e ExamSession) Finished(now time.Time) bool {
	return !e.FinishedAt.IsZero() || !now.Before(e.Deadline)
}

// Remaining is the time left at now.
func (e ExamSession) Remaining(now time.Time) time.Duration {
	if e.Finished(now) {
		return 0
	}
	return e.Deadline.Sub(now)
}

// ExamTasks are the class's tasks, in order, titled from cat.
func ExamTasks(c *Class, cat *scenario.Catalog) []Task {
	var out []Task
	for _, id := range c.Scenarios {
		t := Task{Scenario: id, Title: id, Weight: c.Weights[id]}
		if t.Weight == 0 {
			t.Weight = 1
		}
		if s := cat.Get(id); s != nil {
			t.Title = s.Title
		}
		out = append(out, t)
	}
	return out
}

// ScoreExam scores tasks from the last check run of each: every check
// passed adds its weight's share of the task's weight (partial credit).
// A task never checked scores nothing; its checks are listed from the
// scenario.
func ScoreExam(tasks []Task, last map[string]*CheckRun, cat *scenario.Catalog) Score {
	var s Score
	for _, t := range tasks {
		ts := TaskScore{Task: t}
		var total, got float64
		if run := last[t.Scenario]; run != nil {
			ts.Checked = true
			desc := map[string]string{}
			if sc := cat.Get(t.Scenario); sc != nil {
				for _, c := range sc.Checks {
					desc[c.ID] = c.Description
				}
			}
			for _, r := range run.Results {
				ts.Checks = append(ts.Checks, CheckCredit{ID: r.ID, Description: desc[r.ID], Weight: r.Weight, Passed: r.Passed, Message: r.Message})
				total += r.Weight
				if r.Passed {
					got += r.Weight
				}
			}
		} else if sc := cat.Get(t.Scenario); sc != nil {
			for _, c := range sc.Checks {
				ts.Checks = append(ts.Checks, CheckCredit{ID: c.ID, Description: c.Description, Weight: c.Weight, Message: "not checked"})
				total += c.Weight
			}
		}
		if total > 0 {
			ts.Credit = got / total
		}
		ts.Points = round2(ts.Credit * t.Weight)
		s.Tasks = append(s.Tasks, ts)
		s.Points += ts.Points
		s.Max += t.Weight
	}
	s.Points = round2(s.Points)
	if s.Max > 0 {
		s.Percent = round2(100 * s.Points / s.Max)
	}
	return s
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// ReviewItem is one task in the review after an exam: the learner's
// result beside the task, the reference solution and the explanation.
type ReviewItem struct {
	TaskScore
	// TaskText is the task as the learner read it (Markdown).
	TaskText string `json:"taskText"`
	// Solution is the reference solution's commands.
	Solution []string `json:"solution"`
	// Explanation ties the fault to the mechanism (Markdown).
	Explanation string   `json:"explanation"`
	Hints       []string `json:"hints"`
	// Sources are the upstream pages the scenario's statements come from.
	Sources []scenario.Reference `json:"sources,omitempty"`
}

// Review is what a learner (or the instructor) sees once an exam is over.
type Review struct {
	Learner string       `json:"learner"`
	Score   Score        `json:"score"`
	Items   []ReviewItem `json:"items"`
}

// BuildReview pairs a score with the scenarios' solutions and
// explanations.
func BuildReview(learner string, s Score, cat *scenario.Catalog) Review {
	r := Review{Learner: learner, Score: s}
	for _, ts := range s.Tasks {
		item := ReviewItem{TaskScore: ts}
		if sc := cat.Get(ts.Scenario); sc != nil {
			item.TaskText, item.Solution, item.Explanation, item.Hints, item.Sources = sc.Task, sc.Solution, sc.Explanation, sc.Hints, sc.Sources
		}
		r.Items = append(r.Items, item)
	}
	return r
}
