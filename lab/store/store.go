package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// FileName is the database's name in the state directory.
const FileName = "svclab.db"

// DefaultPath is the database in stateDir.
func DefaultPath(stateDir string) string { return filepath.Join(stateDir, FileName) }

// ErrNotFound is returned (wrapped) for a learner, attempt or session that
// does not exist.
var ErrNotFound = errors.New("not found")

// Options configure Open.
type Options struct {
	// BusyTimeout is how long SQLite itself waits for a lock (default 5s).
	BusyTimeout time.Duration
	// RetryFor bounds how long a transaction that failed with a transient
	// error (locked, I/O) is retried, on top of the busy timeout (default
	// 10s; negative: no retries).
	RetryFor time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	Log *slog.Logger
}

func (o *Options) defaults() {
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if o.RetryFor == 0 {
		o.RetryFor = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Store is an open svclab database. It is safe for concurrent use, also by
// several processes.
type Store struct {
	db   *sql.DB
	path string
	opts Options
}

// Open opens the database at path, creating it (and its directory) when
// missing, and migrates its schema to SchemaVersion.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	s, err := open(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	if err := s.migrate(ctx, migrations, SchemaVersion()); err != nil {
		s.db.Close()
		return nil, err
	}
	return s, nil
}

// open opens the database without touching its schema.
func open(ctx context.Context, path string, opts Options) (*Store, error) {
	opts.defaults()
	if path == "" {
		return nil, errors.New("store: no database path")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("store: the database path %q contains ? or #; choose a --state-dir without them", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, fmt.Errorf("store: creating the directory of the database %s: %w (choose another with --state-dir)", abs, err)
	}
	_, statErr := os.Stat(abs)
	created := errors.Is(statErr, os.ErrNotExist)
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", opts.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	// Every transaction takes the write lock when it begins, so two writers
	// queue on the busy timeout instead of one failing when it upgrades
	// its read lock.
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", abs+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("store: opening %s: %w", abs, err)
	}
	db.SetMaxOpenConns(4)
	db.SetConnMaxIdleTime(time.Minute)
	s := &Store{db: db, path: abs, opts: opts}
	if err := s.retry(ctx, "opening the database", func(ctx context.Context) error { return db.PingContext(ctx) }); err != nil {
		db.Close()
		return nil, err
	}
	if created {
		// The database holds web session ids: keep it to its owner.
		_ = os.Chmod(abs, 0o600)
	}
	return s, nil
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Version is the schema version of the database.
func (s *Store) Version(ctx context.Context) (int, error) {
	var v int
	err := s.read(ctx, "reading the schema version", func(ctx context.Context) error {
		return s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	})
	return v, err
}

// migrate applies the migrations of migs up to version target, each in its
// own transaction.
func (s *Store) migrate(ctx context.Context, migs []migration, target int) error {
	err := s.write(ctx, "preparing the schema table", func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version INTEGER PRIMARY KEY,
			name TEXT NOT NULL,
			applied_at INTEGER NOT NULL
		)`)
		return err
	})
	if err != nil {
		return err
	}
	known := 0
	if len(migs) > 0 {
		known = migs[len(migs)-1].Version
	}
	for i, m := range migs {
		if m.Version != i+1 {
			return fmt.Errorf("store: migration %d (%s) is numbered %d", i+1, m.Name, m.Version)
		}
		if m.Version > target {
			break
		}
		err := s.write(ctx, fmt.Sprintf("migrating the schema to version %d (%s)", m.Version, m.Name), func(ctx context.Context, tx *sql.Tx) error {
			var have int
			if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
				return err
			}
			if have > known {
				return fmt.Errorf("the database was written by a newer svclab (schema version %d; this svclab knows versions up to %d): upgrade svclab, or use another --state-dir", have, known)
			}
			if have >= m.Version {
				return nil // another process got here first
			}
			for _, stmt := range m.SQL {
				if _, err := tx.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("%s: %w", firstLine(stmt), err)
				}
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`, m.Version, m.Name, s.now())
			if err == nil {
				s.opts.Log.Debug("migrated the database schema", "path", s.path, "version", m.Version, "name", m.Name)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	// A database newer than every migration we know is refused too.
	v, err := s.Version(ctx)
	if err != nil {
		return err
	}
	if v > known {
		return s.fail("opening the database", fmt.Errorf("the database was written by a newer svclab (schema version %d; this svclab knows versions up to %d): upgrade svclab, or use another --state-dir", v, known), 1)
	}
	return nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSuffix(s, " (")
}

func (s *Store) now() int64 { return s.opts.Now().UnixMilli() }

// write runs fn in an immediate transaction, retrying the whole
// transaction on transient errors.
func (s *Store) write(ctx context.Context, op string, fn func(context.Context, *sql.Tx) error) error {
	return s.retry(ctx, op, func(ctx context.Context) error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(ctx, tx); err != nil {
			tx.Rollback()
			return err
		}
		return tx.Commit()
	})
}

// read runs fn (queries only), retrying on transient errors.
func (s *Store) read(ctx context.Context, op string, fn func(context.Context) error) error {
	return s.retry(ctx, op, fn)
}

// retry runs fn until it succeeds, fails for good, or RetryFor has passed.
func (s *Store) retry(ctx context.Context, op string, fn func(context.Context) error) error {
	start := s.opts.Now()
	delay := 50 * time.Millisecond
	for tries := 1; ; tries++ {
		err := fn(ctx)
		if err == nil || errors.Is(err, ErrNotFound) {
			return err
		}
		if !transient(err) || s.opts.RetryFor < 0 || time.Since(start) >= s.opts.RetryFor || ctx.Err() != nil {
			return s.fail(op, err, tries)
		}
		s.opts.Log.Warn("database busy or unavailable, retrying", "op", op, "path", s.path, "try", tries, "err", err)
		select {
		case <-ctx.Done():
			return s.fail(op, err, tries)
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// Error is a failed database operation.
type Error struct {
	// Op is what was being done ("recording the check run of attempt 3").
	Op   string
	Path string
	// Tries is how often it was tried.
	Tries int
	Err   error
}

func (e *Error) Error() string {
	tried := ""
	if e.Tries > 1 {
		tried = fmt.Sprintf(" (tried %d times)", e.Tries)
	}
	return fmt.Sprintf("database %s: %s: %s%s", e.Path, e.Op, explain(e.Err), tried)
}

func (e *Error) Unwrap() error { return e.Err }

func (s *Store) fail(op string, err error, tries int) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Op: op, Path: s.path, Tries: tries, Err: err}
}

// code is the primary SQLite result code of err, or 0.
func code(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	return 0
}

// transient tells errors worth retrying: the database is locked by another
// connection or process, or the file was briefly unreachable.
func transient(err error) bool {
	switch code(err) {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PROTOCOL:
		return true
	}
	return false
}

// explain says what err means for the person running svclab.
func explain(err error) string {
	switch code(err) {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return "the database is locked by another svclab process that holds it too long (" + err.Error() + ")"
	case sqlite3.SQLITE_FULL:
		return "the disk is full (" + err.Error() + ")"
	case sqlite3.SQLITE_READONLY:
		return "the database file is read-only; check its permissions and the file system (" + err.Error() + ")"
	case sqlite3.SQLITE_CANTOPEN:
		return "cannot open the database file; check that its directory exists and is writable (" + err.Error() + ")"
	case sqlite3.SQLITE_IOERR:
		return "an I/O error reading or writing the database file (" + err.Error() + ")"
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return "the file is not a usable svclab database (damaged, or another kind of file); move it away and svclab starts a new one (" + err.Error() + ")"
	}
	return err.Error()
}
