// Package class is svclab's classroom: an instructor's class of learners,
// each with their own lab cluster, a live board of where everyone is, and
// exams.
//
// An instructor creates a class with "svclab class create": its scenarios
// (a track, or an exam's weighted tasks), its capacity (labs at once), seats,
// a warm pool size, the per-learner time limit and idle timeout. svclab
// prints the join code and link, and the instructor token once; only the
// token's SHA-256 is stored, and it is compared in constant time. Learners
// join with the code and a display name — no accounts — and get a learner
// token (their cookie), stored hashed the same way. Wrong or expired codes,
// closed and full classes, and taken names are refused with messages for
// the learner.
//
// A Classroom is one open class while svclab serves it; the web UI mounts
// it. Its lab manager (lab/class/labs) gives every learner their own
// cluster through cluster.Provider, with the queue, warm pool, reclaim and
// admission control; its Board is learners × scenarios (not started,
// working, checks passing, solved; time spent, hints used, the last check
// run) as a snapshot and a change stream (lab/class/stream), fed by the
// learners' attempts and labs, which also carries the messages and hints
// the instructor pushes. Exams score the last check run of each task with
// partial credit per check and open a review with the reference solutions
// and explanations once they end.
//
// Authorize is the one decision every learner-scoped route and stream of
// the web UI goes through: a learner reaches their own lab only, the
// instructor reads every lab of their class, anybody else is refused.
// The server limits how often the join and check endpoints may be used
// (server/ratelimit).
//
// Classes live in the database lab/store uses — svclab.db in the state
// directory, or the PostgreSQL database of --database-url
// (SVCLAB_DATABASE_URL) — in tables of their own with their own migration
// history (class_schema_migrations): lab/store numbers its migrations for
// itself and refuses versions it does not know. The queries and migrations
// are written once for both databases through lab/store/sqldb: writes are
// serialized transactions, migrations hold the migration lock, and reads
// and writes are retried while the database is locked or the server is
// briefly unreachable. The clusters a class owns are
// recorded there before they are created, so the next start (or "svclab
// class close") deletes what a crash left behind.
package class
