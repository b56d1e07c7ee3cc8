package class

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/attempt"
	"github.com/svclab/svclab/lab/class/labs"
	"github.com/svclab/svclab/lab/class/stream"
	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/store"
)

// Options configure a running Classroom.
type Options struct {
	DB       *DB
	Provider cluster.Provider
	Catalog  *scenario.Catalog
	// Labs overrides parts of the lab manager's configuration (memory
	// estimate, warnings, tick interval); Provider, Ledger, Shape, Prefix,
	// Capacity, PoolSize, TimeLimit, IdleTimeout and Now come from the
	// class.
	Labs labs.Config
	// Attempts runs the learners' scenarios on their labs (StartScenario,
	// Check, Hint, Solve).
	Attempts *attempt.Manager
	// Store, when set, is the lab/store database Attempts records in: a
	// learner's display name is written there before their first attempt.
	Store *store.Store
	// FinalGrade grades a learner's exam task once more when the exam
	// ends (default: Attempts.FinalGrade of the running attempt); the last
	// check run counts when there is none or it fails.
	FinalGrade func(ctx context.Context, learner, scenario string) (*grade.Report, error)
	Now        func() time.Time
	Log        *slog.Logger
}

// Classroom is one open class while svclab serves it: its learners' labs,
// its board and its exams. The web UI mounts it; every learner-scoped
// call takes the Principal making it and authorizes it.
type Classroom struct {
	Class *Class
	Board *Board
	Labs  *labs.Manager
	opts  Options
	tasks []Task

	// hook delivers the class's webhook events (nil: no webhook).
	hook *webhook

	mu   sync.Mutex
	stop chan struct{}
	done chan struct{}
	// finishing are the learners whose exams are being scored; graders
	// bounds how many at once.
	finishing map[string]bool
	graders   chan struct{}
}

// OpenClassroom starts serving class ref: it sweeps clusters an earlier
// run left, starts the warm pool and the lab deadlines, and loads the
// board.
func OpenClassroom(ctx context.Context, ref string, o Options) (*Classroom, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	c, err := o.DB.Class(ctx, ref)
	if err != nil {
		return nil, err
	}
	if !c.Open() {
		return nil, fmt.Errorf("class %s was closed at %s", c.Name, c.ClosedAt.Format(time.RFC3339))
	}
	spec := c.Spec
	shape, err := spec.Normalize(o.Catalog)
	if err != nil {
		return nil, fmt.Errorf("class %s: %w", c.Name, err)
	}
	board, err := newBoard(ctx, o.DB, c, o.Now)
	if err != nil {
		return nil, err
	}
	lc := o.Labs
	lc.Provider, lc.Ledger, lc.Shape, lc.Prefix = o.Provider, o.DB.Ledger(c.ID), shape, c.ClusterPrefix()
	lc.Capacity, lc.PoolSize, lc.TimeLimit, lc.IdleTimeout, lc.Now = c.Capacity, c.PoolSize, c.TimeLimit, c.IdleTimeout, o.Now
	if lc.Log == nil {
		lc.Log = o.Log
	}
	m, err := labs.New(lc)
	if err != nil {
		return nil, err
	}
	cr := &Classroom{Class: c, Board: board, Labs: m, opts: o, tasks: ExamTasks(c, o.Catalog), stop: make(chan struct{}), done: make(chan struct{})}
	// Exams that ended while svclab was down (a crash, a kill -9) are
	// graded first, on the labs they left, before anything is swept.
	cr.FinishDueExams(ctx, true)
	events := m.Subscribe("", 1024)
	if err := m.Start(ctx); err != nil {
		events.Cancel()
		m.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("class %s: %w", c.Name, err)
	}
	if c.Webhook != "" {
		cr.hook = startWebhook(c, board, o.Log)
	}
	go cr.follow(events)
	return cr, nil
}

