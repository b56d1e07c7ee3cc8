package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/svclab/svclab/lab/store/sqldb"
)

// LocalLearner is the learner of single-user use: no login, one per
// machine.
const LocalLearner = "local"

// Learner is someone doing scenarios.
type Learner struct {
	ID int64
	// Name is the stable key (LocalLearner, or a classroom's id for the
	// learner).
	Name        string
	DisplayName string
	Created     time.Time
}

// EnsureLearner returns the learner called name, creating it with
// displayName (default: name) when there is none.
func (s *Store) EnsureLearner(ctx context.Context, name, displayName string) (Learner, error) {
	if strings.TrimSpace(name) == "" {
		return Learner{}, errors.New("store: a learner needs a name")
	}
	if displayName == "" {
		displayName = name
	}
	var l Learner
	err := s.write(ctx, "recording learner "+name, func(ctx context.Context, tx *sqldb.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO learners (name, display_name, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`, name, displayName, s.now()); err != nil {
			return err
		}
		var err error
		l, err = scanLearner(tx.QueryRowContext(ctx, `SELECT id, name, display_name, created_at FROM learners WHERE name = ?`, name))
		return err
	})
	return l, err
}

// Learner returns the learner called name.
func (s *Store) Learner(ctx context.Context, name string) (Learner, error) {
	var l Learner
	err := s.read(ctx, "reading learner "+name, func(ctx context.Context) error {
		var err error
		l, err = scanLearner(s.db.QueryRowContext(ctx, `SELECT id, name, display_name, created_at FROM learners WHERE name = ?`, name))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("learner %q: %w", name, ErrNotFound)
		}
		return err
	})
	return l, err
}

// Learners lists every learner, oldest first.
func (s *Store) Learners(ctx context.Context) ([]Learner, error) {
	var out []Learner
	err := s.read(ctx, "listing learners", func(ctx context.Context) error {
		out = nil
		rows, err := s.db.QueryContext(ctx, `SELECT id, name, display_name, created_at FROM learners ORDER BY id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var l Learner
			var created int64
			if err := rows.Scan(&l.ID, &l.Name, &l.DisplayName, &created); err != nil {
				return err
			}
			l.Created = time.UnixMilli(created)
			out = append(out, l)
		}
		return rows.Err()
	})
	return out, err
}

