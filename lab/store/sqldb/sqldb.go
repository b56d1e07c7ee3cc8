package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver "pgx"
	"modernc.org/sqlite"               // also the database/sql driver "sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Dialect is the SQL database behind a DB.
type Dialect int

const (
	// SQLite is a file (modernc.org/sqlite).
	SQLite Dialect = iota
	// Postgres is a PostgreSQL server (pgx).
	Postgres
)

func (d Dialect) String() string {
	if d == Postgres {
		return "PostgreSQL"
	}
	return "SQLite"
}

// IsURL tells a PostgreSQL URL (postgres:// or postgresql://) from a
// SQLite file path.
func IsURL(location string) bool {
	return strings.HasPrefix(location, "postgres://") || strings.HasPrefix(location, "postgresql://")
}

// Display is location as svclab shows it: a SQLite path made absolute, a
// PostgreSQL URL without its password.
func Display(location string) string {
	if IsURL(location) {
		u, err := url.Parse(location)
		if err != nil {
			return "the PostgreSQL database (an unparsable URL)"
		}
		if _, has := u.User.Password(); has {
			u.User = url.User(u.User.Username())
		}
		return u.String()
	}
	if abs, err := filepath.Abs(location); err == nil {
		return abs
	}
	return location
}

// Options configure Open.
type Options struct {
	// BusyTimeout is how long SQLite waits for another connection's lock
	// (default 5s).
	BusyTimeout time.Duration
	// MaxOpenConns bounds the pool (default 4 for SQLite, 8 for
	// PostgreSQL).
	MaxOpenConns int
}

// DB is an open database of either dialect. Queries are written once, in
// the SQL both accept, with ? placeholders; DB rewrites what differs.
type DB struct {
	db      *sql.DB
	dialect Dialect
	display string
	// Created is true when Open created a new SQLite file.
	Created bool
}

// Open opens the database at location: a PostgreSQL URL
// (postgres://user:password@host:port/dbname?sslmode=...), or else the path
// of a SQLite file, which is created (with its directory) when missing and
// switched to WAL. It does not connect: call Ping.
func Open(location string, opts Options) (*DB, error) {
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 5 * time.Second
	}
	if IsURL(location) {
		return openPostgres(location, opts)
	}
	return openSQLite(location, opts)
}

func openPostgres(location string, opts Options) (*DB, error) {
	display := Display(location)
	u, err := url.Parse(location)
	if err != nil {
		return nil, fmt.Errorf("the database URL %s cannot be parsed: %w (write it as postgres://USER:PASSWORD@HOST:PORT/DATABASE)", display, err)
	}
	q := u.Query()
	if q.Get("connect_timeout") == "" {
		// An unreachable host fails in seconds, not minutes.
		q.Set("connect_timeout", "5")
	}
	u.RawQuery = q.Encode()
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		return nil, fmt.Errorf("the database URL %s: %w", display, err)
	}
	if opts.MaxOpenConns <= 0 {
		opts.MaxOpenConns = 8
	}
	db.SetMaxOpenConns(opts.MaxOpenConns)
	db.SetConnMaxIdleTime(time.Minute)
	return &DB{db: db, dialect: Postgres, display: display}, nil
}

func openSQLite(path string, opts Options) (*DB, error) {
	if path == "" {
		return nil, errors.New("no database path")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("the database path %q contains ? or #; choose a --state-dir without them", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, fmt.Errorf("creating the directory of the database %s: %w (choose another with --state-dir)", abs, err)
	}
	_, statErr := os.Stat(abs)
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
		return nil, fmt.Errorf("opening %s: %w", abs, err)
	}
	if opts.MaxOpenConns <= 0 {
		opts.MaxOpenConns = 4
	}
	db.SetMaxOpenConns(opts.MaxOpenConns)
	db.SetConnMaxIdleTime(time.Minute)
	return &DB{db: db, dialect: SQLite, display: abs, Created: errors.Is(statErr, os.ErrNotExist)}, nil
}

// Dialect is the database's dialect.
func (d *DB) Dialect() Dialect { return d.dialect }

// Display is the database as svclab shows it (the file, or the URL
// without its password).
func (d *DB) Display() string { return d.display }

// Raw is the database/sql handle, for what DB does not wrap (tests).
func (d *DB) Raw() *sql.DB { return d.db }

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// Ping connects.
func (d *DB) Ping(ctx context.Context) error { return d.db.PingContext(ctx) }