// follow shows the labs' events on the board and ends exams whose time
// ran out.
func (cr *Classroom) follow(events *stream.Subscription[labs.Event]) {
	defer close(cr.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case e, ok := <-events.C:
			if !ok {
				return
			}
			if e.Learner != "" {
				cr.Board.LabChanged(e)
			}
		case <-t.C:
			ctx := context.Background()
			if c, err := cr.opts.DB.Class(ctx, cr.Class.ID); err == nil && !c.Open() {
				// "svclab class close" from another process.
				cr.opts.Log.Info("the class was closed: ending its labs", "class", cr.Class.Name)
				go cr.Shutdown(ctx)
				continue
			}
			cr.FinishDueExams(ctx, false)
		case <-cr.stop:
			events.Cancel()
			return
		}
	}
}

// Close closes the class: nobody joins any more, every lab ends and every
// cluster of the class is deleted.
func (cr *Classroom) Close(ctx context.Context) error {
	err := cr.opts.DB.CloseClass(ctx, cr.Class.ID)
	return errors.Join(err, cr.Shutdown(ctx))
}

// Shutdown stops serving the class (svclab is exiting) and deletes its
// clusters; the class stays open for the next run.
func (cr *Classroom) Shutdown(ctx context.Context) error {
	cr.mu.Lock()
	select {
	case <-cr.stop:
	default:
		close(cr.stop)
	}
	cr.mu.Unlock()
	err := cr.Labs.Close(ctx)
	<-cr.done
	if cr.hook != nil {
		// The labs' last events (ended) still go out, briefly.
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cr.hook.close(hctx)
		cancel()
	}
	return err
}

// Join adds a learner to this class.
func (cr *Classroom) Join(ctx context.Context, code, name string) (JoinedLearner, error) {
	j, _, err := cr.opts.DB.join(ctx, code, name, func(c *Class) error {
		if c.ID != cr.Class.ID {
			return ErrBadCode // another class's code
		}
		return nil
	})
	if err != nil {
		return JoinedLearner{}, err
	}
	cr.Board.AddLearner(j.Learner)
	return j, nil
}

// Authenticate tells who holds token.
func (cr *Classroom) Authenticate(ctx context.Context, token string) (Principal, error) {
	return Authenticate(ctx, cr.opts.DB, cr.Class, token)
}

// SignIn exchanges the class's instructor token for a session token (see
// DB.NewInstructorSession).
func (cr *Classroom) SignIn(ctx context.Context, instructorToken string) (string, time.Time, error) {
	return cr.opts.DB.NewInstructorSession(ctx, cr.Class, instructorToken)
}

// SignOut ends the instructor session of token.
func (cr *Classroom) SignOut(ctx context.Context, token string) error {
	if !strings.HasPrefix(token, SessionTokenPrefix) {
		return nil
	}
	return cr.opts.DB.EndInstructorSession(ctx, token)
}

// StartLab gives the learner p their lab (see labs.Manager.Request).
func (cr *Classroom) StartLab(p Principal) (labs.Lab, error) {
	if err := Authorize(p, cr.Class.ID, p.LearnerID, Write); err != nil {
		return labs.Lab{}, err
	}
	return cr.Labs.Request(p.LearnerID)
}

// Lab returns learnerID's lab for p.
func (cr *Classroom) Lab(p Principal, learnerID string) (labs.Lab, error) {
	if err := Authorize(p, cr.Class.ID, learnerID, Read); err != nil {
		return labs.Lab{}, err
	}
	l, ok := cr.Labs.Lab(learnerID)
	if !ok {
		return labs.Lab{}, fmt.Errorf("no lab started yet (%w)", labs.ErrNoLab)
	}
	return l, nil
}

// Cluster returns learnerID's cluster for p with access a. Write access
// (a terminal, a command) counts as activity in the lab; watching it does
// not, so a forgotten browser tab does not keep a lab alive.
func (cr *Classroom) Cluster(p Principal, learnerID string, a Access) (cluster.Cluster, error) {
	if err := Authorize(p, cr.Class.ID, learnerID, a); err != nil {
		return nil, err
	}
	c, err := cr.Labs.Cluster(learnerID)
	if err == nil && a == Write {
		cr.Labs.Touch(learnerID)
	}
	return c, err
}

// Activity records that learner p did something in their lab (typed into
// its terminal, for example), which restarts its idle timeout.
func (cr *Classroom) Activity(p Principal) error {
	if err := Authorize(p, cr.Class.ID, p.LearnerID, Write); err != nil {
		return err
	}
	cr.Labs.Touch(p.LearnerID)
	return nil
}

