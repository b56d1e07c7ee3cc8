package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/svclab/svclab/lab/attempt"
	"github.com/svclab/svclab/lab/class"
	classlabs "github.com/svclab/svclab/lab/class/labs"
	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/server/ratelimit"
	"github.com/svclab/svclab/web"
)

// The class routes: learners join with a code and a display name and get a
// cookie holding their learner token; the instructor signs in with the
// token "svclab class create" printed. Every route under /class/{class}/
// works out who is asking (class.Authenticate) and what they may reach
// (class.Authorize): a learner their own lab, the instructor every lab of
// the class read-only, anybody else nothing.

type classKey struct{}

type classCtx struct {
	room *class.Classroom
	who  class.Principal
}

// cookieName is the class's cookie: one per class, sent only to its pages.
func cookieName(classID string) string { return "svclab_class_" + classID }

func (s *Server) classRoutes(r chi.Router) {
	join := ratelimit.FailuresMiddleware(ratelimit.New(ratelimit.Join, nil), s.access().clientAddr, "failed attempts")
	// Checks are limited per learner.
	checks := ratelimit.Middleware(ratelimit.New(ratelimit.Check, nil), func(r *http.Request) string { return s.scopeOf(r).owner }, "checks")
	r.Get("/join", s.joinPage)
	r.Get("/join/{code}", s.joinPage)
	r.With(join).Post("/join", s.joinClass)
	r.Route("/class/{class}", func(r chi.Router) {
		r.Use(s.classroom)
		r.Get("/", s.classPage)
		r.Get("/instructor", s.instructorLogin)
		r.With(join).Post("/instructor", s.instructorSignIn)
		r.Post("/instructor/signout", s.instructorSignOut)
		r.Post("/lab", s.startLab)
		r.Get("/events", s.classEvents)
		r.Get("/board", s.boardPage)
		r.Post("/push", s.pushMessage)
		r.Post("/learners/{learner}/extend", s.extendLab)
		r.Post("/learners/{learner}/reset", s.resetLab)
		r.Get("/results.{format}", s.classResults)
		r.Post("/exam/start", s.startExam)
		r.Post("/exam/finish", s.finishExam)
		r.Get("/review", s.reviewPage)
		// The learner's own scenarios, on their lab.
		r.Group(func(r chi.Router) {
			r.Use(s.learnerScope)
			r.Get("/operations/{id}", s.operation)
			r.Get("/operations/{id}/events", s.operationEvents)
			r.Route("/scenarios/{id}", s.scenarioRoutes(checks))
		})
		// The instructor watching one learner, read-only.
		r.Route("/learners/{learner}", func(r chi.Router) {
			r.Use(s.watchScope)
			r.Get("/scenarios/{id}", s.scenarioPage)
			r.Get("/scenarios/{id}/views", s.viewsSocket)
			r.Get("/scenarios/{id}/terminal", s.terminalSocket)
			r.Get("/scenarios/{id}/replay", s.replayPage)
			r.Get("/review", s.reviewPage)
		})
	})
}

