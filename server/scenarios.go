package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/go-chi/chi/v5"

	"github.com/svclab/svclab/lab/attempt"
	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/views"
	"github.com/svclab/svclab/web"
)

// DefaultLearner is the learner of a lab without accounts.
const DefaultLearner = "local"

func (s *Server) learner(*http.Request) string {
	if s.Learner != "" {
		return s.Learner
	}
	return DefaultLearner
}

func (s *Server) base() context.Context {
	if s.Background != nil {
		return s.Background
	}
	return context.Background()
}

// current is the scope's learner's current attempt at a scenario
// (ErrNoAttempt when there is none, or the server keeps no attempts).
func (sc *scope) current(ctx context.Context, scenarioID string) (*Attempt, error) {
	if sc.attempts == nil {
		return nil, ErrNoAttempt
	}
	return sc.attempts.Current(ctx, sc.learner, scenarioID)
}

// scenarioFor finds the scenario of the {id} in the path, answering 404
// when there is none (or it is not one of the class's).
func (s *Server) scenarioFor(w http.ResponseWriter, r *http.Request) (*scenario.Scenario, bool) {
	id := chi.URLParam(r, "id")
	var sc *scenario.Scenario
	if s.Catalog != nil {
		sc = s.Catalog.Get(id)
	}
	if in := s.scopeOf(r).classScenarios; in != nil && !slices.Contains(in, id) {
		sc = nil
	}
	if sc == nil {
		http.Error(w, fmt.Sprintf("no scenario %q here: pick one from the list", id), http.StatusNotFound)
		return nil, false
	}
	return sc, true
}

var difficultyOrder = map[string]int{"easy": 0, "medium": 1, "hard": 2}

// home is the catalog, filtered by domain and difficulty, with the
// learner's progress, and the clusters.
func (s *Server) home(w http.ResponseWriter, r *http.Request) {
	list, err := s.Clusters.List(r.Context())
	if err != nil {
		s.Log.Error("listing clusters", "err", err)
		http.Error(w, "could not list the clusters: "+err.Error(), http.StatusInternalServerError)
		return
	}
	f := web.CatalogFilter{Domain: r.URL.Query().Get("domain"), Difficulty: r.URL.Query().Get("difficulty")}
	progressErr := ""
	progress := map[string]string{}
	if s.Attempts != nil {
		if progress, err = s.Attempts.Progress(r.Context(), s.learner(r)); err != nil {
			progressErr = err.Error()
		}
	}
	var items []web.CatalogItem
	domains, difficulties := map[string]bool{}, map[string]bool{}
	if s.Catalog != nil {
		for _, sc := range s.Catalog.Scenarios {
			domains[sc.Domain], difficulties[sc.Difficulty] = true, true
			if (f.Domain != "" && sc.Domain != f.Domain) || (f.Difficulty != "" && sc.Difficulty != f.Difficulty) {
				continue
			}
			items = append(items, web.CatalogItem{ID: sc.ID, Title: sc.Title, Domain: sc.Domain, Difficulty: sc.Difficulty, Minutes: sc.EstimatedMinutes, Progress: progress[sc.ID], ProxyMode: sc.Cluster.ProxyMode})
		}
	}
	sort.SliceStable(items, func(i, j int) bool {
		if items[i].Domain != items[j].Domain {
			return items[i].Domain < items[j].Domain
		}
		return difficultyOrder[items[i].Difficulty] < difficultyOrder[items[j].Difficulty]
	})
	for d := range domains {
		f.Domains = append(f.Domains, d)
	}
	for d := range difficulties {
		f.Difficulty_ = append(f.Difficulty_, d)
	}
	sort.Strings(f.Domains)
	sort.Slice(f.Difficulty_, func(i, j int) bool { return difficultyOrder[f.Difficulty_[i]] < difficultyOrder[f.Difficulty_[j]] })
	writeHTML(w, r, s, web.Home(items, f, progressErr, list))
}

func writeHTML(w http.ResponseWriter, r *http.Request, s *Server, c templ.Component) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := c.Render(r.Context(), w); err != nil {
		s.Log.Error("rendering", "path", r.URL.Path, "err", err)
	}
}

