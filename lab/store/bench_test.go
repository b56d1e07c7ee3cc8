package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/svclab/svclab/internal/pgtest"
)

func benchStore(b *testing.B, be pgtest.Backend) *Store {
	b.Helper()
	s, err := Open(context.Background(), be.Location(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if _, err := s.EnsureLearner(context.Background(), LocalLearner, ""); err != nil {
		b.Fatal(err)
	}
	return s
}

// Recording a check run of six checks, as every "Check my work" does.
func BenchmarkRecordCheckRun(b *testing.B) { pgtest.ForEachBackendB(b, FileName, benchRecordCheckRun) }

func benchRecordCheckRun(b *testing.B, be pgtest.Backend) {
	ctx := context.Background()
	s := benchStore(b, be)
	a, err := s.CreateAttempt(ctx, NewAttempt{Learner: LocalLearner, ScenarioID: "selector-typo", Cluster: "lab", Backend: "embedded"})
	if err != nil {
		b.Fatal(err)
	}
	run := CheckRun{AttemptID: a.ID, Score: 2, MaxScore: 9}
	for i := range 6 {
		run.Results = append(run.Results, CheckResult{CheckID: fmt.Sprintf("check-%d", i), Kind: "probe", Weight: 1, Message: "Requests from the client Pod to web:80 still fail", Detail: "20 of 20 were refused"})
	}
	for b.Loop() {
		if _, err := s.RecordCheckRun(ctx, run, "", ""); err != nil {
			b.Fatal(err)
		}
	}
}

// Listing a learner's attempts (what progress reads on every catalog page)
// among 2000 attempts of 20 learners.
func BenchmarkAttemptsOfLearner(b *testing.B) {
	pgtest.ForEachBackendB(b, FileName, benchAttemptsOfLearner)
}

func benchAttemptsOfLearner(b *testing.B, be pgtest.Backend) {
	ctx := context.Background()
	s := benchStore(b, be)
	for l := range 20 {
		name := fmt.Sprintf("learner-%d", l)
		s.EnsureLearner(ctx, name, "")
		for i := range 100 {
			a, err := s.CreateAttempt(ctx, NewAttempt{Learner: name, ScenarioID: fmt.Sprintf("scenario-%d", i%25), Cluster: fmt.Sprintf("c%d-%d", l, i), Backend: "embedded"})
			if err != nil {
				b.Fatal(err)
			}
			s.RecordCheckRun(ctx, CheckRun{AttemptID: a.ID, Score: 1, MaxScore: 9}, Passed, "")
		}
	}
	for b.Loop() {
		list, err := s.Attempts(ctx, AttemptFilter{Learner: "learner-7"})
		if err != nil || len(list) != 100 {
			b.Fatal(len(list), err)
		}
	}
}

// Looking a web session up (and marking it seen), once per web request.
func BenchmarkWebSession(b *testing.B) { pgtest.ForEachBackendB(b, FileName, benchWebSession) }

func benchWebSession(b *testing.B, be pgtest.Backend) {
	ctx := context.Background()
	s := benchStore(b, be)
	ws, err := s.CreateWebSession(ctx, LocalLearner)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.WebSession(ctx, ws.ID); err != nil {
			b.Fatal(err)
		}
	}
}