// ExecContext runs a statement.
func (d *DB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return d.db.ExecContext(ctx, d.rebind(query), d.args(args)...)
}

// QueryContext runs a query.
func (d *DB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return d.db.QueryContext(ctx, d.rebind(query), d.args(args)...)
}

// QueryRowContext runs a query that returns one row.
func (d *DB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return d.db.QueryRowContext(ctx, d.rebind(query), d.args(args)...)
}

// TxKind is what a transaction is for.
type TxKind int

const (
	// Write transactions are serialized: SQLite's BEGIN IMMEDIATE (one
	// writer at a time), PostgreSQL's SERIALIZABLE isolation (a conflict
	// fails with a serialization failure, which Transient reports, and the
	// caller retries the whole transaction). Code that reads a row and
	// then writes depending on it is correct on both.
	Write TxKind = iota
	// Migrate transactions hold the database's migration lock — a
	// PostgreSQL advisory lock, taken first, at READ COMMITTED so that
	// what the holder before committed is seen — so that processes
	// migrating the same database at once apply each migration once.
	// SQLite's BEGIN IMMEDIATE serializes them already.
	Migrate
)

// migrationLock is the key of the advisory lock every svclab migration
// of a PostgreSQL database holds ("svclab" in ASCII).
const migrationLock int64 = 0x73_76_63_6c_61_62

// Tx is a transaction.
type Tx struct {
	tx *sql.Tx
	d  *DB
}

// ExecContext runs a statement in the transaction.
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, t.d.rebind(query), t.d.args(args)...)
}

// QueryContext runs a query in the transaction.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, t.d.rebind(query), t.d.args(args)...)
}

// QueryRowContext runs a query that returns one row in the transaction.
func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.d.rebind(query), t.d.args(args)...)
}

// InTx runs fn in a transaction of kind and commits it, or rolls it back
// when fn fails. When the connection to PostgreSQL breaks during the
// commit, whether the transaction was committed is unknown: the error is
// an *UncertainCommitError, which is not Transient (retrying could store
// things twice).
func (d *DB) InTx(ctx context.Context, kind TxKind, fn func(*Tx) error) error {
	var opts *sql.TxOptions
	if d.dialect == Postgres {
		opts = &sql.TxOptions{Isolation: sql.LevelSerializable}
		if kind == Migrate {
			opts.Isolation = sql.LevelReadCommitted
		}
	}
	stx, err := d.db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	tx := &Tx{tx: stx, d: d}
	if kind == Migrate && d.dialect == Postgres {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, migrationLock); err != nil {
			stx.Rollback()
			return fmt.Errorf("taking the migration lock: %w", err)
		}
	}
	if err := fn(tx); err != nil {
		stx.Rollback()
		return err
	}
	if err := stx.Commit(); err != nil {
		if d.dialect == Postgres && connectionLost(err) && !pgconn.SafeToRetry(err) {
			return &UncertainCommitError{Err: err}
		}
		return err
	}
	return nil
}

// UncertainCommitError is a commit whose outcome is unknown: the
// connection broke before the server answered.
type UncertainCommitError struct{ Err error }

func (e *UncertainCommitError) Error() string {
	return "the connection to PostgreSQL broke while committing, so the change may or may not have been stored; look before doing it again (" + e.Err.Error() + ")"
}

func (e *UncertainCommitError) Unwrap() error { return e.Err }