// scenarioRoutes are a scenario's page, actions and streams, in the
// request's scope; check limits the checks.
func (s *Server) scenarioRoutes(check ...func(http.Handler) http.Handler) func(chi.Router) {
	// Starting and resetting rebuild a learner's scenario (and may
	// recreate their cluster): a few at once, then one every 10 s.
	lifecycle := ratelimit.Middleware(s.lifecycleLimit(), func(r *http.Request) string { return "owner:" + s.scopeOf(r).owner }, "starts and resets")
	// A reset, end or delete counts once confirmed: the page that asks
	// costs nothing.
	confirmedLifecycle := func(next http.Handler) http.Handler {
		limited := lifecycle(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ParseForm() == nil && r.PostFormValue("confirmed") == "yes" {
				limited.ServeHTTP(w, r)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	return func(r chi.Router) {
		r.Get("/", s.scenarioPage)
		r.With(lifecycle).Post("/start", s.startScenario)
		r.With(check...).Post("/check", s.checkScenario)
		r.Post("/hint", s.hintScenario)
		r.Post("/answer", s.answerScenario)
		r.With(confirmedLifecycle).Post("/reset", s.resetScenario)
		r.With(confirmedLifecycle).Post("/end", s.endScenario)
		r.With(confirmedLifecycle).Post("/delete-lab", s.deleteLab)
		r.Get("/views", s.viewsSocket)
		r.Get("/terminal", s.terminalSocket)
		r.Get("/replay", s.replayPage)
	}
}

// lifecycleLimit is the server's one limiter of scenario starts and
// resets, per learner.
func (s *Server) lifecycleLimit() *ratelimit.Limiter {
	s.lifecycleOnce.Do(func() { s.lifecycle = ratelimit.New(ratelimit.Limit{Every: 10 * time.Second, Burst: 5}, nil) })
	return s.lifecycle
}

// classroom finds the {class} being served and who is asking.
func (s *Server) classroom(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := chi.URLParam(r, "class")
		room, err := s.Classes.Classroom(id)
		if err != nil {
			http.Error(w, "There is no class "+id+" on this server right now: check the link with your instructor.", http.StatusNotFound)
			return
		}
		who := class.Principal{Role: class.Anonymous}
		if tok := classToken(r, id); tok != "" {
			if who, err = room.Authenticate(r.Context(), tok); err != nil {
				s.Log.Error("authenticating a class request", "class", id, "err", err)
				http.Error(w, "Your sign-in could not be checked right now (the database did not answer): try again in a moment.", http.StatusServiceUnavailable)
				return
			}
		}
		ctx := context.WithValue(r.Context(), classKey{}, &classCtx{room: room, who: who})
		// The class's pages lead within the class, never to the local
		// lab's.
		ctx = web.WithNav(ctx, web.Nav{Links: []web.NavLink{{Label: room.Class.Name, URL: "/class/" + id + "/"}}})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// classToken is the token of the request: the class's cookie, or an
// "Authorization: Bearer" header (scripts, the load test).
func classToken(r *http.Request, classID string) string {
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		return strings.TrimSpace(strings.TrimPrefix(h, "Bearer "))
	}
	if c, err := r.Cookie(cookieName(classID)); err == nil {
		return c.Value
	}
	return ""
}

func classOf(r *http.Request) *classCtx { return r.Context().Value(classKey{}).(*classCtx) }

// answerError answers err for the person concerned: a refusal
// (class.ErrUnauthenticated, class.ErrForbidden) with 401 or 403, anything
// else with code; as JSON to scripts and the pages' fetch calls, as text
// to forms and links.
func answerError(w http.ResponseWriter, r *http.Request, err error, code int) {
	if errors.Is(err, class.ErrUnauthenticated) || errors.Is(err, class.ErrForbidden) {
		code = class.HTTPStatus(err)
	}
	if wantsJSON(r) {
		jsonError(w, code, err.Error())
		return
	}
	http.Error(w, err.Error(), code)
}

// refuse answers an authorization error.
func refuse(w http.ResponseWriter, r *http.Request, err error) {
	answerError(w, r, err, http.StatusForbidden)
}

func wantsJSON(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.Contains(r.Header.Get("Accept"), "application/json")
}

// learnerScope lets the class's learners, and only them, work on their
// own lab.
func (s *Server) learnerScope(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cc := classOf(r)
		if err := class.Authorize(cc.who, cc.room.Class.ID, cc.who.LearnerID, class.Write); err != nil {
			refuse(w, r, err)
			return
		}
		// Once a learner's exam is over their lab is theirs to look at,
		// not to change: it was graded as it stood at the deadline.
		over := cc.room.Class.Exam && cc.room.ExamOver(r.Context(), cc.who.LearnerID)
		if over && r.Method != http.MethodGet {
			answerError(w, r, errExamOver, http.StatusForbidden)
			return
		}
		sc := s.classScope(cc, cc.who.LearnerID, false)
		if over {
			// Their own pages still, read-only: the terminal shows what
			// it showed, the lab is reached for reading only.
			sc.readOnly = true
			sc.clusters = labCluster{room: cc.room, who: cc.who, learner: cc.who.LearnerID, access: class.Read}
		}
		if cc.room.Class.Exam {
			sc.writable = func(ctx context.Context) bool { return !cc.room.ExamOver(ctx, cc.who.LearnerID) }
		}
		sc.deadline = func() time.Time { return learnerDeadline(r.Context(), cc) }
		next.ServeHTTP(w, withScope(r, sc))
	})
}

// learnerDeadline is when the class learner's time runs out: their exam's
// deadline, or their lab's expiry, whichever comes first (zero: none).
func learnerDeadline(ctx context.Context, cc *classCtx) time.Time {
	var at time.Time
	if l, err := cc.room.Lab(cc.who, cc.who.LearnerID); err == nil && !l.ExpiresAt.IsZero() {
		at = l.ExpiresAt
	}
	if cc.room.Class.Exam {
		if e, err := cc.room.Exam(ctx, cc.who, cc.who.LearnerID); err == nil && !e.Deadline.IsZero() && e.FinishedAt.IsZero() && (at.IsZero() || e.Deadline.Before(at)) {
			at = e.Deadline
		}
	}
	return at
}

// errExamOver refuses a change to a lab whose exam is over.
var errExamOver = errors.New("your exam is over: your lab was graded as it stood at the end, and it can no longer be changed (see your review)")

// watchScope lets the class's instructor watch learner {learner}'s lab.
func (s *Server) watchScope(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cc := classOf(r)
		learner := chi.URLParam(r, "learner")
		if err := class.AuthorizeInstructor(cc.who, cc.room.Class.ID); err != nil {
			refuse(w, r, err)
			return
		}
		next.ServeHTTP(w, withScope(r, s.classScope(cc, learner, true)))
	})
}

