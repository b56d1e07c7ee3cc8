package class

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/svclab/svclab/lab/store/sqldb"
)

// DBFileName is the database's name in the state directory: the same
// file lab/store uses (svclab.db).
const DBFileName = "svclab.db"

// DefaultDBPath is the database in stateDir.
func DefaultDBPath(stateDir string) string { return filepath.Join(stateDir, DBFileName) }

// migrations are the class tables' history. They share svclab.db with
// lab/store's tables but keep their own (class_schema_migrations):
// lab/store's migrations are its own, and it refuses versions it does not
// know. One runner applies both (sqldb.Migrate).
var migrations = []sqldb.Migration{
	{Version: 1, Name: "classes, learners, owned clusters, progress, messages, exams", SQL: []string{
		`CREATE TABLE classes (
			id TEXT PRIMARY KEY,
			name TEXT NOT NULL UNIQUE,
			spec TEXT NOT NULL,
			join_code TEXT NOT NULL UNIQUE,
			code_expires_at INTEGER NOT NULL,
			instructor_token_hash TEXT NOT NULL,
			created_at INTEGER NOT NULL,
			closed_at INTEGER
		)`,
		`CREATE TABLE class_learners (
			id TEXT PRIMARY KEY,
			class_id TEXT NOT NULL REFERENCES classes(id) ON DELETE CASCADE,
			name TEXT NOT NULL,
			name_key TEXT NOT NULL,
			token_hash TEXT NOT NULL UNIQUE,
			joined_at INTEGER NOT NULL,
			UNIQUE (class_id, name_key)
		)`,
		`CREATE TABLE class_clusters (
			name TEXT PRIMARY KEY,
			class_id TEXT NOT NULL REFERENCES classes(id) ON DELETE CASCADE,
			recorded_at INTEGER NOT NULL
		)`,
		`CREATE TABLE class_progress (
			learner_id TEXT NOT NULL REFERENCES class_learners(id) ON DELETE CASCADE,
			scenario_id TEXT NOT NULL,
			cell TEXT NOT NULL,
			PRIMARY KEY (learner_id, scenario_id)
		)`,
		`CREATE TABLE class_messages (
			id INTEGER PRIMARY KEY,
			class_id TEXT NOT NULL REFERENCES classes(id) ON DELETE CASCADE,
			learner_id TEXT NOT NULL,
			kind TEXT NOT NULL CHECK (kind IN ('message', 'hint')),
			scenario_id TEXT NOT NULL,
			body TEXT NOT NULL,
			at INTEGER NOT NULL
		)`,
		`CREATE INDEX class_messages_by_class ON class_messages (class_id, id)`,
		`CREATE TABLE class_exams (
			learner_id TEXT PRIMARY KEY REFERENCES class_learners(id) ON DELETE CASCADE,
			started_at INTEGER NOT NULL,
			deadline INTEGER NOT NULL,
			finished_at INTEGER,
			result TEXT NOT NULL DEFAULT ''
		)`,
	}},
	{Version: 2, Name: "instructor sessions", SQL: []string{
		`CREATE TABLE class_sessions (
			token_hash TEXT PRIMARY KEY,
			class_id TEXT NOT NULL REFERENCES classes(id) ON DELETE CASCADE,
			created_at INTEGER NOT NULL,
			expires_at INTEGER NOT NULL
		)`,
		`CREATE INDEX class_sessions_by_class ON class_sessions (class_id)`,
	}},
}

// DB holds classes in svclab's database (SQLite or PostgreSQL, through
// lab/store/sqldb).
type DB struct {
	db *sqldb.DB
	// location is what OpenDB opened; path is how it is shown (a URL
	// without its password).
	location, path string
	now            func() time.Time
}

