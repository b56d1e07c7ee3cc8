package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/store"
	"github.com/svclab/svclab/lab/views"
	"github.com/svclab/svclab/web"
)

// Timeline keeps attempts' timelines — terminal commands, Kubernetes and
// proxier events, check runs, hints — for replay and audit. lab/store's
// Store is one.
type Timeline interface {
	AppendEvents(ctx context.Context, attemptID int64, events []store.Event) error
	Events(ctx context.Context, attemptID int64) ([]store.Event, error)
}

// timelineQueue bounds the events waiting to be written; a database that
// stalls loses events beyond it (logged) rather than slowing the learner.
const timelineQueue = 4096

type recorded struct {
	attempt int64
	event   store.Event
}

// recorder writes timeline events in the background, in batches.
type recorder struct {
	once sync.Once
	ch   chan recorded
	done chan struct{}
	mu   sync.Mutex
	shut bool
	// budgets ration each attempt's events, so that one learner's flood
	// (a 64 KiB paste is thousands of command lines) neither fills the
	// queue every learner shares nor the database.
	budgets map[int64]*timelineBudget
}

// An attempt's timeline takes timelineBurst events at once and
// timelineRate a second after that, and MaxAttemptEvents in all; what it
// does not take is counted, and the count is kept on the timeline.
const (
	timelineBurst    = 200
	timelineRate     = 20
	MaxAttemptEvents = 20000
)

// KindTimeline marks the timeline's notes about itself (events it did not
// keep).
const KindTimeline = "timeline"

type timelineBudget struct {
	tokens  float64
	last    time.Time
	kept    int
	dropped int
	full    bool
}

// admit rations attempt id's events: ev, and before it a note of what was
// dropped since the last event kept, or nothing (ev counted as dropped).
func (r *recorder) admit(id int64, ev store.Event) []store.Event {
	if r.budgets == nil {
		r.budgets = map[int64]*timelineBudget{}
	}
	now := ev.At
	b := r.budgets[id]
	if b == nil {
		b = &timelineBudget{tokens: timelineBurst, last: now}
		r.budgets[id] = b
		r.prune(now)
	}
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(timelineBurst, b.tokens+el.Seconds()*timelineRate)
		b.last = now
	}
	if b.full {
		b.dropped++
		return nil
	}
	if b.kept >= MaxAttemptEvents-1 {
		b.full = true
		b.dropped++
		b.kept++ // the note
		return []store.Event{{At: now, Kind: KindTimeline, Level: "warning",
			Text: fmt.Sprintf("the timeline of this attempt is full (%d events): later events are not kept", MaxAttemptEvents)}}
	}
	if b.tokens < 1 {
		b.dropped++
		return nil
	}
	b.tokens--
	out := []store.Event{ev}
	if b.dropped > 0 {
		out = []store.Event{{At: now, Kind: KindTimeline, Level: "warning",
			Text: fmt.Sprintf("%d events were not kept here: too many at once (a paste of many lines, a flood of cluster events)", b.dropped)}, ev}
		b.dropped = 0
	}
	b.kept += len(out)
	return out
}

// prune forgets the budgets of attempts quiet for an hour.
func (r *recorder) prune(now time.Time) {
	if len(r.budgets) < 1024 {
		return
	}
	for id, b := range r.budgets {
		if now.Sub(b.last) > time.Hour {
			delete(r.budgets, id)
		}
	}
}

// record keeps ev on attempt id's timeline (nothing without a Timeline).
func (s *Server) record(id int64, ev views.TimelineEvent) {
	if s.Timeline == nil || id == 0 {
		return
	}
	r := &s.rec
	r.once.Do(func() {
		r.ch, r.done = make(chan recorded, timelineQueue), make(chan struct{})
		go s.writeTimeline()
	})
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shut {
		return
	}
	for _, e := range r.admit(id, store.Event{At: ev.Time, Kind: ev.Kind, Source: ev.Source, Level: ev.Level, Text: ev.Text}) {
		select {
		case r.ch <- recorded{id, e}:
		default:
			s.Log.Warn("the timeline falls behind: an event was not kept", "attempt", id, "kind", ev.Kind)
		}
	}
}

