package sqldb

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Retry says how an operation that failed with a transient error
// (Transient: locked, I/O, the server briefly away, a serialization
// failure) is tried again. lab/store and lab/class share it.
type Retry struct {
	// For bounds how long the operation is retried (negative: not at
	// all).
	For time.Duration
	// Log gets a warning per retry (nil: none); Display names the
	// database in it.
	Log     *slog.Logger
	Display string
}

// Do runs fn until it succeeds, fails with an error that is not
// transient, has been retried for r.For, or ctx ends. It returns how often
// fn ran and its last error.
func (r Retry) Do(ctx context.Context, op string, fn func(context.Context) error) (tries int, err error) {
	start := time.Now()
	delay := 50 * time.Millisecond
	for tries = 1; ; tries++ {
		err = fn(ctx)
		if err == nil || !Transient(err) || r.For < 0 || time.Since(start) >= r.For || ctx.Err() != nil {
			return tries, err
		}
		if r.Log != nil {
			r.Log.Warn("database busy or unavailable, retrying", "op", op, "database", r.Display, "try", tries, "err", err)
		}
		select {
		case <-ctx.Done():
			return tries, err
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// Tx runs fn in a transaction of kind, retried as r says (a failed
// transaction changed nothing).
func (d *DB) Tx(ctx context.Context, r Retry, kind TxKind, op string, fn func(context.Context, *Tx) error) (tries int, err error) {
	return r.Do(ctx, op, func(ctx context.Context) error {
		return d.InTx(ctx, kind, func(tx *Tx) error { return fn(ctx, tx) })
	})
}

// Migration moves a schema from version Version-1 to Version. Its
// statements run in one transaction together with the row that records
// it. Never edit a migration that has been released: add a new one.
type Migration struct {
	Version int
	Name    string
	SQL     []string
}

// Schema is a set of tables with its own migration history.
type Schema struct {
	// Table records the applied migrations (version, name, applied_at).
	Table string
	// What names the tables in messages ("the schema", "the class
	// tables").
	What string
	// Migrations are the history, numbered from 1.
	Migrations []Migration
}

// Known is the newest version s knows.
func (s Schema) Known() int {
	if len(s.Migrations) == 0 {
		return 0
	}
	return s.Migrations[len(s.Migrations)-1].Version
}

// NewerError is a database whose schema is newer than every migration
// this svclab knows.
type NewerError struct {
	What        string
	Have, Known int
}

func (e *NewerError) Error() string {
	return fmt.Sprintf("%s was written by a newer svclab (schema version %d; this svclab knows versions up to %d): upgrade svclab, or use another --state-dir or --database-url",
		e.What, e.Have, e.Known)
}

// Version is the newest migration of s applied to the database (0: none,
// or no history table yet).
func (d *DB) Version(ctx context.Context, r Retry, s Schema) (int, error) {
	var v int
	_, err := r.Do(ctx, "reading the schema version of "+s.What, func(ctx context.Context) error {
		return d.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM `+s.Table).Scan(&v)
	})
	return v, err
}

// Migrate applies the migrations of s up to version target, each
// in its own transaction holding the database's migration lock (kind
// Migrate), so that processes opening the database at once apply each
// once. A database newer than every migration s knows is refused with a
// *NewerError. op, when an operation fails, says which; now stamps the
// history rows.
func (d *DB) Migrate(ctx context.Context, r Retry, s Schema, target int, now func() time.Time) (op string, err error) {
	op = "preparing " + s.What
	if _, err := d.Tx(ctx, r, Migrate, op, func(ctx context.Context, tx *Tx) error {
		_, err := tx.ExecContext(ctx, d.Schema(`CREATE TABLE IF NOT EXISTS `+s.Table+` (
			version INTEGER PRIMARY KEY,
			name TEXT NOT NULL,
			applied_at INTEGER NOT NULL
		)`))
		return err
	}); err != nil {
		return op, err
	}
	known := s.Known()
	for i, m := range s.Migrations {
		if m.Version != i+1 {
			return "checking the migrations", fmt.Errorf("migration %d (%s) of %s is numbered %d", i+1, m.Name, s.What, m.Version)
		}
		if m.Version > target {
			break
		}
		op = fmt.Sprintf("migrating %s to version %d (%s)", s.What, m.Version, m.Name)
		_, err := d.Tx(ctx, r, Migrate, op, func(ctx context.Context, tx *Tx) error {
			var have int
			if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM `+s.Table).Scan(&have); err != nil {
				return err
			}
			if have > known {
				return &NewerError{What: s.What, Have: have, Known: known}
			}
			if have >= m.Version {
				return nil // another process got here first
			}
			for _, stmt := range m.SQL {
				if _, err := tx.ExecContext(ctx, d.Schema(stmt)); err != nil {
					return fmt.Errorf("%s: %w", firstLine(stmt), err)
				}
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO `+s.Table+` (version, name, applied_at) VALUES (?, ?, ?)`, m.Version, m.Name, now().UnixMilli())
			if err == nil && r.Log != nil {
				r.Log.Debug("migrated a database schema", "database", r.Display, "schema", s.What, "version", m.Version, "name", m.Name)
			}
			return err
		})
		if err != nil {
			return op, err
		}
	}
	// A database newer than every migration s knows is refused too.
	op = "opening " + s.What
	v, err := d.Version(ctx, r, s)
	if err != nil {
		return op, err
	}
	if v > known {
		return op, &NewerError{What: s.What, Have: v, Known: known}
	}
	return "", nil
}

// firstLine is a statement's first line, for a message.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSuffix(s, " (")
}