// SetDisplayName changes a learner's display name.
func (s *Store) SetDisplayName(ctx context.Context, name, displayName string) error {
	return s.write(ctx, "renaming learner "+name, func(ctx context.Context, tx *sqldb.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE learners SET display_name = ? WHERE name = ?`, displayName, name)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n == 0 {
			return fmt.Errorf("learner %q: %w", name, ErrNotFound)
		}
		return nil
	})
}

func scanLearner(row *sql.Row) (Learner, error) {
	var l Learner
	var created int64
	if err := row.Scan(&l.ID, &l.Name, &l.DisplayName, &created); err != nil {
		return Learner{}, err
	}
	l.Created = time.UnixMilli(created)
	return l, nil
}

// State is where an attempt stands.
type State string

const (
	// Running: set up, the learner is working on it.
	Running State = "running"
	// Passed: a check run passed every check.
	Passed State = "passed"
	// Errored: svclab could not set the scenario up or grade it (not the
	// learner's doing); Error says why.
	Errored State = "errored"
	// Abandoned: the learner reset it or gave up.
	Abandoned State = "abandoned"
)

// transitions are the states an attempt may move to from each state. An
// errored attempt whose setup completed can be graded again (a check that
// timed out once may answer the next time).
var transitions = map[State][]State{
	Running: {Passed, Errored, Abandoned, Running},
	Errored: {Running, Passed, Abandoned, Errored},
	Passed:  {Passed},
}

// Attempt is one go of a learner at a scenario on a cluster.
type Attempt struct {
	ID         int64
	Learner    string
	ScenarioID string
	Cluster    string
	Backend    string
	State      State
	Started    time.Time
	// Finished is zero while the attempt runs.
	Finished time.Time
	// Score and MaxScore are the weights of the passed checks and of all
	// checks in the last check run.
	Score, MaxScore float64
	// Error says why an errored attempt errored.
	Error string
	// SolutionUsed is when the reference solution was applied (zero:
	// never).
	SolutionUsed time.Time
	HintsShown   int
	CheckRuns    int
	// LastCheck is when the last check run ran (zero: none yet);
	// LastCheckPassed is its verdict.
	LastCheck       time.Time
	LastCheckPassed bool
}

// NewAttempt says what attempt to record.
type NewAttempt struct {
	Learner, ScenarioID, Cluster, Backend string
}

// CreateAttempt records a running attempt of an existing learner.
func (s *Store) CreateAttempt(ctx context.Context, n NewAttempt) (Attempt, error) {
	var id int64
	err := s.write(ctx, fmt.Sprintf("recording an attempt of %s at %s", n.Learner, n.ScenarioID), func(ctx context.Context, tx *sqldb.Tx) error {
		var lid int64
		err := tx.QueryRowContext(ctx, `SELECT id FROM learners WHERE name = ?`, n.Learner).Scan(&lid)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("learner %q: %w", n.Learner, ErrNotFound)
		}
		if err != nil {
			return err
		}
		// A running attempt on the cluster already (the unique index
		// attempts_one_running_per_cluster) inserts nothing.
		err = tx.QueryRowContext(ctx, `INSERT INTO attempts (learner_id, scenario_id, cluster, backend, started_at, state) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING RETURNING id`,
			lid, n.ScenarioID, n.Cluster, n.Backend, s.now(), Running).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			var other Attempt
			if other, err = scanAttempt(tx.QueryRowContext(ctx, `SELECT `+attemptColumns+` WHERE a.state = 'running' AND a.backend = ? AND a.cluster = ?`, n.Backend, n.Cluster)); err != nil {
				return err
			}
			return &BusyError{Cluster: n.Cluster, Attempt: other}
		}
		return err
	})
	if err != nil {
		return Attempt{}, err
	}
	return s.Attempt(ctx, id)
}

// BusyError is returned by CreateAttempt when another attempt runs on the
// cluster: one cluster runs one attempt at a time.
type BusyError struct {
	Cluster string
	Attempt Attempt
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("cluster %s is busy with attempt %d (%s at %s)", e.Cluster, e.Attempt.ID, e.Attempt.Learner, e.Attempt.ScenarioID)
}

const attemptColumns = `a.id, l.name, a.scenario_id, a.cluster, a.backend, a.state, a.started_at, a.finished_at,
	a.score, a.max_score, a.error, a.solution_used_at,
	(SELECT COUNT(*) FROM hints_shown h WHERE h.attempt_id = a.id),
	(SELECT COUNT(*) FROM check_runs c WHERE c.attempt_id = a.id),
	(SELECT c.at FROM check_runs c WHERE c.attempt_id = a.id ORDER BY c.id DESC LIMIT 1),
	(SELECT c.passed FROM check_runs c WHERE c.attempt_id = a.id ORDER BY c.id DESC LIMIT 1)
	FROM attempts a JOIN learners l ON l.id = a.learner_id`

type scanner interface{ Scan(dest ...any) error }

func scanAttempt(r scanner) (Attempt, error) {
	var a Attempt
	var started int64
	var finished, solution, lastCheck sql.NullInt64
	var lastPassed sql.NullBool
	err := r.Scan(&a.ID, &a.Learner, &a.ScenarioID, &a.Cluster, &a.Backend, &a.State, &started, &finished,
		&a.Score, &a.MaxScore, &a.Error, &solution, &a.HintsShown, &a.CheckRuns, &lastCheck, &lastPassed)
	if err != nil {
		return Attempt{}, err
	}
	a.Started = time.UnixMilli(started)
	a.Finished = msTime(finished)
	a.SolutionUsed = msTime(solution)
	a.LastCheck = msTime(lastCheck)
	a.LastCheckPassed = lastPassed.Bool
	return a, nil
}

func msTime(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64)
}

// Attempt returns attempt id.
func (s *Store) Attempt(ctx context.Context, id int64) (Attempt, error) {
	var a Attempt
	err := s.read(ctx, fmt.Sprintf("reading attempt %d", id), func(ctx context.Context) error {
		var err error
		a, err = scanAttempt(s.db.QueryRowContext(ctx, `SELECT `+attemptColumns+` WHERE a.id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("attempt %d: %w", id, ErrNotFound)
		}
		return err
	})
	return a, err
}