func (s *Server) classScope(cc *classCtx, learner string, readOnly bool) *scope {
	id := cc.room.Class.ID
	access := class.Write
	base := "/class/" + id
	if readOnly {
		access, base = class.Read, base+"/learners/"+learner
	}
	return &scope{
		learner:        learner,
		attempts:       classAttempts{room: cc.room, who: cc.who, learner: learner},
		clusters:       labCluster{room: cc.room, who: cc.who, learner: learner, access: access},
		base:           base,
		owner:          "class/" + id + "/" + learner,
		readOnly:       readOnly,
		classScenarios: cc.room.Class.Scenarios,
		activity:       func() { cc.room.Activity(cc.who) },
	}
}

// labCluster is the one cluster a class scope reaches: the learner's lab.
type labCluster struct {
	room    *class.Classroom
	who     class.Principal
	learner string
	access  class.Access
}

func (l labCluster) Get(_ context.Context, name string) (cluster.Cluster, error) {
	c, err := l.room.Cluster(l.who, l.learner, l.access)
	if err != nil {
		return nil, err
	}
	if c.Name() != name {
		return nil, fmt.Errorf("that attempt ran on an earlier lab (%s), which is gone: start the scenario again on your lab", name)
	}
	return c, nil
}

// classAttempts are a class learner's attempts, run on their lab and shown
// on the board; every call is authorized for who.
type classAttempts struct {
	room    *class.Classroom
	who     class.Principal
	learner string
}

var _ Attempts = classAttempts{}

func (c classAttempts) Start(ctx context.Context, _, scenarioID, _ string, p cluster.Progress) (*Attempt, error) {
	if err := c.ensureLab(ctx, p); err != nil {
		return nil, err
	}
	a, err := c.room.StartScenario(ctx, c.who, scenarioID, p)
	return fromAttempt(a), err
}

// ensureLab asks for the learner's lab when they have none, and waits
// (reporting the queue and the start) until it is ready.
func (c classAttempts) ensureLab(ctx context.Context, p cluster.Progress) error {
	l, err := c.room.StartLab(c.who)
	if err != nil {
		return err
	}
	if l.State == classlabs.Ready {
		return nil
	}
	events := c.room.Labs.Subscribe(c.learner, 64)
	defer events.Cancel()
	done := cluster.OrNop(p).Start("Waiting for your lab")
	for {
		l, _ = c.room.Labs.Lab(c.learner)
		switch l.State {
		case classlabs.Ready:
			done(nil)
			return nil
		case classlabs.Ended, classlabs.Failed:
			err := fmt.Errorf("your lab could not start: %s", l.Reason)
			done(err)
			return err
		}
		select {
		case <-ctx.Done():
			done(ctx.Err())
			return ctx.Err()
		case e, ok := <-events.C:
			if !ok {
				done(classlabs.ErrClosed)
				return classlabs.ErrClosed
			}
			if e.Message != "" {
				cluster.OrNop(p).Infof("%s", e.Message)
			}
		case <-time.After(time.Second):
		}
	}
}

