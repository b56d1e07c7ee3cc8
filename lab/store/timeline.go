package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/svclab/svclab/lab/store/sqldb"
)

// Event is one entry of an attempt's timeline: a terminal command, a
// Kubernetes or proxier event, a rule change, a check run. The timeline is
// what replay steps through and what audits read.
type Event struct {
	Seq    int64
	At     time.Time
	Kind   string
	Source string
	Level  string
	Text   string
}

// MaxEventText bounds one event's text, MaxEventSource its source;
// longer ones are cut (what a timeline records may come from a lab).
const (
	MaxEventText   = 4000
	MaxEventSource = 256
)

// clip cuts s to at most n bytes (of whole UTF-8 characters), marking the
// cut with "…".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// AppendEvents adds events to attempt id's timeline, in order.
func (s *Store) AppendEvents(ctx context.Context, id int64, events []Event) error {
	if len(events) == 0 {
		return nil
	}
	return s.write(ctx, fmt.Sprintf("recording %d timeline events of attempt %d", len(events), id), func(ctx context.Context, tx *sqldb.Tx) error {
		for _, e := range events {
			text := clip(e.Text, MaxEventText)
			at := e.At
			if at.IsZero() {
				at = time.UnixMilli(s.now())
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO attempt_events (attempt_id, at, kind, source, level, text) VALUES (?, ?, ?, ?, ?, ?)`,
				id, at.UnixMilli(), clip(e.Kind, 32), clip(e.Source, MaxEventSource), clip(e.Level, 32), text); err != nil {
				if sqldb.IsForeignKeyViolation(err) {
					return fmt.Errorf("attempt %d: %w", id, ErrNotFound)
				}
				return err
			}
		}
		return nil
	})
}

// Events lists attempt id's timeline by time (events of one moment in
// the order they were recorded).
func (s *Store) Events(ctx context.Context, id int64) ([]Event, error) {
	var out []Event
	err := s.read(ctx, fmt.Sprintf("reading the timeline of attempt %d", id), func(ctx context.Context) error {
		out = nil
		rows, err := s.db.QueryContext(ctx, `SELECT id, at, kind, source, level, text FROM attempt_events WHERE attempt_id = ? ORDER BY at, id`, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e Event
			var at int64
			if err := rows.Scan(&e.Seq, &at, &e.Kind, &e.Source, &e.Level, &e.Text); err != nil {
				return err
			}
			e.At = time.UnixMilli(at)
			out = append(out, e)
		}
		return rows.Err()
	})
	return out, err
}
