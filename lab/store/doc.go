// Package store is svclab's persistence: one SQLite database (the pure-Go
// modernc.org/sqlite driver, through database/sql) in the state directory,
// svclab.db, holding what outlives a process — learners, their attempts at
// scenarios, every check run with its per-check results, the hints shown,
// the baseline each attempt's rightFix checks compare with, and the web UI's
// sessions.
//
// Open creates the file when it is missing, switches it to WAL (readers
// never wait for the writer), sets a busy timeout and brings the schema up
// to date: the migrations (migrations.go) are numbered, each runs in its own
// immediate transaction and is recorded in schema_migrations, so a database
// of any earlier version — or none — ends at the current one, and a
// database from a newer svclab is refused rather than touched.
//
// Every write is a short transaction. When the database is locked for longer
// than the busy timeout (another svclab holding it) or fails with a
// transient I/O error, the whole transaction is retried with backoff — safe,
// since a failed transaction changed nothing; other errors are returned at
// once. Errors say what was being stored and which file, in words a learner
// can act on ("the database /var/lib/svclab/svclab.db is locked by another
// process", "the disk is full").
package store
