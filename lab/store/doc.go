// Package store is svclab's persistence: learners, their attempts at
// scenarios, every check run with its per-check results, the hints shown,
// the baseline each attempt's rightFix checks compare with, and the web UI's
// sessions — what outlives a process. They live in one database:
// svclab.db in the state directory (SQLite, the pure-Go modernc.org/sqlite
// driver) by default, or a PostgreSQL database (pgx) when svclab is given
// --database-url postgres://... or SVCLAB_DATABASE_URL (Location picks).
// Both run the same migrations and queries; lab/store/sqldb is the small,
// explicit dialect layer between them (placeholders, column types,
// transaction kinds, error classes).
//
// Open creates a missing SQLite file (WAL, a busy timeout) and brings the
// schema up to date: the migrations (migrations.go) are numbered, each
// runs in its own transaction holding the migration lock (SQLite's
// BEGIN IMMEDIATE; on PostgreSQL an advisory lock, so processes migrating
// one database at once apply each migration once) and is recorded in
// schema_migrations, so a database of any earlier version — or none — ends
// at the current one, and a database from a newer svclab is refused rather
// than touched.
//
// Every write is a short transaction, serialized with the others (SQLite:
// one writer at a time; PostgreSQL: SERIALIZABLE). When it fails with a
// transient error — the file locked by another process for longer than the
// busy timeout, a transient I/O error, a PostgreSQL server that is
// unreachable or restarting, a broken connection, a serialization
// failure — the whole transaction is retried with backoff for up to
// Options.RetryFor: safe, since a failed transaction changed nothing.
// database/sql replaces broken connections, so once a restarted server is
// back the next try works. A commit whose answer was lost is not retried
// (it may have been stored). Other errors are returned at once. Errors say
// what was being stored and which database (a URL without its password),
// in words a learner can act on ("the database /var/lib/svclab/svclab.db
// is locked by another process", "the disk is full", "cannot reach the
// PostgreSQL server of --database-url").
package store