// Subscribe returns the stream p may see: the whole board for the
// instructor, their own row, lab and messages for a learner.
func (cr *Classroom) Subscribe(p Principal, buffer int) (*stream.Subscription[Update], error) {
	switch p.Role {
	case InstructorRole:
		if err := AuthorizeInstructor(p, cr.Class.ID); err != nil {
			return nil, err
		}
		return cr.Board.subscribe("", buffer), nil
	case LearnerRole:
		if err := Authorize(p, cr.Class.ID, p.LearnerID, Read); err != nil {
			return nil, err
		}
		return cr.Board.subscribe(p.LearnerID, buffer), nil
	}
	return nil, ErrUnauthenticated
}

// Snapshot is the board as p may see it.
func (cr *Classroom) Snapshot(ctx context.Context, p Principal) (Snapshot, error) {
	if p.Role == InstructorRole {
		if err := AuthorizeInstructor(p, cr.Class.ID); err != nil {
			return Snapshot{}, err
		}
		return cr.Board.Snapshot(ctx)
	}
	if err := Authorize(p, cr.Class.ID, p.LearnerID, Read); err != nil {
		return Snapshot{}, err
	}
	return cr.Board.LearnerSnapshot(ctx, p.LearnerID)
}

// Extend gives learnerID's lab more time (instructor only).
func (cr *Classroom) Extend(p Principal, learnerID string, d time.Duration) (labs.Lab, error) {
	if err := AuthorizeInstructor(p, cr.Class.ID); err != nil {
		return labs.Lab{}, err
	}
	return cr.Labs.Extend(learnerID, d)
}

// Reset gives learnerID's lab a fresh cluster (instructor only).
func (cr *Classroom) Reset(p Principal, learnerID string) (labs.Lab, error) {
	if err := AuthorizeInstructor(p, cr.Class.ID); err != nil {
		return labs.Lab{}, err
	}
	return cr.Labs.Reset(learnerID)
}

// Push sends a message or hint to one learner (to) or all (to "")
// (instructor only).
func (cr *Classroom) Push(ctx context.Context, p Principal, to, kind, scenarioID, body string) (Message, error) {
	if err := AuthorizeInstructor(p, cr.Class.ID); err != nil {
		return Message{}, err
	}
	return cr.Board.Push(ctx, to, kind, scenarioID, body)
}

// StartExam starts p's exam: its clock runs from now for the class's
// time limit. Starting again returns the running exam.
func (cr *Classroom) StartExam(ctx context.Context, p Principal) (ExamSession, error) {
	if err := Authorize(p, cr.Class.ID, p.LearnerID, Write); err != nil {
		return ExamSession{}, err
	}
	if !cr.Class.Exam {
		return ExamSession{}, errors.New("this class is not an exam")
	}
	now := cr.opts.Now().UTC().Truncate(time.Millisecond)
	return cr.opts.DB.startExam(ctx, p.LearnerID, now, now.Add(cr.Class.TimeLimit))
}

// Exam returns learnerID's exam for p.
func (cr *Classroom) Exam(ctx context.Context, p Principal, learnerID string) (ExamSession, error) {
	if err := Authorize(p, cr.Class.ID, learnerID, Read); err != nil {
		return ExamSession{}, err
	}
	e, err := cr.opts.DB.exam(ctx, learnerID)
	if errors.Is(err, ErrNotFound) {
		return ExamSession{}, fmt.Errorf("the exam has not started: %w", ErrNotFound)
	}
	return e, err
}

// FinishExam ends p's exam now (the learner submits) and scores it.
func (cr *Classroom) FinishExam(ctx context.Context, p Principal) (ExamSession, error) {
	if err := Authorize(p, cr.Class.ID, p.LearnerID, Write); err != nil {
		return ExamSession{}, err
	}
	return cr.finishExam(ctx, p.LearnerID)
}