// AttemptFilter selects attempts; zero fields select all.
type AttemptFilter struct {
	Learner    string
	ScenarioID string
	States     []State
	// Limit bounds the number of attempts (0: no bound).
	Limit int
}

// Attempts lists the attempts that f selects, newest first.
func (s *Store) Attempts(ctx context.Context, f AttemptFilter) ([]Attempt, error) {
	var where []string
	var args []any
	if f.Learner != "" {
		where, args = append(where, "l.name = ?"), append(args, f.Learner)
	}
	if f.ScenarioID != "" {
		where, args = append(where, "a.scenario_id = ?"), append(args, f.ScenarioID)
	}
	if len(f.States) > 0 {
		where = append(where, "a.state IN (?"+strings.Repeat(", ?", len(f.States)-1)+")")
		for _, st := range f.States {
			args = append(args, st)
		}
	}
	q := `SELECT ` + attemptColumns
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY a.id DESC"
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	var out []Attempt
	err := s.read(ctx, "listing attempts", func(ctx context.Context) error {
		out = nil
		rows, err := s.db.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			a, err := scanAttempt(rows)
			if err != nil {
				return err
			}
			out = append(out, a)
		}
		return rows.Err()
	})
	return out, err
}

// SetState moves attempt id to state to, with msg as its error (cleared
// when to is not Errored). Finished states set the finish time. Moves that
// make no sense (a passed attempt that errors, an abandoned one that runs)
// are refused.
func (s *Store) SetState(ctx context.Context, id int64, to State, msg string) error {
	return s.write(ctx, fmt.Sprintf("marking attempt %d %s", id, to), func(ctx context.Context, tx *sqldb.Tx) error {
		return setState(ctx, tx, id, to, msg, s.now())
	})
}

func setState(ctx context.Context, tx *sqldb.Tx, id int64, to State, msg string, now int64) error {
	var from State
	err := tx.QueryRowContext(ctx, `SELECT state FROM attempts WHERE id = ?`, id).Scan(&from)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("attempt %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return err
	}
	ok := false
	for _, st := range transitions[from] {
		ok = ok || st == to
	}
	if !ok {
		return &StateError{ID: id, From: from, To: to}
	}
	if to != Errored {
		msg = ""
	}
	var finished any // NULL while running
	switch {
	case to == Running:
	case from == to: // keeps the time it first ended
		_, err = tx.ExecContext(ctx, `UPDATE attempts SET error = ? WHERE id = ?`, msg, id)
		return err
	default:
		finished = now
	}
	_, err = tx.ExecContext(ctx, `UPDATE attempts SET state = ?, error = ?, finished_at = ? WHERE id = ?`, to, msg, finished, id)
	return err
}

// StateError is a refused state change.
type StateError struct {
	ID       int64
	From, To State
}

func (e *StateError) Error() string {
	return fmt.Sprintf("attempt %d is %s and cannot become %s", e.ID, e.From, e.To)
}

// MarkSolutionUsed records that the reference solution was applied to
// attempt id.
func (s *Store) MarkSolutionUsed(ctx context.Context, id int64) error {
	return s.write(ctx, fmt.Sprintf("recording the reference solution of attempt %d", id), func(ctx context.Context, tx *sqldb.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE attempts SET solution_used_at = COALESCE(solution_used_at, ?) WHERE id = ?`, s.now(), id)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n == 0 {
			return fmt.Errorf("attempt %d: %w", id, ErrNotFound)
		}
		return nil
	})
}

// SetBaseline stores the baseline of attempt id (what its rightFix checks
// compare with), replacing an earlier one.
func (s *Store) SetBaseline(ctx context.Context, id int64, data []byte) error {
	return s.write(ctx, fmt.Sprintf("recording the baseline of attempt %d", id), func(ctx context.Context, tx *sqldb.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO attempt_baselines (attempt_id, taken_at, data) VALUES (?, ?, ?)
			ON CONFLICT (attempt_id) DO UPDATE SET taken_at = excluded.taken_at, data = excluded.data`, id, s.now(), data)
		return err
	})
}

// Baseline returns the baseline of attempt id.
func (s *Store) Baseline(ctx context.Context, id int64) ([]byte, error) {
	var data []byte
	err := s.read(ctx, fmt.Sprintf("reading the baseline of attempt %d", id), func(ctx context.Context) error {
		err := s.db.QueryRowContext(ctx, `SELECT data FROM attempt_baselines WHERE attempt_id = ?`, id).Scan(&data)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("the baseline of attempt %d: %w", id, ErrNotFound)
		}
		return err
	})
	return data, err
}