func (c classAttempts) Current(ctx context.Context, _, scenarioID string) (*Attempt, error) {
	a, err := c.room.Latest(ctx, c.who, c.learner, scenarioID)
	if err != nil {
		return nil, err
	}
	if a == nil {
		return nil, ErrNoAttempt
	}
	return fromAttempt(a), nil
}

func (c classAttempts) List(ctx context.Context, _, scenarioID string) ([]*Attempt, error) {
	list, err := c.room.Attempts(ctx, c.who, c.learner, scenarioID)
	return fromAttempts(list), err
}

func (c classAttempts) attempt(ctx context.Context, id int64) (*attempt.Attempt, error) {
	return c.room.Attempt(ctx, c.who, id, class.Write)
}

func (c classAttempts) Check(ctx context.Context, id int64) (*grade.Report, error) {
	a, err := c.attempt(ctx, id)
	if err != nil {
		return nil, err
	}
	return c.room.Check(ctx, c.who, a.ScenarioID)
}

func (c classAttempts) Hint(ctx context.Context, id int64) (int, string, error) {
	a, err := c.attempt(ctx, id)
	if err != nil {
		return 0, "", err
	}
	i, text, err := c.room.Hint(ctx, c.who, a.ScenarioID)
	if errors.Is(err, attempt.ErrNoMoreHints) {
		return 0, "", errors.New("you have seen every hint of this scenario")
	}
	return i, text, err
}

func (c classAttempts) Answer(ctx context.Context, id int64, checkID, text string) error {
	a, err := c.attempt(ctx, id)
	if err != nil {
		return err
	}
	return c.room.Answer(ctx, c.who, a.ScenarioID, checkID, text)
}

func (c classAttempts) Answers(ctx context.Context, id int64) (map[string]string, error) {
	return c.room.Answers(ctx, c.who, id)
}

func (c classAttempts) Solve(ctx context.Context, id int64, out io.Writer) error {
	a, err := c.attempt(ctx, id)
	if err != nil {
		return err
	}
	return c.room.Solve(ctx, c.who, a.ScenarioID, out)
}

func (c classAttempts) Reset(ctx context.Context, id int64, p cluster.Progress) (*Attempt, error) {
	a, err := c.attempt(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := c.ensureLab(ctx, p); err != nil {
		return nil, err
	}
	na, err := c.room.ResetScenario(ctx, c.who, a.ScenarioID, p)
	return fromAttempt(na), err
}

func (c classAttempts) End(ctx context.Context, id int64) error {
	a, err := c.attempt(ctx, id)
	if err != nil {
		return err
	}
	return c.room.EndScenario(ctx, c.who, a.ScenarioID)
}

func (c classAttempts) Progress(ctx context.Context, _ string) (map[string]string, error) {
	st, err := c.room.Progress(ctx, c.who, c.learner)
	if err != nil {
		return nil, err
	}
	return progressMarks(st), nil
}

// joinPage asks for the join code and a display name.
func (s *Server) joinPage(w http.ResponseWriter, r *http.Request) {
	code := r.URL.Query().Get("code")
	if c := chi.URLParam(r, "code"); c != "" {
		code = c
	}
	writeHTML(w, r, s, web.Join(code, "", ""))
}

// joinClass joins the learner to the class of the code and sets the
// class's cookie.
func (s *Server) joinClass(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "the form could not be read: "+err.Error(), http.StatusBadRequest)
		return
	}
	code, name := r.PostFormValue("code"), r.PostFormValue("name")
	room, j, err := s.Classes.Join(r.Context(), code, name)
	if err != nil {
		status := http.StatusBadRequest
		switch {
		case errors.Is(err, class.ErrClassFull), errors.Is(err, class.ErrNameTaken):
			status = http.StatusConflict
		case errors.Is(err, class.ErrClassClosed), errors.Is(err, class.ErrCodeExpired):
			status = http.StatusGone
		case !isLearnerError(err):
			s.Log.Error("joining a class", "err", err)
			status = http.StatusServiceUnavailable
			err = errors.New("joining did not work right now (the database did not answer): try again in a moment")
		}
		w.WriteHeader(status)
		writeHTML(w, r, s, web.Join(code, name, err.Error()))
		return
	}
	s.setClassCookie(w, r, room.Class.ID, j.Token, time.Now().Add(30*24*time.Hour))
	s.Log.Info("a learner joined", "class", room.Class.ID, "learner", j.Learner.ID)
	http.Redirect(w, r, "/class/"+room.Class.ID+"/", http.StatusSeeOther)
}