// rebind turns the ? placeholders of query into PostgreSQL's $1, $2, ...
// (outside quoted strings and identifiers).
func (d *DB) rebind(query string) string {
	if d.dialect != Postgres || !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	n := 0
	var quote byte
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// args adapts arguments: booleans are stored as 0 and 1 in INTEGER
// columns (SQLite has no boolean type), which PostgreSQL only accepts as
// numbers.
func (d *DB) args(args []any) []any {
	if d.dialect != Postgres {
		return args
	}
	for i, a := range args {
		if b, ok := a.(bool); ok {
			if args[i] = int64(0); b {
				args[i] = int64(1)
			}
		}
	}
	return args
}

// The schema's types as written in the migrations (SQLite's) and what
// they become on PostgreSQL. A column "id INTEGER PRIMARY KEY" is SQLite's
// rowid, numbered by the database; PostgreSQL's equivalent is an identity
// column. INTEGER columns hold Unix milliseconds, so they need 64 bits.
var schemaTypes = []struct {
	re   *regexp.Regexp
	repl string
}{
	{regexp.MustCompile(`\bid INTEGER PRIMARY KEY\b`), "id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"},
	{regexp.MustCompile(`\bINTEGER\b`), "BIGINT"},
	{regexp.MustCompile(`\bREAL\b`), "DOUBLE PRECISION"},
	{regexp.MustCompile(`\bBLOB\b`), "BYTEA"},
}

// Schema is a schema statement (CREATE TABLE, ALTER TABLE ... ADD
// COLUMN), written with SQLite's types, in the database's dialect.
func (d *DB) Schema(stmt string) string {
	if d.dialect != Postgres {
		return stmt
	}
	// Only outside quoted strings: split on quotes, rewrite the even
	// parts.
	parts := strings.Split(stmt, "'")
	for i := 0; i < len(parts); i += 2 {
		for _, t := range schemaTypes {
			parts[i] = t.re.ReplaceAllString(parts[i], t.repl)
		}
	}
	return strings.Join(parts, "'")
}

// pgState is the SQLSTATE of a PostgreSQL error, or "".
func pgState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// sqliteCode is the extended SQLite result code of err, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// IsUniqueViolation tells an insert or update that a UNIQUE constraint
// (or primary key) refused.
func IsUniqueViolation(err error) bool {
	switch sqliteCode(err) {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return true
	}
	return pgState(err) == "23505"
}

// IsForeignKeyViolation tells a write that a REFERENCES constraint
// refused (the row it refers to does not exist).
func IsForeignKeyViolation(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY || pgState(err) == "23503"
}

// connectionLost tells errors of a connection that failed or broke. An
// error the server answered with is one only when its SQLSTATE says so: a
// refused password or a missing database also fail the connection, and
// stay.
func connectionLost(err error) bool {
	if s := pgState(err); s != "" {
		// 08: connection exceptions; 57P01-3: the server shuts down or
		// starts.
		return strings.HasPrefix(s, "08") || s == "57P01" || s == "57P02" || s == "57P03"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ENOENT):
		return true
	}
	return false
}

// Transient tells the errors worth retrying the whole transaction for:
// a database locked by another process or briefly unreadable (SQLite), a
// server that is unreachable, restarting or refusing for now, a lost
// connection, or a serialization failure or deadlock (PostgreSQL). A
// failed transaction changed nothing, so retrying it is safe.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var uc *UncertainCommitError
	if errors.As(err, &uc) {
		return false
	}
	switch sqliteCode(err) & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PROTOCOL:
		return true
	}
	switch pgState(err) {
	case "40001", "40P01", "53300", "55P03":
		return true
	}
	if pgState(err) != "" {
		return connectionLost(err)
	}
	return connectionLost(err) || pgconn.SafeToRetry(err)
}

// Explain says what err means for the person running svclab, or "" when
// it has nothing to add.
func Explain(err error) string {
	switch sqliteCode(err) & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return "the database is locked by another svclab process that holds it too long"
	case sqlite3.SQLITE_FULL:
		return "the disk is full"
	case sqlite3.SQLITE_READONLY:
		return "the database file is read-only; check its permissions and the file system"
	case sqlite3.SQLITE_CANTOPEN:
		return "cannot open the database file; check that its directory exists and is writable"
	case sqlite3.SQLITE_IOERR:
		return "an I/O error reading or writing the database file"
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return "the file is not a usable svclab database (damaged, or another kind of file); move it away and svclab starts a new one"
	}
	var uc *UncertainCommitError
	if errors.As(err, &uc) {
		return ""
	}
	switch s := pgState(err); {
	case s == "28P01" || s == "28000":
		return "PostgreSQL refused the user or password of --database-url"
	case s == "3D000":
		return "the database of --database-url does not exist on the PostgreSQL server; create it (createdb) first"
	case s == "53100":
		return "the PostgreSQL server's disk is full"
	case s == "40001" || s == "40P01":
		return "other svclab processes kept changing the same data at the same time"
	case s == "57P01" || s == "57P02" || s == "57P03":
		return "the PostgreSQL server is shutting down or starting up"
	}
	if connectionLost(err) {
		return "cannot reach the PostgreSQL server of --database-url: it is stopped, restarting or unreachable; start it, or check the URL"
	}
	return ""
}