// CheckRun is one grading of an attempt.
type CheckRun struct {
	ID        int64
	AttemptID int64
	At        time.Time
	Duration  time.Duration
	Passed    bool
	// Score and MaxScore are the weights of the passed checks and of all.
	Score, MaxScore float64
	// Trigger is what ran the checks: TriggerLearner (the learner asked)
	// or TriggerAuto (continuous re-evaluation).
	Trigger string
	Results []CheckResult
}

// Check run triggers.
const (
	TriggerLearner = "learner"
	TriggerAuto    = "auto"
)

// CheckResult is one check of a check run.
type CheckResult struct {
	CheckID  string
	Kind     string
	Weight   float64
	Passed   bool
	Message  string
	Detail   string
	Error    string
	Duration time.Duration
}

// RecordCheckRun stores run (its At defaults to now) and makes its score the
// attempt's. With then set, the attempt moves to that state (errMsg is its
// error) in the same transaction. It returns run with its ID.
func (s *Store) RecordCheckRun(ctx context.Context, run CheckRun, then State, errMsg string) (CheckRun, error) {
	if run.At.IsZero() {
		run.At = s.opts.Now()
	}
	if run.Trigger == "" {
		run.Trigger = TriggerLearner
	}
	err := s.write(ctx, fmt.Sprintf("recording a check run of attempt %d", run.AttemptID), func(ctx context.Context, tx *sqldb.Tx) error {
		var state State
		err := tx.QueryRowContext(ctx, `SELECT state FROM attempts WHERE id = ?`, run.AttemptID).Scan(&state)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("attempt %d: %w", run.AttemptID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if state == Abandoned {
			return &StateError{ID: run.AttemptID, From: state, To: state}
		}
		err = tx.QueryRowContext(ctx, `INSERT INTO check_runs (attempt_id, at, duration_ms, passed, score, max_score, triggered_by) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`,
			run.AttemptID, run.At.UnixMilli(), run.Duration.Milliseconds(), run.Passed, run.Score, run.MaxScore, run.Trigger).Scan(&run.ID)
		if err != nil {
			return err
		}
		for i, r := range run.Results {
			_, err := tx.ExecContext(ctx, `INSERT INTO check_results (check_run_id, seq, check_id, kind, weight, passed, message, detail, error, duration_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				run.ID, i, r.CheckID, r.Kind, r.Weight, r.Passed, r.Message, r.Detail, r.Error, r.Duration.Milliseconds())
			if err != nil {
				return err
			}
		}
		if state != Passed {
			if _, err := tx.ExecContext(ctx, `UPDATE attempts SET score = ?, max_score = ? WHERE id = ?`, run.Score, run.MaxScore, run.AttemptID); err != nil {
				return err
			}
		}
		if then != "" {
			return setState(ctx, tx, run.AttemptID, then, errMsg, s.now())
		}
		return nil
	})
	if err != nil {
		return CheckRun{}, err
	}
	return run, nil
}

// CheckRuns lists the check runs of attempt id, oldest first, with their
// results.
func (s *Store) CheckRuns(ctx context.Context, id int64) ([]CheckRun, error) {
	var out []CheckRun
	err := s.read(ctx, fmt.Sprintf("reading the check runs of attempt %d", id), func(ctx context.Context) error {
		out = nil
		rows, err := s.db.QueryContext(ctx, `SELECT r.id, r.at, r.duration_ms, r.passed, r.score, r.max_score, r.triggered_by,
			x.check_id, x.kind, x.weight, x.passed, x.message, x.detail, x.error, x.duration_ms
			FROM check_runs r LEFT JOIN check_results x ON x.check_run_id = r.id
			WHERE r.attempt_id = ? ORDER BY r.id, x.seq`, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var run CheckRun
			var at, dur int64
			var cid, kind, msg, detail, cerr sql.NullString
			var weight sql.NullFloat64
			var passed sql.NullBool
			var cdur sql.NullInt64
			if err := rows.Scan(&run.ID, &at, &dur, &run.Passed, &run.Score, &run.MaxScore, &run.Trigger,
				&cid, &kind, &weight, &passed, &msg, &detail, &cerr, &cdur); err != nil {
				return err
			}
			if len(out) == 0 || out[len(out)-1].ID != run.ID {
				run.AttemptID, run.At, run.Duration = id, time.UnixMilli(at), time.Duration(dur)*time.Millisecond
				out = append(out, run)
			}
			if cid.Valid {
				last := &out[len(out)-1]
				last.Results = append(last.Results, CheckResult{CheckID: cid.String, Kind: kind.String, Weight: weight.Float64, Passed: passed.Bool,
					Message: msg.String, Detail: detail.String, Error: cerr.String, Duration: time.Duration(cdur.Int64) * time.Millisecond})
			}
		}
		return rows.Err()
	})
	return out, err
}

// HintReason is why a hint was shown.
type HintReason string

const (
	// HintRequested: the learner asked for the next hint.
	HintRequested HintReason = "requested"
	// HintUnlocked: a failed check unlocked it.
	HintUnlocked HintReason = "unlocked"
)

// HintShown is a hint an attempt's learner has seen.
type HintShown struct {
	// Hint is the hint's 1-based index in the scenario.
	Hint   int
	Shown  time.Time
	Reason HintReason
}

// RecordHint records that hint (1-based) was shown in attempt id; a hint is
// recorded once, the first time. It reports whether the hint was new.
func (s *Store) RecordHint(ctx context.Context, id int64, hint int, reason HintReason) (bool, error) {
	var added bool
	err := s.write(ctx, fmt.Sprintf("recording hint %d of attempt %d", hint, id), func(ctx context.Context, tx *sqldb.Tx) error {
		r, err := tx.ExecContext(ctx, `INSERT INTO hints_shown (attempt_id, hint, shown_at, reason) VALUES (?, ?, ?, ?) ON CONFLICT (attempt_id, hint) DO NOTHING`, id, hint, s.now(), reason)
		if err != nil {
			if sqldb.IsForeignKeyViolation(err) {
				return fmt.Errorf("attempt %d: %w", id, ErrNotFound)
			}
			return err
		}
		n, _ := r.RowsAffected()
		added = n > 0
		return nil
	})
	return added, err
}

// Hints lists the hints shown in attempt id, in the order shown.
func (s *Store) Hints(ctx context.Context, id int64) ([]HintShown, error) {
	var out []HintShown
	err := s.read(ctx, fmt.Sprintf("reading the hints of attempt %d", id), func(ctx context.Context) error {
		out = nil
		rows, err := s.db.QueryContext(ctx, `SELECT hint, shown_at, reason FROM hints_shown WHERE attempt_id = ? ORDER BY shown_at, hint`, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var h HintShown
			var at int64
			if err := rows.Scan(&h.Hint, &at, &h.Reason); err != nil {
				return err
			}
			h.Shown = time.UnixMilli(at)
			out = append(out, h)
		}
		return rows.Err()
	})
	return out, err
}

// SetAnswer records the learner's answer to the answer check checkID of
// attempt id, replacing an earlier one; an empty text takes it back.
func (s *Store) SetAnswer(ctx context.Context, id int64, checkID, text string) error {
	return s.write(ctx, fmt.Sprintf("recording an answer of attempt %d", id), func(ctx context.Context, tx *sqldb.Tx) error {
		if text == "" {
			_, err := tx.ExecContext(ctx, `DELETE FROM attempt_answers WHERE attempt_id = ? AND check_id = ?`, id, checkID)
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO attempt_answers (attempt_id, check_id, text, answered_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (attempt_id, check_id) DO UPDATE SET text = excluded.text, answered_at = excluded.answered_at`, id, checkID, text, s.now())
		if sqldb.IsForeignKeyViolation(err) {
			return fmt.Errorf("attempt %d: %w", id, ErrNotFound)
		}
		return err
	})
}

// Answers returns the answers recorded for attempt id, by check id.
func (s *Store) Answers(ctx context.Context, id int64) (map[string]string, error) {
	var out map[string]string
	err := s.read(ctx, fmt.Sprintf("reading the answers of attempt %d", id), func(ctx context.Context) error {
		out = map[string]string{}
		rows, err := s.db.QueryContext(ctx, `SELECT check_id, text FROM attempt_answers WHERE attempt_id = ?`, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var check, text string
			if err := rows.Scan(&check, &text); err != nil {
				return err
			}
			out[check] = text
		}
		return rows.Err()
	})
	return out, err
}

// WebSession is a browser's session with the web UI.
type WebSession struct {
	// ID is the secret the browser's cookie holds.
	ID       string
	Learner  string
	Created  time.Time
	LastSeen time.Time
}

// CreateWebSession starts a web session for an existing learner, with a
// fresh random id.
func (s *Store) CreateWebSession(ctx context.Context, learner string) (WebSession, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return WebSession{}, err
	}
	ws := WebSession{ID: base64.RawURLEncoding.EncodeToString(b), Learner: learner}
	now := s.now()
	ws.Created, ws.LastSeen = time.UnixMilli(now), time.UnixMilli(now)
	err := s.write(ctx, "starting a web session for "+learner, func(ctx context.Context, tx *sqldb.Tx) error {
		r, err := tx.ExecContext(ctx, `INSERT INTO web_sessions (id, learner_id, created_at, last_seen_at) SELECT ?, id, ?, ? FROM learners WHERE name = ?`, ws.ID, now, now, learner)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n == 0 {
			return fmt.Errorf("learner %q: %w", learner, ErrNotFound)
		}
		return nil
	})
	return ws, err
}

// WebSession returns the session id and marks it seen now.
func (s *Store) WebSession(ctx context.Context, id string) (WebSession, error) {
	var ws WebSession
	err := s.write(ctx, "reading a web session", func(ctx context.Context, tx *sqldb.Tx) error {
		var created, seen int64
		err := tx.QueryRowContext(ctx, `SELECT w.id, l.name, w.created_at, w.last_seen_at FROM web_sessions w JOIN learners l ON l.id = w.learner_id WHERE w.id = ?`, id).
			Scan(&ws.ID, &ws.Learner, &created, &seen)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("web session: %w", ErrNotFound)
		}
		if err != nil {
			return err
		}
		now := s.now()
		ws.Created, ws.LastSeen = time.UnixMilli(created), time.UnixMilli(now)
		_, err = tx.ExecContext(ctx, `UPDATE web_sessions SET last_seen_at = ? WHERE id = ?`, now, id)
		return err
	})
	return ws, err
}