func (cr *Classroom) finishExam(ctx context.Context, learner string) (ExamSession, error) {
	e, err := cr.opts.DB.exam(ctx, learner)
	if err != nil {
		return ExamSession{}, fmt.Errorf("the exam has not started: %w", err)
	}
	if !e.FinishedAt.IsZero() {
		return e, nil
	}
	notes := map[string]string{}
	if cr.opts.FinalGrade != nil || cr.opts.Attempts != nil {
		for _, t := range cr.tasks {
			rep, err := cr.finalGrade(ctx, learner, t.Scenario)
			if err != nil {
				cr.opts.Log.Warn("final grading of an exam task failed; its last check counts", "learner", learner, "scenario", t.Scenario, "err", err)
				notes[t.Scenario] = "scored from the last check: the lab could not be graded at the end of the exam (" + err.Error() + ")"
				continue
			}
			if err := cr.Board.Checked(ctx, learner, t.Scenario, rep); err != nil {
				return ExamSession{}, err
			}
		}
	}
	at := cr.opts.Now().UTC().Truncate(time.Millisecond)
	if at.After(e.Deadline) {
		at = e.Deadline
	}
	score := ScoreExam(cr.tasks, cr.Board.lastChecks(learner), cr.opts.Catalog)
	for i := range score.Tasks {
		score.Tasks[i].Note = notes[score.Tasks[i].Scenario]
	}
	if err := cr.opts.DB.finishExam(ctx, learner, at, &score); err != nil {
		return ExamSession{}, err
	}
	return cr.opts.DB.exam(ctx, learner)
}

// ExamGraders bounds the exams graded at once at their deadline: each runs
// every task's checks on a learner's lab.
const ExamGraders = 4

// FinishDueExams scores the exams whose time ran out, each in the
// background (at most ExamGraders at once), so that the class's loop —
// lab events, the board, webhooks — never waits for a grading. It returns
// once every due exam is handed over; wait, when set, waits for them to be
// scored too.
func (cr *Classroom) FinishDueExams(ctx context.Context, wait bool) {
	if !cr.Class.Exam {
		return
	}
	now := cr.opts.Now()
	learners, err := cr.opts.DB.Learners(ctx, cr.Class.ID)
	if err != nil {
		cr.opts.Log.Error("listing learners for exam deadlines", "err", err)
		return
	}
	var wg sync.WaitGroup
	for _, l := range learners {
		e, err := cr.opts.DB.exam(ctx, l.ID)
		if err != nil || !e.FinishedAt.IsZero() || now.Before(e.Deadline) {
			continue
		}
		cr.mu.Lock()
		if cr.finishing == nil {
			cr.finishing = map[string]bool{}
			cr.graders = make(chan struct{}, ExamGraders)
		}
		busy := cr.finishing[l.ID]
		cr.finishing[l.ID] = true
		cr.mu.Unlock()
		if busy {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { cr.mu.Lock(); delete(cr.finishing, l.ID); cr.mu.Unlock() }()
			cr.graders <- struct{}{}
			defer func() { <-cr.graders }()
			if _, err := cr.finishExam(context.WithoutCancel(ctx), l.ID); err != nil {
				cr.opts.Log.Error("scoring an exam whose time ran out", "learner", l.ID, "err", err)
			}
		}()
	}
	if wait {
		wg.Wait()
	}
}

// ExamOver tells whether learner's exam has ended (submitted, or out of
// time): their lab is theirs to read, no longer to change.
func (cr *Classroom) ExamOver(ctx context.Context, learner string) bool {
	if !cr.Class.Exam {
		return false
	}
	e, err := cr.opts.DB.exam(ctx, learner)
	return err == nil && e.Finished(cr.opts.Now())
}

// Review is learnerID's exam review for p: the score, the reference
// solutions and the explanations. It opens once the exam is over.
func (cr *Classroom) Review(ctx context.Context, p Principal, learnerID string) (Review, error) {
	e, err := cr.Exam(ctx, p, learnerID)
	if err != nil {
		return Review{}, err
	}
	if e.Score == nil {
		if !e.Finished(cr.opts.Now()) {
			return Review{}, fmt.Errorf("the review opens when the exam ends (%s left)", e.Remaining(cr.opts.Now()).Round(time.Second))
		}
		if e, err = cr.finishExam(ctx, learnerID); err != nil {
			return Review{}, err
		}
	}
	return BuildReview(learnerID, *e.Score, cr.opts.Catalog), nil
}
