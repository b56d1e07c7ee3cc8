package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/svclab/svclab/lab/store/sqldb"
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
	db       *sqldb.DB
	path     string
	location string
	opts     Options
}

// EnvDatabaseURL is the environment variable that, like --database-url,
// puts svclab's data in a PostgreSQL database.
const EnvDatabaseURL = "SVCLAB_DATABASE_URL"

// Location is where svclab's database is: databaseURL (a PostgreSQL URL,
// from --database-url or SVCLAB_DATABASE_URL) when set, else svclab.db in
// stateDir.
func Location(stateDir, databaseURL string) string {
	if databaseURL != "" {
		return databaseURL
	}
	return DefaultPath(stateDir)
}

// Open opens the database at location — a PostgreSQL URL
// (postgres://...) or the path of a SQLite file, created (with its
// directory) when missing — and migrates its schema to SchemaVersion.
func Open(ctx context.Context, location string, opts Options) (*Store, error) {
	s, err := open(ctx, location, opts)
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
func open(ctx context.Context, location string, opts Options) (*Store, error) {
	opts.defaults()
	if location == "" {
		return nil, errors.New("store: no database path")
	}
	if !sqldb.IsURL(location) {
		// Other processes, in other directories, may be told where it is.
		if abs, err := filepath.Abs(location); err == nil {
			location = abs
		}
	}
	db, err := sqldb.Open(location, sqldb.Options{BusyTimeout: opts.BusyTimeout})
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	s := &Store{db: db, path: db.Display(), location: location, opts: opts}
	if err := s.retry(ctx, "opening the database", db.Ping); err != nil {
		db.Close()
		return nil, err
	}
	if db.Created {
		// The database holds web session ids: keep it to its owner.
		_ = os.Chmod(s.path, 0o600)
	}
	return s, nil
}

// Path is the database: the SQLite file, or the PostgreSQL URL without
// its password.
func (s *Store) Path() string { return s.path }

// Location is where the database is, as Open was given it (a PostgreSQL
// URL keeps its password: it is for other svclab processes of the same
// user, never for display).
func (s *Store) Location() string { return s.location }

// Dialect is the database's dialect.
func (s *Store) Dialect() sqldb.Dialect { return s.db.Dialect() }

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
// own transaction holding the migration lock.
func (s *Store) migrate(ctx context.Context, migs []migration, target int) error {
	err := s.tx(ctx, sqldb.Migrate, "preparing the schema table", func(ctx context.Context, tx *sqldb.Tx) error {
		_, err := tx.ExecContext(ctx, s.db.Schema(`CREATE TABLE IF NOT EXISTS schema_migrations (
			version INTEGER PRIMARY KEY,
			name TEXT NOT NULL,
			applied_at INTEGER NOT NULL
		)`))
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
		err := s.tx(ctx, sqldb.Migrate, fmt.Sprintf("migrating the schema to version %d (%s)", m.Version, m.Name), func(ctx context.Context, tx *sqldb.Tx) error {
			var have int
			if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
				return err
			}
			if have > known {
				return fmt.Errorf("the database was written by a newer svclab (schema version %d; this svclab knows versions up to %d): upgrade svclab, or use another --state-dir or --database-url", have, known)
			}
			if have >= m.Version {
				return nil // another process got here first
			}
			for _, stmt := range m.SQL {
				if _, err := tx.ExecContext(ctx, s.db.Schema(stmt)); err != nil {
					return fmt.Errorf("%s: %w", firstLine(stmt), err)
				}
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`, m.Version, m.Name, s.now())
			if err == nil {
				s.opts.Log.Debug("migrated the database schema", "database", s.path, "version", m.Version, "name", m.Name)
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
		return s.fail("opening the database", fmt.Errorf("the database was written by a newer svclab (schema version %d; this svclab knows versions up to %d): upgrade svclab, or use another --state-dir or --database-url", v, known), 1)
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

// write runs fn in a write transaction (serialized with every other
// writer), retrying the whole transaction on transient errors.
func (s *Store) write(ctx context.Context, op string, fn func(context.Context, *sqldb.Tx) error) error {
	return s.tx(ctx, sqldb.Write, op, fn)
}

func (s *Store) tx(ctx context.Context, kind sqldb.TxKind, op string, fn func(context.Context, *sqldb.Tx) error) error {
	return s.retry(ctx, op, func(ctx context.Context) error {
		return s.db.InTx(ctx, kind, func(tx *sqldb.Tx) error { return fn(ctx, tx) })
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
		if !sqldb.Transient(err) || s.opts.RetryFor < 0 || time.Since(start) >= s.opts.RetryFor || ctx.Err() != nil {
			return s.fail(op, err, tries)
		}
		s.opts.Log.Warn("database busy or unavailable, retrying", "op", op, "database", s.path, "try", tries, "err", err)
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

// explain says what err means for the person running svclab.
func explain(err error) string {
	if why := sqldb.Explain(err); why != "" {
		return why + " (" + err.Error() + ")"
	}
	return err.Error()
}
