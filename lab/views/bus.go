package views

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"
)

// Frame is one message of the bus as subscribers receive it: already
// encoded as JSON, so that any number of viewers cost one encoding.
//
//	{"topic":"rules/lab-worker","seq":12,"time":"…","append":false,"data":{…}}
type Frame []byte

type envelope struct {
	Topic  string    `json:"topic"`
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Append bool      `json:"append,omitempty"`
	Data   any       `json:"data"`
}

// Bus fans frames out to subscribers. State frames replace the previous
// frame of their topic; append frames (the timeline) accumulate up to a
// bound. New subscribers start with the current state and the recent
// appended frames.
type Bus struct {
	mu       sync.Mutex
	seq      uint64
	latest   map[string]Frame
	order    []string // topics in first-publication order
	recent   []Frame  // the last keep append frames
	keep     int
	subs     map[*Subscriber]struct{}
	now      func() time.Time
	closed   bool
	maxQueue int
}

// NewBus returns a bus remembering the last keep appended frames; each
// subscriber holds at most keep of them pending.
func NewBus(keep int) *Bus {
	if keep <= 0 {
		keep = 200
	}
	return &Bus{latest: map[string]Frame{}, keep: keep, maxQueue: keep, subs: map[*Subscriber]struct{}{}, now: time.Now}
}

// Subscriber receives the frames of a bus. Wait for Ready, then Take.
type Subscriber struct {
	bus     *Bus
	ready   chan struct{}
	mu      sync.Mutex
	pending map[string]Frame // topic → latest unsent state frame
	order   []string         // topics of pending, in arrival order
	appends []Frame
	dropped atomic.Uint64
	closed  bool
}

// Publish encodes data as a frame of topic and delivers it. append marks a
// frame that adds to its topic (a timeline entry) instead of replacing its
// previous frame. Publish never blocks on subscribers.
func (b *Bus) Publish(topic string, data any, appendFrame bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.seq++
	f, err := json.Marshal(envelope{Topic: topic, Seq: b.seq, Time: b.now(), Append: appendFrame, Data: data})
	if err != nil {
		return err
	}
	if appendFrame {
		b.recent = append(b.recent, f)
		if len(b.recent) > b.keep {
			b.recent = append([]Frame(nil), b.recent[len(b.recent)-b.keep:]...)
		}
	} else {
		if _, ok := b.latest[topic]; !ok {
			b.order = append(b.order, topic)
		}
		b.latest[topic] = f
	}
	for s := range b.subs {
		s.offer(topic, f, appendFrame, b.maxQueue)
	}
	return nil
}

// Latest returns the current frame of topic.
func (b *Bus) Latest(topic string) (Frame, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, ok := b.latest[topic]
	return f, ok
}

// Subscribe returns a subscriber whose first Take holds the current state
// (every topic's latest frame) and the recent appended frames.
func (b *Bus) Subscribe() *Subscriber {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &Subscriber{bus: b, ready: make(chan struct{}, 1), pending: map[string]Frame{}}
	for _, t := range b.order {
		s.pending[t] = b.latest[t]
		s.order = append(s.order, t)
	}
	s.appends = append(s.appends, b.recent...)
	if len(s.order)+len(s.appends) > 0 {
		s.ready <- struct{}{}
	}
	if b.closed {
		s.closed = true
		close(s.ready)
		return s
	}
	b.subs[s] = struct{}{}
	return s
}

// Subscribers is the number of current subscribers.
func (b *Bus) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

// Close ends every subscription: their Ready channels close once drained.
func (b *Bus) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	for s := range b.subs {
		s.close()
	}
	b.subs = map[*Subscriber]struct{}{}
}

func (s *Subscriber) offer(topic string, f Frame, appendFrame bool, maxQueue int) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if appendFrame {
		s.appends = append(s.appends, f)
		if over := len(s.appends) - maxQueue; over > 0 {
			s.appends = append([]Frame(nil), s.appends[over:]...)
			s.dropped.Add(uint64(over))
		}
	} else {
		if _, ok := s.pending[topic]; ok {
			s.dropped.Add(1) // the unsent older frame is superseded
		} else {
			s.order = append(s.order, topic)
		}
		s.pending[topic] = f
	}
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

func (s *Subscriber) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.ready)
	}
}

// Ready receives when frames are pending; it is closed when the
// subscription ends.
func (s *Subscriber) Ready() <-chan struct{} { return s.ready }

// Take returns the pending frames, oldest first: appended frames keep their
// order among themselves; a state frame is the latest of its topic.
func (s *Subscriber) Take() []Frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Frame, 0, len(s.order)+len(s.appends))
	for _, t := range s.order {
		out = append(out, s.pending[t])
	}
	out = append(out, s.appends...)
	clear(s.pending)
	s.order = s.order[:0]
	s.appends = nil
	return out
}

// Dropped is the number of frames this subscriber skipped because it did
// not keep up.
func (s *Subscriber) Dropped() uint64 { return s.dropped.Load() }

// Close ends the subscription.
func (s *Subscriber) Close() {
	s.bus.mu.Lock()
	delete(s.bus.subs, s)
	s.bus.mu.Unlock()
	s.close()
}
