package server

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/store"
	"github.com/svclab/svclab/lab/views"
)

// TestTimelineFlood pastes 64 KiB of command lines into one learner's
// terminal: their timeline keeps a bounded number of rows and a note of
// what it did not keep, and another learner, typing meanwhile, loses
// nothing.
func TestTimelineFlood(t *testing.T) {
	tl := &memTimeline{}
	s := &Server{Log: slog.New(slog.DiscardHandler), Timeline: tl}
	flood := &commandRecorder{record: func(cmd string) {
		s.record(1, views.TimelineEvent{Kind: views.KindCommand, Source: "n", Text: cmd})
	}}
	var paste strings.Builder
	for paste.Len() < 64<<10 {
		paste.WriteString("k\n")
	}
	lines := strings.Count(paste.String(), "\n")
	for i := 0; i < 50; i++ {
		flood.feed([]byte(paste.String()[:paste.Len()/50*(i+1)][paste.Len()/50*i:]))
		s.record(2, views.TimelineEvent{Kind: views.KindCommand, Source: "n", Text: "kubectl get pods"})
	}
	s.flushTimeline()
	got := tl.events(1)
	if len(got) > timelineBurst+10 {
		t.Errorf("a paste of %d lines left %d rows on the timeline", lines, len(got))
	}
	note := ""
	for _, e := range got {
		if e.Kind == KindTimeline {
			note = e.Text
		}
	}
	// The count comes with the next event kept.
	if note != "" && !strings.Contains(note, "not kept") {
		t.Errorf("the note: %q", note)
	}
	if other := tl.events(2); len(other) != 50 {
		t.Errorf("the other learner's timeline kept %d of 50 events", len(other))
	}
}

func TestTimelineBudget(t *testing.T) {
	var r recorder
	at := time.Unix(1000, 0)
	ev := func() store.Event { return store.Event{At: at, Kind: views.KindCommand, Text: "x"} }
	kept := 0
	for i := 0; i < 1000; i++ {
		kept += len(r.admit(7, ev()))
	}
	if kept != timelineBurst {
		t.Errorf("%d of 1000 events at once kept, want the burst %d", kept, timelineBurst)
	}
	at = at.Add(time.Second)
	out := r.admit(7, ev())
	if len(out) != 2 || out[0].Kind != KindTimeline || !strings.Contains(out[0].Text, "800 events were not kept") {
		t.Errorf("after the flood: %+v", out)
	}
	// The attempt's cap ends with one note.
	notes := 0
	for i := 0; i < 2*MaxAttemptEvents; i++ {
		at = at.Add(time.Second)
		for _, e := range r.admit(7, ev()) {
			if strings.Contains(e.Text, "is full") {
				notes++
			}
		}
	}
	if b := r.budgets[7]; b.kept != MaxAttemptEvents || notes != 1 {
		t.Errorf("kept %d events and %d notes of a full timeline, want %d and 1", b.kept, notes, MaxAttemptEvents)
	}
}

func TestTerminalCounts(t *testing.T) {
	var tc terminalCounts
	var releases []func()
	for i := 0; i < maxTerminalsPerLearner; i++ {
		r, ok := tc.take("ann")
		if !ok {
			t.Fatalf("terminal %d refused", i+1)
		}
		releases = append(releases, r)
	}
	if _, ok := tc.take("ann"); ok {
		t.Error("a terminal past the cap was let through")
	}
	if r, ok := tc.take("bob"); !ok {
		t.Error("another learner was refused because of Ann's terminals")
	} else {
		r()
	}
	releases[0]()
	if _, ok := tc.take("ann"); !ok {
		t.Error("a terminal after one closed was refused")
	}
}

func TestOperationsPruned(t *testing.T) {
	var ops operations
	old := ops.start(t.Context(), "", "old", "", func(context.Context, *Operation) error { return nil })
	ops.wait()
	old.mu.Lock()
	old.finished = time.Now().Add(-2 * opRetention)
	old.mu.Unlock()
	running := make(chan struct{})
	ops.start(t.Context(), "", "running", "", func(context.Context, *Operation) error { <-running; return nil })
	if _, ok := ops.get(old.ID); ok {
		t.Error("an operation that ended long ago is still kept")
	}
	close(running)
	ops.wait()
}