// OpenDB opens the database at location — a PostgreSQL URL
// (postgres://...) or a SQLite file, created when missing; see
// store.Location — and brings the class tables up to date. now is the
// clock (time.Now when nil).
func OpenDB(ctx context.Context, location string, now func() time.Time) (*DB, error) {
	if now == nil {
		now = time.Now
	}
	sdb, err := sqldb.Open(location, sqldb.Options{BusyTimeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	d := &DB{db: sdb, location: location, path: sdb.Display(), now: now}
	if err := d.read(ctx, func() error { return sdb.Ping(ctx) }); err != nil {
		sdb.Close()
		return nil, d.fail("opening the database", err)
	}
	if err := d.migrate(ctx); err != nil {
		sdb.Close()
		return nil, err
	}
	if sdb.Dialect() == sqldb.SQLite {
		_ = os.Chmod(d.path, 0o600) // it holds token hashes
	}
	return d, nil
}

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// classTables are the class tables and their history.
var classTables = sqldb.Schema{Table: "class_schema_migrations", What: "the class tables", Migrations: migrations}

// migrate brings the class tables up to date (sqldb.Migrate).
func (d *DB) migrate(ctx context.Context) error {
	if op, err := d.db.Migrate(ctx, d.retrier(), classTables, classTables.Known(), d.now); err != nil {
		return d.fail(op, err)
	}
	return nil
}

func (d *DB) fail(op string, err error) error {
	if why := sqldb.Explain(err); why != "" {
		return fmt.Errorf("database %s: %s: %s: %w", d.path, op, why, err)
	}
	return fmt.Errorf("database %s: %s: %w", d.path, op, err)
}

// tx runs fn in a write transaction, and again (as a failed transaction
// changed nothing) while the database is locked by another process for
// longer than the busy timeout, briefly unreachable, or (PostgreSQL) the
// transaction conflicted with another.
func (d *DB) tx(ctx context.Context, fn func(*sqldb.Tx) error) error {
	return d.txOf(ctx, sqldb.Write, fn)
}

func (d *DB) txOf(ctx context.Context, kind sqldb.TxKind, fn func(*sqldb.Tx) error) error {
	_, err := d.db.Tx(ctx, d.retrier(), kind, "a class transaction", func(_ context.Context, tx *sqldb.Tx) error { return fn(tx) })
	return err
}

// read runs fn (queries only), retried like tx.
func (d *DB) read(ctx context.Context, fn func() error) error {
	_, err := d.retrier().Do(ctx, "a class query", func(context.Context) error { return fn() })
	return err
}

// exec runs one statement, retried like tx.
func (d *DB) exec(ctx context.Context, query string, args ...any) (res sql.Result, err error) {
	err = d.read(ctx, func() error {
		res, err = d.db.ExecContext(ctx, query, args...)
		return err
	})
	return res, err
}

// RetryFor bounds how long a write that fails with a transient error is
// retried.
const RetryFor = 15 * time.Second

// retrier is how the class tables retry what failed for a moment.
func (d *DB) retrier() sqldb.Retry { return sqldb.Retry{For: RetryFor, Display: d.path} }

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64).UTC()
}

// Created is what creating a class returns: the class and its secrets,
// shown once.
type Created struct {
	Class           *Class
	InstructorToken string
}

// CreateClass stores a new class with a fresh join code and instructor
// token. spec must be normalized.
// classIDLength is the length of a class's id: it is in every learner's
// address bar and on projected screens, so it must not be a short walk
// from another class's (36^16 ids).
const classIDLength = 16

