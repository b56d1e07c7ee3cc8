package grade

import (
	"context"
	"errors"
	"maps"
	"strings"

	"github.com/svclab/svclab/lab/scenario"
)

type answersKey struct{}

// WithAnswers gives Grade the learner's answers to the scenario's answer
// checks, by check id.
func WithAnswers(ctx context.Context, answers map[string]string) context.Context {
	return context.WithValue(ctx, answersKey{}, maps.Clone(answers))
}

// AnswersFrom returns the answers WithAnswers put in ctx (nil: none were).
func AnswersFrom(ctx context.Context) map[string]string {
	a, _ := ctx.Value(answersKey{}).(map[string]string)
	return a
}

// answer judges the learner's answer to an answer check. The detail
// quotes the answer, never what a right one says.
func (g *Grader) answer(ctx context.Context, c *scenario.Check) (string, error) {
	text := strings.TrimSpace(AnswersFrom(ctx)[c.ID])
	if text == "" {
		return "", failf("not answered yet")
	}
	ok, err := c.Answer.Judge(text)
	if err != nil {
		return "", errors.New("the scenario's answer check is broken: " + err.Error())
	}
	if !ok {
		return "", failf("your answer %s is not what the lab showed", quote(text))
	}
	return "your answer " + quote(text), nil
}