// scenarioPage shows a scenario: the task, and the learner's attempt.
func (s *Server) scenarioPage(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.scenarioFor(w, r)
	if !ok {
		return
	}
	scope := s.scopeOf(r)
	// While the scenario is being started, started over or ended, its
	// page is that operation's: the attempt it shows is changing.
	if op := s.ops.pending(scope.owner, scope.scenarioURL(sc.ID)); op != nil && !scope.readOnly {
		http.Redirect(w, r, scope.operationURL(op.ID), http.StatusSeeOther)
		return
	}
	p := web.ScenarioPage{ID: sc.ID, Title: sc.Title, Domain: sc.Domain, Difficulty: sc.Difficulty, Minutes: sc.EstimatedMinutes, ProxyMode: sc.Cluster.ProxyMode,
		Task: sc.Task, HintCount: len(sc.Hints), DefaultCluster: s.defaultCluster(),
		Base: scope.base, InClass: scope.classScenarios != nil, ReadOnly: scope.readOnly}
	for _, c := range sc.Checks {
		p.Checks = append(p.Checks, c.Description)
	}
	_, p.Clients = scenarioServices(sc)
	a, err := scope.current(r.Context(), sc.ID)
	switch {
	case errors.Is(err, ErrNoAttempt):
	case err != nil:
		p.Error, p.ErrorDetail = "Your attempt could not be read just now: reload the page in a moment.", err.Error()
	default:
		p.Attempt = &web.AttemptView{ID: a.ID, Cluster: a.Cluster, State: a.State, Score: a.Score, MaxScore: a.MaxScore}
		if a.Error != "" {
			p.Attempt.Error, p.Attempt.ErrorDetail = attemptProblem(a.Error), a.Error
		}
		if a.MaxScore > 0 {
			p.Attempt.ScoreText = grade.FormatScore(float64(a.Score), float64(a.MaxScore))
		}
		p.StartOver, p.End = startOverText(a.Cluster), endText(a.Cluster)
		if scope.classScenarios == nil {
			p.Delete = deleteText(a.Cluster, true)
		}
		if at := scope.timeLeft(); !at.IsZero() {
			p.Deadline = at.UTC().Format(time.RFC3339)
		}
		if a.State != StateAbandoned {
			answers, err := scope.attempts.Answers(r.Context(), a.ID)
			if err != nil {
				s.Log.Warn("reading an attempt's answers", "attempt", a.ID, "err", err)
			}
			for _, c := range sc.Checks {
				if c.Answer != nil {
					p.Questions = append(p.Questions, web.Question{ID: c.ID, Text: c.Answer.Question, Answer: answers[c.ID]})
				}
			}
			p.Hints = sc.Hints[:min(a.HintsShown, len(sc.Hints))]
			if a.State == StatePassed {
				p.Explanation, p.Sources = sc.Explanation, sources(sc.Sources)
			}
			c, err := scope.clusters.Get(r.Context(), a.Cluster)
			if err != nil {
				p.Error, p.ErrorDetail = fmt.Sprintf("The cluster %s of this attempt is not there any more. Start over to set the scenario up again (on a new cluster).", a.Cluster), err.Error()
			} else if nodes, err := c.Nodes(r.Context()); err != nil {
				p.Error, p.ErrorDetail = fmt.Sprintf("The nodes of cluster %s do not answer. Start over to set the scenario up again.", a.Cluster), err.Error()
			} else {
				for _, n := range nodes {
					label := strings.TrimPrefix(n.Name, a.Cluster+"-")
					if n.Role == cluster.RoleControlPlane {
						label += " (kubectl)"
					}
					p.Nodes = append(p.Nodes, web.NodeTab{Name: n.Name, Label: label})
				}
			}
		}
	}
	writeHTML(w, r, s, web.Scenario(p))
}

func (s *Server) defaultCluster() string {
	if s.DefaultCluster != "" {
		return s.DefaultCluster
	}
	return "lab"
}

// startScenario sets the scenario up in the background and sends the
// browser to the page that follows it step by step.
func (s *Server) startScenario(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.scenarioFor(w, r)
	if !ok {
		return
	}
	scope := s.scopeOf(r)
	if scope.attempts == nil {
		http.Error(w, errNoAttempts.Error(), http.StatusServiceUnavailable)
		return
	}
	if scope.readOnly {
		http.Error(w, errReadOnly, http.StatusForbidden)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "the form could not be read: "+err.Error(), http.StatusBadRequest)
		return
	}
	name := strings.TrimSpace(r.PostFormValue("cluster"))
	if name == "" {
		name = s.defaultCluster()
	}
	if err := cluster.ValidateName(name); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.forgetLabs(name)
	op := s.ops.start(s.base(), scope.owner, "Starting "+sc.Title, scope.scenarioURL(sc.ID), func(ctx context.Context, op *Operation) error {
		_, err := scope.attempts.Start(ctx, scope.learner, sc.ID, name, op)
		if err != nil {
			s.Log.Error("starting a scenario", "scenario", sc.ID, "learner", scope.learner, "cluster", name, "err", err)
		}
		return err
	})
	http.Redirect(w, r, scope.operationURL(op.ID), http.StatusSeeOther)
}

// KindHint marks a hint shown on an attempt's timeline; KindAnswer an
// answer saved.
const (
	KindHint   = "hint"
	KindAnswer = "answer"
)