func (d *DB) CreateClass(ctx context.Context, spec Spec) (Created, error) {
	if spec.Webhook != "" && spec.WebhookSecret == "" {
		spec.WebhookSecret = newWebhookSecret()
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return Created{}, err
	}
	now := d.now().UTC().Truncate(time.Millisecond)
	token := newToken(InstructorTokenPrefix)
	c := &Class{ID: newID(classIDLength), Spec: spec, CreatedAt: now, CodeExpiresAt: now.Add(spec.CodeTTL), tokenHash: hashToken(token)}
	for range 5 { // a join code that collides is drawn again
		c.JoinCode = newJoinCode()
		err = d.tx(ctx, func(tx *sqldb.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM classes WHERE name = ?`, spec.Name).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return fmt.Errorf("a class named %q exists already: choose another --name (svclab class list)", spec.Name)
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO classes (id, name, spec, join_code, code_expires_at, instructor_token_hash, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				c.ID, spec.Name, string(specJSON), c.JoinCode, ms(c.CodeExpiresAt), c.tokenHash, ms(now))
			return err
		})
		if err == nil || !sqldb.IsUniqueViolation(err) {
			break
		}
	}
	if err != nil {
		if strings.Contains(err.Error(), "exists already") {
			return Created{}, err
		}
		return Created{}, d.fail("creating class "+spec.Name, err)
	}
	return Created{Class: c, InstructorToken: token}, nil
}

const classColumns = `id, spec, join_code, code_expires_at, instructor_token_hash, created_at, closed_at`

func scanClass(r interface{ Scan(...any) error }) (*Class, error) {
	var (
		c        Class
		spec     string
		exp, cre int64
		closed   sql.NullInt64
	)
	if err := r.Scan(&c.ID, &spec, &c.JoinCode, &exp, &c.tokenHash, &cre, &closed); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(spec), &c.Spec); err != nil {
		return nil, fmt.Errorf("class %s: %w", c.ID, err)
	}
	c.CodeExpiresAt, c.CreatedAt, c.ClosedAt = time.UnixMilli(exp).UTC(), time.UnixMilli(cre).UTC(), fromMS(closed)
	return &c, nil
}

// Class returns the class with id or name ref.
func (d *DB) Class(ctx context.Context, ref string) (*Class, error) {
	var c *Class
	err := d.read(ctx, func() (err error) {
		c, err = scanClass(d.db.QueryRowContext(ctx, `SELECT `+classColumns+` FROM classes WHERE id = ? OR name = ?`, ref, ref))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("no class %q (svclab class list): %w", ref, ErrNotFound)
	}
	if err != nil {
		return nil, d.fail("reading class "+ref, err)
	}
	return c, nil
}

// Classes lists every class, newest first.
func (d *DB) Classes(ctx context.Context) ([]*Class, error) {
	var out []*Class
	err := d.read(ctx, func() error {
		out = nil
		rows, err := d.db.QueryContext(ctx, `SELECT `+classColumns+` FROM classes ORDER BY created_at DESC, id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			c, err := scanClass(rows)
			if err != nil {
				return err
			}
			out = append(out, c)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, d.fail("listing classes", err)
	}
	return out, nil
}

// CloseClass marks the class closed: nobody can join any more.
func (d *DB) CloseClass(ctx context.Context, id string) error {
	_, err := d.exec(ctx, `UPDATE classes SET closed_at = ? WHERE id = ? AND closed_at IS NULL`, ms(d.now()), id)
	if err != nil {
		return d.fail("closing class "+id, err)
	}
	return nil
}

// JoinedLearner is a new learner and their token, shown once (it goes
// into the browser's cookie).
type JoinedLearner struct {
	Learner Learner
	Token   string
}

// Join adds a learner called name to the class whose join code is code.
func (d *DB) Join(ctx context.Context, code, name string) (JoinedLearner, *Class, error) {
	return d.join(ctx, code, name, nil)
}

// join is Join; accept, when set, may refuse the code's class before the
// learner is added.
func (d *DB) join(ctx context.Context, code, name string, accept func(*Class) error) (JoinedLearner, *Class, error) {
	name, err := CleanName(name)
	if err != nil {
		return JoinedLearner{}, nil, err
	}
	code = NormalizeCode(code)
	var c *Class
	err = d.read(ctx, func() (err error) {
		c, err = scanClass(d.db.QueryRowContext(ctx, `SELECT `+classColumns+` FROM classes WHERE join_code = ?`, code))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return JoinedLearner{}, nil, ErrBadCode
	}
	if err != nil {
		return JoinedLearner{}, nil, d.fail("finding the class of a join code", err)
	}
	now := d.now().UTC().Truncate(time.Millisecond)
	switch {
	case !c.Open():
		return JoinedLearner{}, c, ErrClassClosed
	case !now.Before(c.CodeExpiresAt):
		return JoinedLearner{}, c, ErrCodeExpired
	}
	if accept != nil {
		if err := accept(c); err != nil {
			return JoinedLearner{}, c, err
		}
	}
	token := newToken(LearnerTokenPrefix)
	l := Learner{ID: newID(12), ClassID: c.ID, Name: name, JoinedAt: now}
	err = d.tx(ctx, func(tx *sqldb.Tx) error {
		var seats, taken int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM class_learners WHERE class_id = ?`, c.ID).Scan(&seats); err != nil {
			return err
		}
		if seats >= c.Seats {
			return ErrClassFull
		}
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM class_learners WHERE class_id = ? AND name_key = ?`, c.ID, nameKey(name)).Scan(&taken); err != nil {
			return err
		}
		if taken > 0 {
			return ErrNameTaken
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO class_learners (id, class_id, name, name_key, token_hash, joined_at) VALUES (?, ?, ?, ?, ?, ?)`,
			l.ID, c.ID, name, nameKey(name), hashToken(token), ms(now))
		return err
	})
	switch {
	case errors.Is(err, ErrClassFull), errors.Is(err, ErrNameTaken):
		return JoinedLearner{}, c, err
	case err != nil:
		return JoinedLearner{}, c, d.fail("adding a learner to class "+c.Name, err)
	}
	return JoinedLearner{Learner: l, Token: token}, c, nil
}

// LearnerByToken returns the learner whose token is token.
func (d *DB) LearnerByToken(ctx context.Context, token string) (Learner, error) {
	if !strings.HasPrefix(token, LearnerTokenPrefix) {
		return Learner{}, ErrNotFound
	}
	// The lookup is by hash: its timing says nothing about the token.
	var l Learner
	var joined int64
	err := d.read(ctx, func() error {
		return d.db.QueryRowContext(ctx, `SELECT id, class_id, name, joined_at FROM class_learners WHERE token_hash = ?`, hashToken(token)).Scan(&l.ID, &l.ClassID, &l.Name, &joined)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Learner{}, ErrNotFound
	}
	if err != nil {
		return Learner{}, d.fail("finding a learner", err)
	}
	l.JoinedAt = time.UnixMilli(joined).UTC()
	return l, nil
}

// Learners lists a class's learners in the order they joined.
func (d *DB) Learners(ctx context.Context, classID string) ([]Learner, error) {
	var out []Learner
	err := d.read(ctx, func() error {
		out = nil
		rows, err := d.db.QueryContext(ctx, `SELECT id, class_id, name, joined_at FROM class_learners WHERE class_id = ? ORDER BY joined_at, name`, classID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var l Learner
			var joined int64
			if err := rows.Scan(&l.ID, &l.ClassID, &l.Name, &joined); err != nil {
				return err
			}
			l.JoinedAt = time.UnixMilli(joined).UTC()
			out = append(out, l)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, d.fail("listing learners", err)
	}
	return out, nil
}

// Ledger is the labs.Ledger of one class: the clusters it owns.
func (d *DB) Ledger(classID string) *Ledger { return &Ledger{d: d, class: classID} }

// Ledger records a class's clusters in class_clusters.
type Ledger struct {
	d     *DB
	class string
}

func (l *Ledger) Record(ctx context.Context, name string) error {
	_, err := l.d.exec(ctx, `INSERT INTO class_clusters (name, class_id, recorded_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`, name, l.class, ms(l.d.now()))
	if err != nil {
		return l.d.fail("recording cluster "+name, err)
	}
	return nil
}

func (l *Ledger) Forget(ctx context.Context, name string) error {
	_, err := l.d.exec(ctx, `DELETE FROM class_clusters WHERE name = ? AND class_id = ?`, name, l.class)
	if err != nil {
		return l.d.fail("forgetting cluster "+name, err)
	}
	return nil
}

func (l *Ledger) Owned(ctx context.Context) ([]string, error) {
	var out []string
	err := l.d.read(ctx, func() error {
		out = nil
		rows, err := l.d.db.QueryContext(ctx, `SELECT name FROM class_clusters WHERE class_id = ? ORDER BY name`, l.class)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				return err
			}
			out = append(out, n)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, l.d.fail("listing the class's clusters", err)
	}
	return out, nil
}

// saveCell stores one board cell.
func (d *DB) saveCell(ctx context.Context, learner string, c Cell) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = d.exec(ctx, `INSERT INTO class_progress (learner_id, scenario_id, cell) VALUES (?, ?, ?)
		ON CONFLICT (learner_id, scenario_id) DO UPDATE SET cell = excluded.cell`, learner, c.Scenario, string(b))
	if err != nil {
		return d.fail("recording progress", err)
	}
	return nil
}

// Cells loads the board cells of a class's learners.
func (d *DB) Cells(ctx context.Context, classID string) (map[string][]Cell, error) {
	var out map[string][]Cell
	err := d.read(ctx, func() error {
		out = map[string][]Cell{}
		rows, err := d.db.QueryContext(ctx, `SELECT p.learner_id, p.cell FROM class_progress p JOIN class_learners l ON l.id = p.learner_id WHERE l.class_id = ?`, classID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var learner, cell string
			if err := rows.Scan(&learner, &cell); err != nil {
				return err
			}
			var c Cell
			if err := json.Unmarshal([]byte(cell), &c); err != nil {
				return fmt.Errorf("progress of %s: %w", learner, err)
			}
			out[learner] = append(out[learner], c)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, d.fail("reading progress", err)
	}
	return out, nil
}

// addMessage stores a message or hint pushed by the instructor.
func (d *DB) addMessage(ctx context.Context, classID string, m *Message) error {
	err := d.tx(ctx, func(tx *sqldb.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO class_messages (class_id, learner_id, kind, scenario_id, body, at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id`,
			classID, m.To, m.Kind, m.Scenario, m.Body, ms(m.At)).Scan(&m.ID)
	})
	if err != nil {
		return d.fail("recording a message", err)
	}
	return nil
}

// messages lists the messages for learner (and to everyone); learner ""
// lists them all.
func (d *DB) messages(ctx context.Context, classID, learner string) ([]Message, error) {
	q := `SELECT id, learner_id, kind, scenario_id, body, at FROM class_messages WHERE class_id = ?`
	args := []any{classID}
	if learner != "" {
		q += ` AND learner_id IN ('', ?)`
		args = append(args, learner)
	}
	var out []Message
	err := d.read(ctx, func() error {
		out = nil
		rows, err := d.db.QueryContext(ctx, q+` ORDER BY id`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m Message
			var at int64
			if err := rows.Scan(&m.ID, &m.To, &m.Kind, &m.Scenario, &m.Body, &at); err != nil {
				return err
			}
			m.At = time.UnixMilli(at).UTC()
			out = append(out, m)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, d.fail("reading messages", err)
	}
	return out, nil
}

// exam rows

func (d *DB) startExam(ctx context.Context, learner string, start, deadline time.Time) (ExamSession, error) {
	_, err := d.exec(ctx, `INSERT INTO class_exams (learner_id, started_at, deadline) VALUES (?, ?, ?) ON CONFLICT (learner_id) DO NOTHING`, learner, ms(start), ms(deadline))
	if err != nil {
		return ExamSession{}, d.fail("starting the exam", err)
	}
	return d.exam(ctx, learner)
}

func (d *DB) exam(ctx context.Context, learner string) (ExamSession, error) {
	var (
		e         ExamSession
		start, dl int64
		finished  sql.NullInt64
		result    string
	)
	err := d.read(ctx, func() error {
		return d.db.QueryRowContext(ctx, `SELECT started_at, deadline, finished_at, result FROM class_exams WHERE learner_id = ?`, learner).Scan(&start, &dl, &finished, &result)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return ExamSession{}, ErrNotFound
	}
	if err != nil {
		return ExamSession{}, d.fail("reading the exam", err)
	}
	e.Learner, e.StartedAt, e.Deadline, e.FinishedAt = learner, time.UnixMilli(start).UTC(), time.UnixMilli(dl).UTC(), fromMS(finished)
	if result != "" {
		e.Score = &Score{}
		if err := json.Unmarshal([]byte(result), e.Score); err != nil {
			return ExamSession{}, fmt.Errorf("exam result of %s: %w", learner, err)
		}
	}
	return e, nil
}

func (d *DB) finishExam(ctx context.Context, learner string, at time.Time, s *Score) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, err = d.exec(ctx, `UPDATE class_exams SET finished_at = ?, result = ? WHERE learner_id = ? AND finished_at IS NULL`, ms(at), string(b), learner)
	if err != nil {
		return d.fail("recording the exam's score", err)
	}
	return nil
}

// InstructorSessionTTL is how long an instructor stays signed in: a
// teaching day, not the class's lifetime.
const InstructorSessionTTL = 12 * time.Hour

// NewInstructorSession signs class c's instructor in: the instructor
// token, checked once, is exchanged for a session token that only the
// session's cookie carries, which sign-out ends and which ends by itself
// at expires.
func (d *DB) NewInstructorSession(ctx context.Context, c *Class, instructorToken string) (token string, expires time.Time, err error) {
	if !c.CheckInstructorToken(instructorToken) {
		return "", time.Time{}, ErrBadToken
	}
	token = newToken(SessionTokenPrefix)
	now := d.now().UTC().Truncate(time.Millisecond)
	expires = now.Add(InstructorSessionTTL)
	err = d.tx(ctx, func(tx *sqldb.Tx) error {
		// Sessions that ended by themselves go as new ones come.
		if _, err := tx.ExecContext(ctx, `DELETE FROM class_sessions WHERE expires_at <= ?`, ms(now)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO class_sessions (token_hash, class_id, created_at, expires_at) VALUES (?, ?, ?, ?)`,
			hashToken(token), c.ID, ms(now), ms(expires))
		return err
	})
	if err != nil {
		return "", time.Time{}, d.fail("signing the instructor in", err)
	}
	return token, expires, nil
}

// InstructorSession returns the class of the live instructor session
// token (ErrNotFound for none, an ended or an expired one).
func (d *DB) InstructorSession(ctx context.Context, token string) (classID string, err error) {
	if !strings.HasPrefix(token, SessionTokenPrefix) {
		return "", ErrNotFound
	}
	var exp int64
	err = d.read(ctx, func() error {
		return d.db.QueryRowContext(ctx, `SELECT class_id, expires_at FROM class_sessions WHERE token_hash = ?`, hashToken(token)).Scan(&classID, &exp)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", d.fail("finding an instructor session", err)
	}
	if !d.now().Before(time.UnixMilli(exp)) {
		return "", ErrNotFound
	}
	return classID, nil
}

// EndInstructorSession signs the session of token out.
func (d *DB) EndInstructorSession(ctx context.Context, token string) error {
	err := d.tx(ctx, func(tx *sqldb.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM class_sessions WHERE token_hash = ?`, hashToken(token))
		return err
	})
	if err != nil {
		return d.fail("signing the instructor out", err)
	}
	return nil
}
