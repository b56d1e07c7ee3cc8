package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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
	if err := s.read(ctx, "opening the database", db.Ping); err != nil {
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
	v, err := s.db.Version(ctx, s.retrier(), tables(nil))
	if err != nil {
		return 0, s.fail("reading the schema version", err, 1)
	}
	return v, nil
}

// tables is svclab's own tables, with migs as their history (nil: the
// real one).
func tables(migs []migration) sqldb.Schema {
	if migs == nil {
		migs = migrations
	}
	return sqldb.Schema{Table: "schema_migrations", What: "the schema", Migrations: migs}
}

// migrate applies the migrations of migs up to version target, each in its
// own transaction holding the migration lock.
func (s *Store) migrate(ctx context.Context, migs []migration, target int) error {
	if op, err := s.db.Migrate(ctx, s.retrier(), tables(migs), target, s.opts.Now); err != nil {
		return s.fail(op, err, 1)
	}
	return nil
}

func (s *Store) now() int64 { return s.opts.Now().UnixMilli() }

// retrier is how the store retries what failed for a moment.
func (s *Store) retrier() sqldb.Retry {
	return sqldb.Retry{For: s.opts.RetryFor, Log: s.opts.Log, Display: s.path}
}

// write runs fn in a write transaction (serialized with every other
// writer), retrying the whole transaction on transient errors.
func (s *Store) write(ctx context.Context, op string, fn func(context.Context, *sqldb.Tx) error) error {
	return s.tx(ctx, sqldb.Write, op, fn)
}

func (s *Store) tx(ctx context.Context, kind sqldb.TxKind, op string, fn func(context.Context, *sqldb.Tx) error) error {
	tries, err := s.db.Tx(ctx, s.retrier(), kind, op, fn)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return s.fail(op, err, tries)
	}
	return err
}

// read runs fn (queries only), retrying on transient errors.
func (s *Store) read(ctx context.Context, op string, fn func(context.Context) error) error {
	tries, err := s.retrier().Do(ctx, op, fn)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return s.fail(op, err, tries)
	}
	return err
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