// errReadOnly refuses the instructor's changes to a learner's lab.
const errReadOnly = "you are watching this lab read-only: push a hint or a message to the learner instead"

// currentAttempt finds the learner's running attempt at the {id} scenario.
func (s *Server) currentAttempt(w http.ResponseWriter, r *http.Request) (*scenario.Scenario, *Attempt, bool) {
	sc, ok := s.scenarioFor(w, r)
	if !ok {
		return nil, nil, false
	}
	scope := s.scopeOf(r)
	if scope.readOnly {
		jsonError(w, http.StatusForbidden, errReadOnly)
		return nil, nil, false
	}
	a, err := scope.current(r.Context(), sc.ID)
	if errors.Is(err, ErrNoAttempt) || (err == nil && a.State == StateAbandoned) {
		jsonError(w, http.StatusConflict, "You have not started this scenario: start it first.")
		return nil, nil, false
	}
	if err != nil {
		jsonError(w, http.StatusInternalServerError, "Your attempt could not be read: "+err.Error())
		return nil, nil, false
	}
	return sc, a, true
}

// checkScenario grades the learner's attempt and answers with the report.
func (s *Server) checkScenario(w http.ResponseWriter, r *http.Request) {
	sc, a, ok := s.currentAttempt(w, r)
	if !ok {
		return
	}
	// A check that restarts a rollout and watches it may take minutes
	// (grade.DisruptiveCheckTimeout), more than a response's usual bound.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(grade.DisruptiveCheckTimeout + time.Minute))
	scope := s.scopeOf(r)
	// A lab that is down (or whose nodes cannot reach each other) cannot
	// be graded: say so now rather than after every check timed out.
	if lab := s.runningFeed(a.Cluster, a.ID); lab != nil {
		if h := lab.Health(); h.State == views.HealthDown || !partOK(h, views.PartFabric) {
			writeJSON(w, http.StatusConflict, map[string]string{"error": h.Summary + " Checking needs a working lab: use Start over (at the top of the page) to set it up again.", "detail": healthDetail(h)})
			return
		}
	}
	rep, err := scope.attempts.Check(r.Context(), a.ID)
	if err != nil {
		msg := "The check could not run. Try again in a moment; if it keeps failing, use Start over."
		if strings.Contains(err.Error(), "timed out") {
			msg = "The check ran out of time: the lab did not answer in time. Your cluster is as you left it: check again, or use Start over."
		}
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": msg, "detail": err.Error()})
		return
	}
	passed := 0
	for _, res := range rep.Results {
		if res.Passed {
			passed++
		}
	}
	level := "warning"
	if rep.Passed {
		level = "info"
	}
	ev := views.TimelineEvent{Time: time.Now(), Kind: views.KindCheck, Level: level, Text: fmt.Sprintf("Check my work: %d of %d checks passed, score %s", passed, len(rep.Results), rep.ScoreText())}
	s.record(a.ID, ev)
	if lab := s.runningFeed(a.Cluster, a.ID); lab != nil {
		lab.Record(ev)
	}
	state := StateRunning
	if rep.Passed {
		state = StatePassed
	}
	if now, err := scope.current(r.Context(), sc.ID); err == nil {
		state = now.State
	}
	// The hints this check showed (one at a time, in order), for the page
	// to add to its list at once.
	var shown []map[string]any
	for _, i := range rep.UnlockedHints {
		if i >= 1 && i <= len(sc.Hints) {
			var b bytes.Buffer
			_ = web.Markdown(sc.Hints[i-1]).Render(r.Context(), &b)
			shown = append(shown, map[string]any{"index": i, "html": b.String()})
			s.record(a.ID, views.TimelineEvent{Time: time.Now(), Kind: KindHint, Text: fmt.Sprintf("hint %d of %d shown (a failed check)", i, len(sc.Hints))})
		}
	}
	out := map[string]any{"report": rep, "state": state, "scoreText": rep.ScoreText(), "hints": shown, "hintCount": len(sc.Hints)}
	if state == StatePassed {
		var b bytes.Buffer
		if err := web.Explanation(sc.Explanation, sources(sc.Sources)).Render(r.Context(), &b); err == nil {
			out["explanationHTML"] = b.String()
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// hintScenario shows the next hint.
func (s *Server) hintScenario(w http.ResponseWriter, r *http.Request) {
	sc, a, ok := s.currentAttempt(w, r)
	if !ok {
		return
	}
	idx, text, err := s.scopeOf(r).attempts.Hint(r.Context(), a.ID)
	if err != nil {
		jsonError(w, http.StatusConflict, err.Error())
		return
	}
	s.record(a.ID, views.TimelineEvent{Time: time.Now(), Kind: KindHint, Text: fmt.Sprintf("hint %d of %d shown", idx, len(sc.Hints))})
	var b bytes.Buffer
	_ = web.Markdown(text).Render(r.Context(), &b)
	writeJSON(w, http.StatusOK, map[string]any{"index": idx, "html": b.String(), "more": idx < len(sc.Hints), "count": len(sc.Hints)})
}

// answerScenario saves the learner's answer to one of the scenario's
// questions (form fields check and text): the next check judges it. A
// browser without script gets the scenario page back.
func (s *Server) answerScenario(w http.ResponseWriter, r *http.Request) {
	sc, a, ok := s.currentAttempt(w, r)
	if !ok {
		return
	}
	if err := r.ParseForm(); err != nil {
		jsonError(w, http.StatusBadRequest, "The answer could not be read: "+err.Error())
		return
	}
	check, text := r.PostFormValue("check"), strings.TrimSpace(r.PostFormValue("text"))
	if err := s.scopeOf(r).attempts.Answer(r.Context(), a.ID, check, text); err != nil {
		code, msg := http.StatusInternalServerError, err.Error()
		if errors.Is(err, attempt.ErrBadAnswer) {
			code, msg = http.StatusBadRequest, strings.TrimPrefix(msg, attempt.ErrBadAnswer.Error()+": ")
		}
		jsonError(w, code, "Your answer was not saved: "+msg+".")
		return
	}
	what := "answer to " + check + " saved"
	if text == "" {
		what = "answer to " + check + " cleared"
	}
	s.record(a.ID, views.TimelineEvent{Time: time.Now(), Kind: KindAnswer, Text: what})
	if !strings.Contains(r.Header.Get("Accept"), "application/json") {
		http.Redirect(w, r, s.scopeOf(r).scenarioURL(sc.ID), http.StatusSeeOther)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"saved": true, "check": check, "empty": text == ""})
}

// resetScenario sets the scenario up afresh.
func (s *Server) resetScenario(w http.ResponseWriter, r *http.Request) {
	sc, a, ok := s.currentAttempt(w, r)
	if !ok {
		return
	}
	scope := s.scopeOf(r)
	c := startOverText(a.Cluster)
	c.Cancel = scope.scenarioURL(sc.ID)
	if !s.confirmed(w, r, c) {
		return
	}
	s.forgetLabs(a.Cluster)
	op := s.ops.start(s.base(), scope.owner, "Starting "+sc.Title+" over", scope.scenarioURL(sc.ID), func(ctx context.Context, op *Operation) error {
		_, err := scope.attempts.Reset(ctx, a.ID, op)
		return err
	})
	http.Redirect(w, r, scope.operationURL(op.ID), http.StatusSeeOther)
}

// attemptProblem says in a learner's words why an attempt errored (its
// recorded error, which the command line shows as it is, goes behind
// "details").
func attemptProblem(err string) string {
	switch {
	case strings.Contains(err, "grading timed out"):
		return "A check ran out of time: the lab did not answer in time. Your cluster is as you left it: check again, or use Start over."
	case strings.Contains(err, "taken over"):
		return "Another svclab took this cluster over: what you did there is gone. Start the scenario again when the cluster is free, or on another cluster."
	case strings.Contains(err, "is gone: start") || strings.Contains(err, "created again since the scenario was set up"):
		return "Your lab's cluster was deleted after this scenario was set up, and what you did there went with it. Use Start over to set the scenario up again (the cluster is created again if it has to be)."
	case strings.HasPrefix(err, "interrupted"):
		return "Setting the scenario up was interrupted (the server stopped). Use Start over to set it up again."
	}
	return "The scenario could not be set up. Use Start over to try again; if it fails again, delete the lab (it is created again) or use another cluster."
}

// partOK says whether part of h works (or was not checked).
func partOK(h views.Health, part string) bool {
	for _, p := range h.Parts {
		if p.ID == part {
			return p.OK || p.Skipped
		}
	}
	return true
}

// healthDetail is h's raw errors, one part a line.
func healthDetail(h views.Health) string {
	var b strings.Builder
	for _, p := range h.Parts {
		if p.Detail != "" {
			fmt.Fprintf(&b, "%s: %s\n", p.Title, p.Detail)
		}
	}
	return strings.TrimSpace(b.String())
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func jsonError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

var errNoAttempts = errors.New("this server keeps no learner sessions: it was started without them (svclab serve keeps them in its database)")

// sources are a scenario's sources (Scenario.Sources) as the pages show
// them.
func sources(refs []scenario.Reference) []web.Source {
	var out []web.Source
	for _, r := range refs {
		out = append(out, web.Source{URL: r.URL, For: r.For})
	}
	return out
}
