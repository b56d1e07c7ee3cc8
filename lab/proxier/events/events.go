package events

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Kinds of events.
const (
	// KindSync is a sync attempt (successful or not).
	KindSync = "sync"
	// KindSkipped is a sync that was due but skipped by a fault switch.
	KindSkipped = "skipped"
	// KindFault is a change of the fault switches.
	KindFault = "fault"
	// KindConntrack is a UDP conntrack reconciliation.
	KindConntrack = "conntrack"
)

// Event is one entry of the stream. Fields that do not apply are omitted
// from the JSON form.
type Event struct {
	// Seq numbers events from 1 in publication order.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	// Mode is "nftables" or "iptables"; Family "IPv4" or "IPv6".
	Mode   string `json:"mode,omitempty"`
	Family string `json:"family,omitempty"`

	// Full is true for a full sync; Reason says why it was full
	// ("initial", "periodic", "topology", "canary", "requested",
	// "after-failure", "service-cidrs").
	Full   bool   `json:"full,omitempty"`
	Reason string `json:"reason,omitempty"`
	// DurationSeconds is how long the sync took.
	DurationSeconds float64 `json:"durationSeconds,omitempty"`

	// ServicesChanged are the Services ("ns/name") whose spec changed since
	// the previous sync; EndpointsChanged those whose endpoints changed.
	// ChainsRewritten lists the Services whose rules a partial sync
	// rewrote.
	ServicesChanged  []string `json:"servicesChanged,omitempty"`
	EndpointsChanged []string `json:"endpointsChanged,omitempty"`
	ChainsRewritten  []string `json:"chainsRewritten,omitempty"`

	// RulesAdded and RulesRemoved are the differences in the programmed
	// ruleset ("chain NAME: rule", "map NAME: element", "-t nat -A ...").
	// RulesTruncated is set when the lists were cut short.
	RulesAdded     []string `json:"rulesAdded,omitempty"`
	RulesRemoved   []string `json:"rulesRemoved,omitempty"`
	RulesTruncated bool     `json:"rulesTruncated,omitempty"`

	// ConntrackDeleted counts UDP conntrack entries deleted after the sync.
	ConntrackDeleted int `json:"conntrackDeleted,omitempty"`

	// Faults lists the fault switches that were on ("stop-syncing", ...);
	// Message is a human-readable note (what was skipped, the new fault
	// state); Error is set when the sync failed.
	Faults  []string `json:"faults,omitempty"`
	Message string   `json:"message,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// Broker fans events out to subscribers and remembers the most recent
// ones. It never blocks the publisher: a subscriber whose buffer is full
// misses the event (and onDrop is called).
type Broker struct {
	mu      sync.Mutex
	seq     uint64
	recent  []Event
	keep    int
	subs    map[chan Event]struct{}
	onDrop  func()
	nowFunc func() time.Time
}

// NewBroker returns a broker remembering the last keep events. onDrop, if
// not nil, is called for every event a subscriber missed.
func NewBroker(keep int, onDrop func()) *Broker {
	if keep <= 0 {
		keep = 100
	}
	return &Broker{keep: keep, subs: map[chan Event]struct{}{}, onDrop: onDrop, nowFunc: time.Now}
}

// Publish stamps ev with the next sequence number (and the time, if unset)
// and delivers it. It returns the stamped event.
func (b *Broker) Publish(ev Event) Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	ev.Seq = b.seq
	if ev.Time.IsZero() {
		ev.Time = b.nowFunc()
	}
	b.recent = append(b.recent, ev)
	if len(b.recent) > b.keep {
		b.recent = append(b.recent[:0:0], b.recent[len(b.recent)-b.keep:]...)
	}
	for ch := range b.subs {
		select {
		case ch <- ev:
		default:
			if b.onDrop != nil {
				b.onDrop()
			}
		}
	}
	return ev
}

// Recent returns up to n of the most recent events, oldest first (all
// remembered events if n <= 0).
func (b *Broker) Recent(n int) []Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n <= 0 || n > len(b.recent) {
		n = len(b.recent)
	}
	out := make([]Event, n)
	copy(out, b.recent[len(b.recent)-n:])
	return out
}

// Subscribe returns a channel receiving every event published from now on,
// buffered by buf, and a function that ends the subscription and closes
// the channel.
func (b *Broker) Subscribe(buf int) (<-chan Event, func()) {
	if buf <= 0 {
		buf = 64
	}
	ch := make(chan Event, buf)
	b.mu.Lock()
	b.subs[ch] = struct{}{}
	b.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.subs, ch)
			b.mu.Unlock()
			close(ch)
		})
	}
}

// Handler serves the stream as newline-delimited JSON: first the remembered
// events (?replay=N limits them to N, ?replay=0 skips them), then live
// events until the client goes away. With ?follow=false it stops after the
// replay.
func (b *Broker) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		replay := -1
		if s := r.URL.Query().Get("replay"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				http.Error(w, "replay must be a non-negative integer", http.StatusBadRequest)
				return
			}
			replay = n
		}
		follow := r.URL.Query().Get("follow") != "false"

		// Subscribe before reading the replay so nothing falls in between.
		var ch <-chan Event
		cancel := func() {}
		if follow {
			ch, cancel = b.Subscribe(256)
		}
		defer cancel()

		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		enc := json.NewEncoder(w)
		flusher, _ := w.(http.Flusher)
		var last uint64
		if replay != 0 {
			for _, ev := range b.Recent(max(replay, 0)) {
				if err := enc.Encode(ev); err != nil {
					return
				}
				last = ev.Seq
			}
		}
		if flusher != nil {
			flusher.Flush()
		}
		if !follow {
			return
		}
		for {
			select {
			case <-r.Context().Done():
				return
			case ev, ok := <-ch:
				if !ok {
					return
				}
				if ev.Seq <= last {
					continue
				}
				if err := enc.Encode(ev); err != nil {
					return
				}
				if flusher != nil {
					flusher.Flush()
				}
			}
		}
	})
}

// Wait returns the first event, published after the call, for which match
// returns true, or ctx's error. It is a convenience for tests and tools.
func (b *Broker) Wait(ctx context.Context, match func(Event) bool) (Event, error) {
	ch, cancel := b.Subscribe(256)
	defer cancel()
	for {
		select {
		case <-ctx.Done():
			return Event{}, ctx.Err()
		case ev := <-ch:
			if match(ev) {
				return ev, nil
			}
		}
	}
}