// DeleteWebSession ends session id (no error when there is none).
func (s *Store) DeleteWebSession(ctx context.Context, id string) error {
	return s.write(ctx, "ending a web session", func(ctx context.Context, tx *sqldb.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM web_sessions WHERE id = ?`, id)
		return err
	})
}

// ExpireWebSessions deletes the sessions not seen since before and says how
// many.
func (s *Store) ExpireWebSessions(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.write(ctx, "expiring web sessions", func(ctx context.Context, tx *sqldb.Tx) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM web_sessions WHERE last_seen_at < ?`, before.UnixMilli())
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	return n, err
}

// HoldsCluster says whether attempt id still holds its cluster: it runs
// (being set up included), or it errored after its setup finished (a check
// that timed out leaves the scenario on the cluster, to be checked again or
// reset). An attempt that does not exist holds nothing.
func (s *Store) HoldsCluster(ctx context.Context, id int64) (bool, error) {
	var holds bool
	err := s.read(ctx, fmt.Sprintf("reading whether attempt %d holds its cluster", id), func(ctx context.Context) error {
		err := s.db.QueryRowContext(ctx, `SELECT a.state = 'running' OR (a.state = 'errored' AND EXISTS (SELECT 1 FROM attempt_baselines b WHERE b.attempt_id = a.id))
			FROM attempts a WHERE a.id = ?`, id).Scan(&holds)
		if errors.Is(err, sql.ErrNoRows) {
			holds = false
			return nil
		}
		return err
	})
	return holds, err
}

// AttemptHoldsCluster is HoldsCluster on the database at location, which
// may be another process's: it is opened without touching its schema, and
// a SQLite file that no longer exists holds nothing.
func AttemptHoldsCluster(ctx context.Context, location string, id int64, opts Options) (bool, error) {
	if !sqldb.IsURL(location) {
		if _, err := os.Stat(location); errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
	}
	s, err := open(ctx, location, opts)
	if err != nil {
		return false, err
	}
	defer s.Close()
	return s.HoldsCluster(ctx, id)
}