func (s *Server) writeTimeline() {
	r := &s.rec
	defer close(r.done)
	for first := range r.ch {
		batch := map[int64][]store.Event{first.attempt: {first.event}}
		order := []int64{first.attempt}
	more:
		for n := 1; n < 256; n++ {
			select {
			case e, ok := <-r.ch:
				if !ok {
					break more
				}
				if _, seen := batch[e.attempt]; !seen {
					order = append(order, e.attempt)
				}
				batch[e.attempt] = append(batch[e.attempt], e.event)
			default:
				break more
			}
		}
		for _, id := range order {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := s.Timeline.AppendEvents(ctx, id, batch[id]); err != nil {
				s.Log.Warn("keeping timeline events", "attempt", id, "events", len(batch[id]), "err", err)
			}
			cancel()
		}
	}
}

// flushTimeline writes what is queued and stops the recorder (the server
// is stopping).
func (s *Server) flushTimeline() {
	r := &s.rec
	r.mu.Lock()
	started := r.ch != nil && !r.shut
	r.shut = true
	r.mu.Unlock()
	if started {
		close(r.ch)
		<-r.done
	}
}

// replayPage steps through the timeline of one of the scope's attempts at
// the scenario: ?attempt=ID, or the latest.
func (s *Server) replayPage(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.scenarioFor(w, r)
	if !ok {
		return
	}
	if s.Timeline == nil {
		http.Error(w, "this server keeps no timelines", http.StatusNotFound)
		return
	}
	scope := s.scopeOf(r)
	var list []*Attempt
	var err error
	if scope.attempts != nil {
		list, err = scope.attempts.List(r.Context(), scope.learner, sc.ID)
	}
	if err != nil {
		answerError(w, r, fmt.Errorf("your attempts could not be read: %w", err), http.StatusInternalServerError)
		return
	}
	if len(list) == 0 {
		http.Error(w, "There is no attempt at this scenario to replay yet.", http.StatusNotFound)
		return
	}
	a := list[0]
	if q := r.URL.Query().Get("attempt"); q != "" {
		id, _ := strconv.ParseInt(q, 10, 64)
		i := slices.IndexFunc(list, func(a *Attempt) bool { return a.ID == id })
		if i < 0 {
			http.Error(w, fmt.Sprintf("There is no attempt %q at this scenario to replay: pick one of the attempts listed on the replay page.", q), http.StatusNotFound)
			return
		}
		a = list[i]
	}
	evs, err := s.Timeline.Events(r.Context(), a.ID)
	if err != nil {
		http.Error(w, "the timeline could not be read: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	// A Kubernetes event of an earlier attempt in the same namespaces is
	// not this attempt's.
	evs = slices.DeleteFunc(evs, func(e store.Event) bool { return e.At.Before(a.Started.Truncate(time.Second)) })
	p := web.ReplayPage{ScenarioID: sc.ID, Title: sc.Title, Back: scope.scenarioURL(sc.ID), Attempt: a.ID, State: a.State,
		Started: a.Started.UTC().Format(replayTime)}
	if len(list) > 1 {
		for _, o := range list {
			p.Attempts = append(p.Attempts, web.ReplayAttempt{ID: o.ID, State: o.State, Started: o.Started.UTC().Format(replayTime),
				URL: fmt.Sprintf("%s/replay?attempt=%d", scope.scenarioURL(sc.ID), o.ID), Current: o.ID == a.ID})
		}
	}
	// A page of replayPageSize events at a time (?page=N, the last one by
	// default): a long attempt's replay stays a page a browser shows.
	pages := max(1, (len(evs)+replayPageSize-1)/replayPageSize)
	page := pages
	if q := r.URL.Query().Get("page"); q != "" {
		if n, err := strconv.Atoi(q); err == nil && n >= 1 && n <= pages {
			page = n
		}
	}
	if pages > 1 {
		p.Page, p.Pages = page, pages
		base := fmt.Sprintf("%s/replay?attempt=%d&page=", scope.scenarioURL(sc.ID), a.ID)
		if page > 1 {
			p.PrevURL = base + strconv.Itoa(page-1)
		}
		if page < pages {
			p.NextURL = base + strconv.Itoa(page+1)
		}
		evs = evs[(page-1)*replayPageSize : min(len(evs), page*replayPageSize)]
	}
	for _, e := range evs {
		off := e.At.Sub(a.Started).Round(time.Second)
		if off < 0 {
			off = 0
		}
		p.Events = append(p.Events, web.ReplayEvent{Offset: fmt.Sprintf("+%02d:%02d", int(off.Minutes()), int(off.Seconds())%60),
			Kind: e.Kind, Source: e.Source, Level: e.Level, Text: e.Text})
	}
	writeHTML(w, r, s, web.Replay(p))
}

const replayTime = "2006-01-02 15:04:05 UTC"

// replayPageSize is how many events a replay page shows.
const replayPageSize = 1000
