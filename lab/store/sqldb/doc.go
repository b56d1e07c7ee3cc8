// Package sqldb is the small dialect layer under lab/store and lab/class:
// svclab's data lives either in a SQLite file in the state directory (the
// default; modernc.org/sqlite) or in a PostgreSQL database
// (--database-url postgres://..., env SVCLAB_DATABASE_URL; pgx through
// database/sql), and both packages write their queries and migrations
// once, for both.
//
// What differs is handled here, explicitly and nowhere else:
//
//   - Placeholders: queries use ?, rewritten to $1, $2, ... for
//     PostgreSQL.
//   - Schema types: migrations are written with SQLite's types; Schema
//     turns "id INTEGER PRIMARY KEY" (SQLite's rowid) into an identity
//     column, INTEGER into BIGINT (times are Unix milliseconds), REAL into
//     DOUBLE PRECISION and BLOB into BYTEA.
//   - Booleans are stored as 0 and 1 in INTEGER columns; bool arguments
//     are passed to PostgreSQL as numbers.
//   - Transactions: a Write transaction is BEGIN IMMEDIATE on SQLite (one
//     writer at a time) and SERIALIZABLE on PostgreSQL, whose
//     serialization failures are Transient, so callers retry the whole
//     transaction and code that reads then writes is correct on both. A
//     Migrate transaction on PostgreSQL first takes an advisory lock, so
//     two processes migrating one database at once apply each migration
//     once.
//   - Errors: Transient (worth retrying the whole transaction: locked,
//     server unreachable or restarting, connection lost, serialization
//     failure), IsUniqueViolation, IsForeignKeyViolation and Explain
//     (what an error means, in words for the person running svclab).
//
// Both dialects accept the rest as written: ON CONFLICT ... DO NOTHING and
// DO UPDATE SET x = excluded.x, RETURNING, partial unique indexes,
// COALESCE, subqueries.
//
// A PostgreSQL server that goes away: queries fail with connection errors,
// database/sql drops the broken connections and opens new ones once the
// server is back, and the callers' retry loops carry a transaction over a
// short outage. A commit whose answer was lost is not retried (it may
// have been stored): it fails with an UncertainCommitError.
package sqldb
