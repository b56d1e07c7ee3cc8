package store

import "github.com/svclab/svclab/lab/store/sqldb"

// A migration moves the schema from version Version-1 to Version (one
// runner for svclab's tables and the class tables: sqldb.Migrate). The
// SQL sticks to what SQLite and PostgreSQL share where it can (times are
// Unix milliseconds in INTEGER columns).
type migration = sqldb.Migration

// migrations are the schema's history, in order, numbered from 1.
var migrations = []migration{
	{Version: 1, Name: "learners, attempts and check runs", SQL: []string{
		`CREATE TABLE learners (
			id INTEGER PRIMARY KEY,
			name TEXT NOT NULL UNIQUE,
			display_name TEXT NOT NULL,
			created_at INTEGER NOT NULL
		)`,
		`CREATE TABLE attempts (
			id INTEGER PRIMARY KEY,
			learner_id INTEGER NOT NULL REFERENCES learners(id) ON DELETE CASCADE,
			scenario_id TEXT NOT NULL,
			cluster TEXT NOT NULL,
			backend TEXT NOT NULL,
			started_at INTEGER NOT NULL,
			finished_at INTEGER,
			state TEXT NOT NULL CHECK (state IN ('running', 'passed', 'errored', 'abandoned')),
			score REAL NOT NULL DEFAULT 0,
			max_score REAL NOT NULL DEFAULT 0,
			error TEXT NOT NULL DEFAULT ''
		)`,
		`CREATE INDEX attempts_by_learner_scenario ON attempts (learner_id, scenario_id, id)`,
		`CREATE TABLE check_runs (
			id INTEGER PRIMARY KEY,
			attempt_id INTEGER NOT NULL REFERENCES attempts(id) ON DELETE CASCADE,
			at INTEGER NOT NULL,
			duration_ms INTEGER NOT NULL,
			passed INTEGER NOT NULL,
			score REAL NOT NULL,
			max_score REAL NOT NULL
		)`,
		`CREATE INDEX check_runs_by_attempt ON check_runs (attempt_id, id)`,
		`CREATE TABLE check_results (
			check_run_id INTEGER NOT NULL REFERENCES check_runs(id) ON DELETE CASCADE,
			seq INTEGER NOT NULL,
			check_id TEXT NOT NULL,
			kind TEXT NOT NULL,
			weight REAL NOT NULL,
			passed INTEGER NOT NULL,
			message TEXT NOT NULL,
			detail TEXT NOT NULL,
			error TEXT NOT NULL,
			duration_ms INTEGER NOT NULL,
			PRIMARY KEY (check_run_id, seq)
		)`,
	}},
	{Version: 2, Name: "hints shown, baselines, what triggered a check run, reference solutions used", SQL: []string{
		`CREATE TABLE hints_shown (
			attempt_id INTEGER NOT NULL REFERENCES attempts(id) ON DELETE CASCADE,
			hint INTEGER NOT NULL,
			shown_at INTEGER NOT NULL,
			reason TEXT NOT NULL CHECK (reason IN ('requested', 'unlocked')),
			PRIMARY KEY (attempt_id, hint)
		)`,
		`CREATE TABLE attempt_baselines (
			attempt_id INTEGER PRIMARY KEY REFERENCES attempts(id) ON DELETE CASCADE,
			taken_at INTEGER NOT NULL,
			data BLOB NOT NULL
		)`,
		`ALTER TABLE check_runs ADD COLUMN triggered_by TEXT NOT NULL DEFAULT 'learner'`,
		`ALTER TABLE attempts ADD COLUMN solution_used_at INTEGER`,
	}},
	{Version: 3, Name: "web sessions", SQL: []string{
		`CREATE TABLE web_sessions (
			id TEXT PRIMARY KEY,
			learner_id INTEGER NOT NULL REFERENCES learners(id) ON DELETE CASCADE,
			created_at INTEGER NOT NULL,
			last_seen_at INTEGER NOT NULL
		)`,
		`CREATE INDEX web_sessions_by_last_seen ON web_sessions (last_seen_at)`,
	}},
	{Version: 4, Name: "one running attempt per cluster", SQL: []string{
		// Earlier versions only checked this in code, so two processes
		// could both start on one cluster: the newest attempt keeps it.
		`UPDATE attempts SET state = 'abandoned', finished_at = COALESCE(finished_at, started_at)
			WHERE state = 'running' AND id NOT IN (SELECT MAX(id) FROM attempts WHERE state = 'running' GROUP BY backend, cluster)`,
		`CREATE UNIQUE INDEX attempts_one_running_per_cluster ON attempts (backend, cluster) WHERE state = 'running'`,
	}},
	{Version: 5, Name: "attempt timelines, for replay and audit", SQL: []string{
		`CREATE TABLE attempt_events (
			id INTEGER PRIMARY KEY,
			attempt_id INTEGER NOT NULL REFERENCES attempts(id) ON DELETE CASCADE,
			at INTEGER NOT NULL,
			kind TEXT NOT NULL,
			source TEXT NOT NULL,
			level TEXT NOT NULL,
			text TEXT NOT NULL
		)`,
		`CREATE INDEX attempt_events_by_attempt ON attempt_events (attempt_id, id)`,
	}},
	{Version: 6, Name: "learners' answers to answer checks", SQL: []string{
		`CREATE TABLE attempt_answers (
			attempt_id INTEGER NOT NULL REFERENCES attempts(id) ON DELETE CASCADE,
			check_id TEXT NOT NULL,
			text TEXT NOT NULL,
			answered_at INTEGER NOT NULL,
			PRIMARY KEY (attempt_id, check_id)
		)`,
	}},
}

// SchemaVersion is the schema version this svclab writes.
func SchemaVersion() int { return migrations[len(migrations)-1].Version }