// isLearnerError: errors whose message is written for the learner.
func isLearnerError(err error) bool {
	for _, e := range []error{class.ErrBadCode, class.ErrCodeExpired, class.ErrClassClosed, class.ErrClassFull, class.ErrNameTaken, class.ErrInvalid} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// setClassCookie sets the class's cookie to token until expires: Secure
// when the server is reached over HTTPS (directly, or behind a proxy that
// --public-url names).
func (s *Server) setClassCookie(w http.ResponseWriter, r *http.Request, classID, token string, expires time.Time) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName(classID), Value: token, Path: "/class/" + classID + "/",
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil || s.access().Secure,
		Expires: expires, MaxAge: max(1, int(time.Until(expires).Seconds())),
	})
}

// classPage is the learner's page of the class: their lab, the class's
// scenarios with their progress, and what the instructor pushed.
func (s *Server) classPage(w http.ResponseWriter, r *http.Request) {
	cc := classOf(r)
	switch cc.who.Role {
	case class.InstructorRole:
		http.Redirect(w, r, "/class/"+cc.room.Class.ID+"/board", http.StatusSeeOther)
		return
	case class.LearnerRole:
	default:
		// Somebody who has not joined: the form, never the code (a class's
		// address is on every learner's screen; its code is not for
		// whoever sees one).
		writeHTML(w, r, s, web.Join("", "", ""))
		return
	}
	snap, err := cc.room.Snapshot(r.Context(), cc.who)
	if err != nil {
		refuse(w, r, err)
		return
	}
	p := web.ClassPage{ClassID: cc.room.Class.ID, Name: cc.room.Class.Name, Board: boardView(snap, s)}
	if cc.room.Class.Exam {
		if p.Exam, err = s.examView(r.Context(), cc); err != nil {
			http.Error(w, "your exam could not be read: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	if len(p.Board.Rows) == 1 {
		p.Me = p.Board.Rows[0]
	}
	writeHTML(w, r, s, web.Class(p))
}

// startLab asks for the learner's lab (queued when the class is at
// capacity).
func (s *Server) startLab(w http.ResponseWriter, r *http.Request) {
	cc := classOf(r)
	l, err := cc.room.StartLab(cc.who)
	if err != nil {
		// The machine is short of memory, the class closed: say so.
		answerError(w, r, err, http.StatusServiceUnavailable)
		return
	}
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, l)
		return
	}
	http.Redirect(w, r, "/class/"+cc.room.Class.ID+"/", http.StatusSeeOther)
}

// instructorLogin asks for the instructor token.
func (s *Server) instructorLogin(w http.ResponseWriter, r *http.Request) {
	cc := classOf(r)
	if cc.who.Role == class.InstructorRole {
		http.Redirect(w, r, "/class/"+cc.room.Class.ID+"/board", http.StatusSeeOther)
		return
	}
	writeHTML(w, r, s, web.InstructorLogin(cc.room.Class.ID, cc.room.Class.Name, ""))
}

// instructorSignIn checks the instructor token and sets the cookie.
func (s *Server) instructorSignIn(w http.ResponseWriter, r *http.Request) {
	cc := classOf(r)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "the form could not be read: "+err.Error(), http.StatusBadRequest)
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	// The token is checked once and exchanged for a session: the cookie
	// never holds the instructor token itself.
	session, expires, err := cc.room.SignIn(r.Context(), tok)
	if err != nil {
		status, msg := http.StatusUnauthorized, "That is not this class's instructor token. It was printed once by 'svclab class create'."
		if !errors.Is(err, class.ErrBadToken) {
			s.Log.Error("signing an instructor in", "class", cc.room.Class.ID, "err", err)
			status, msg = http.StatusServiceUnavailable, "Signing in did not work right now (the database did not answer): try again in a moment."
		}
		w.WriteHeader(status)
		writeHTML(w, r, s, web.InstructorLogin(cc.room.Class.ID, cc.room.Class.Name, msg))
		return
	}
	s.setClassCookie(w, r, cc.room.Class.ID, session, expires)
	http.Redirect(w, r, "/class/"+cc.room.Class.ID+"/board", http.StatusSeeOther)
}

