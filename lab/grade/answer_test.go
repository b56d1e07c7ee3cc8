package grade

import (
	"context"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/scenario"
)

// TestAnswer: an answer check passes on an answer that matches accept and
// not reject, case-insensitively; no answer, a wrong one or one that names
// every option fails, quoting the answer and never the right one.
func TestAnswer(t *testing.T) {
	c := scenario.Check{ID: "step", Description: "Your notes name the step", Weight: 1,
		Answer: &scenario.AnswerCheck{Question: "Which step?", Accept: `\b6\b|traffic ?policy`, Reject: `\b[1-57]\b`, Reference: "6"}}
	g := newGrader(nil, nil)
	for _, tc := range []struct {
		answer string
		pass   bool
		detail string
	}{
		{"", false, "not answered yet"},
		{"   ", false, "not answered yet"},
		{"6", true, `your answer "6"`},
		{"Step 6: externalTrafficPolicy Local", true, "your answer"},
		{"the TRAFFIC POLICY", true, "your answer"},
		{"5", false, `your answer "5" is not what the lab showed`},
		{"1 2 3 4 5 6 7", false, "is not what the lab showed"},
		{"on worker2, step 6", true, "your answer"},
	} {
		ctx := context.Background()
		if tc.answer != "" {
			ctx = WithAnswers(ctx, map[string]string{"step": tc.answer, "other": "x"})
		}
		res := g.Check(ctx, &c, nil)
		if res.Passed != tc.pass || !strings.Contains(res.Detail, tc.detail) || res.Error != "" {
			t.Errorf("%q: passed %v, %q (error %q); want %v, %q", tc.answer, res.Passed, res.Detail, res.Error, tc.pass, tc.detail)
		}
		if strings.Contains(res.Detail+res.Message, "traffic ?policy") {
			t.Errorf("%q: the result gives the accepted answer away: %+v", tc.answer, res)
		}
	}
}