// instructorSignOut ends the instructor's session and its cookie.
func (s *Server) instructorSignOut(w http.ResponseWriter, r *http.Request) {
	cc := classOf(r)
	if err := cc.room.SignOut(r.Context(), classToken(r, cc.room.Class.ID)); err != nil {
		s.Log.Error("signing an instructor out", "class", cc.room.Class.ID, "err", err)
		http.Error(w, "Signing out did not work right now (the database did not answer): try again in a moment.", http.StatusServiceUnavailable)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName(cc.room.Class.ID), Value: "", Path: "/class/" + cc.room.Class.ID + "/",
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil || s.access().Secure, MaxAge: -1})
	http.Redirect(w, r, "/class/"+cc.room.Class.ID+"/instructor", http.StatusSeeOther)
}

// boardPage is the instructor's live board.
func (s *Server) boardPage(w http.ResponseWriter, r *http.Request) {
	cc := classOf(r)
	if err := class.AuthorizeInstructor(cc.who, cc.room.Class.ID); err != nil {
		if errors.Is(err, class.ErrUnauthenticated) {
			http.Redirect(w, r, "/class/"+cc.room.Class.ID+"/instructor", http.StatusSeeOther)
			return
		}
		refuse(w, r, err)
		return
	}
	snap, err := cc.room.Snapshot(r.Context(), cc.who)
	if err != nil {
		http.Error(w, "the board could not be read: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	writeHTML(w, r, s, web.Board(web.BoardPage{ClassID: cc.room.Class.ID, Name: cc.room.Class.Name, JoinCode: cc.room.Class.JoinCode, Board: boardView(snap, s)}))
}

// pushMessage sends a message or a hint to one learner or to everyone.
func (s *Server) pushMessage(w http.ResponseWriter, r *http.Request) {
	cc := classOf(r)
	if err := r.ParseForm(); err != nil {
		jsonError(w, http.StatusBadRequest, "the form could not be read: "+err.Error())
		return
	}
	kind := r.PostFormValue("kind")
	if kind == "" {
		kind = "message"
	}
	m, err := cc.room.Push(r.Context(), cc.who, r.PostFormValue("to"), kind, r.PostFormValue("scenario"), r.PostFormValue("body"))
	if err != nil {
		answerError(w, r, err, http.StatusBadRequest)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

// extendLab gives a learner's lab more time (instructor).
func (s *Server) extendLab(w http.ResponseWriter, r *http.Request) {
	cc := classOf(r)
	d := 30 * time.Minute
	if v := r.URL.Query().Get("minutes"); v != "" {
		var n int
		if _, err := fmt.Sscan(v, &n); err != nil || n < 1 || n > 24*60 {
			jsonError(w, http.StatusBadRequest, fmt.Sprintf("minutes %q: give a number from 1 to 1440", v))
			return
		}
		d = time.Duration(n) * time.Minute
	}
	l, err := cc.room.Extend(cc.who, chi.URLParam(r, "learner"), d)
	s.labAnswer(w, r, l, err)
}

// resetLab gives a learner's lab a fresh cluster (instructor).
func (s *Server) resetLab(w http.ResponseWriter, r *http.Request) {
	cc := classOf(r)
	l, err := cc.room.Reset(cc.who, chi.URLParam(r, "learner"))
	s.labAnswer(w, r, l, err)
}

func (s *Server) labAnswer(w http.ResponseWriter, r *http.Request, l classlabs.Lab, err error) {
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, l)
	case errors.Is(err, classlabs.ErrNoLab):
		jsonError(w, http.StatusNotFound, "that learner has no lab")
	default:
		answerError(w, r, err, http.StatusConflict)
	}
}

// classResults exports the class's results as CSV or JSON (instructor).
func (s *Server) classResults(w http.ResponseWriter, r *http.Request) {
	cc := classOf(r)
	if err := class.AuthorizeInstructor(cc.who, cc.room.Class.ID); err != nil {
		refuse(w, r, err)
		return
	}
	format := chi.URLParam(r, "format")
	if format != "csv" && format != "json" {
		http.Error(w, "results come as results.csv or results.json", http.StatusNotFound)
		return
	}
	rows, err := cc.room.Results(r.Context())
	if err != nil {
		http.Error(w, "the results could not be read: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	ctype := map[string]string{"csv": "text/csv; charset=utf-8", "json": "application/json"}[format]
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", cc.room.Class.Name+"-results."+format))
	if err := class.WriteResults(w, rows, format); err != nil {
		s.Log.Error("writing class results", "err", err)
	}
}

// progressMarks maps lab/attempt's status per scenario to the catalog's
// marks: passed once solved, else the latest attempt's state.
func progressMarks(st map[string]attempt.Status) map[string]string {
	out := map[string]string{}
	for id, s := range st {
		switch {
		case s.State == attempt.Solved:
			out[id] = StatePassed
		case s.State == attempt.NotStarted || s.Latest == nil:
		default:
			out[id] = s.Latest.State
		}
	}
	return out
}

// examView is the learner's exam for their class page.
func (s *Server) examView(ctx context.Context, cc *classCtx) (*web.ExamView, error) {
	e, err := cc.room.Exam(ctx, cc.who, cc.who.LearnerID)
	if errors.Is(err, class.ErrNotFound) {
		return &web.ExamView{State: "not-started"}, nil
	}
	if err != nil {
		return nil, err
	}
	v := &web.ExamView{State: "running", Deadline: e.Deadline.UTC().Format(time.RFC3339)}
	if e.Finished(time.Now()) {
		v.State = "finished"
		if e.Score != nil {
			v.Score = grade.FormatScore(e.Score.Points, e.Score.Max)
		} else {
			v.Score = "being graded"
		}
	}
	return v, nil
}

// startExam starts the learner's exam clock.
func (s *Server) startExam(w http.ResponseWriter, r *http.Request) {
	cc := classOf(r)
	if _, err := cc.room.StartExam(r.Context(), cc.who); err != nil {
		answerError(w, r, fmt.Errorf("the exam could not start: %w", err), http.StatusConflict)
		return
	}
	http.Redirect(w, r, "/class/"+cc.room.Class.ID+"/", http.StatusSeeOther)
}

// finishExam ends the learner's exam now and grades it.
func (s *Server) finishExam(w http.ResponseWriter, r *http.Request) {
	cc := classOf(r)
	if _, err := cc.room.FinishExam(r.Context(), cc.who); err != nil {
		answerError(w, r, fmt.Errorf("the exam could not be finished: %w", err), http.StatusConflict)
		return
	}
	http.Redirect(w, r, "/class/"+cc.room.Class.ID+"/review", http.StatusSeeOther)
}

// reviewPage is an exam's review: the learner's own ({learner} empty), or
// any learner's for the instructor.
func (s *Server) reviewPage(w http.ResponseWriter, r *http.Request) {
	cc := classOf(r)
	learner := chi.URLParam(r, "learner")
	if learner == "" {
		learner = cc.who.LearnerID
	}
	rev, err := cc.room.Review(r.Context(), cc.who, learner)
	if err != nil {
		answerError(w, r, err, http.StatusConflict)
		return
	}
	p := web.ReviewPage{ClassID: cc.room.Class.ID, ClassName: cc.room.Class.Name, Learner: cc.room.Board.LearnerName(learner),
		Score: grade.FormatScore(rev.Score.Points, rev.Score.Max)}
	for _, it := range rev.Items {
		v := web.ReviewItemView{Title: it.Title, Scenario: it.Scenario, Points: fmt.Sprintf("%g of %g points", it.Points, it.Weight),
			Task: it.TaskText, Solution: it.Solution, Explanation: it.Explanation, Sources: sources(it.Sources)}
		for _, c := range it.Checks {
			v.Checks = append(v.Checks, web.ReviewCheck{Description: c.Description, Message: c.Message, Passed: c.Passed, Weight: fmt.Sprintf("%g", c.Weight)})
		}
		p.Items = append(p.Items, v)
	}
	writeHTML(w, r, s, web.Review(p))
}
