package stream

import (
	"sync"
	"sync/atomic"
)

// DefaultBuffer is the buffer of a subscription made with a size of 0 or
// less.
const DefaultBuffer = 64

// Broker fans values out to subscribers. The zero value is ready to use.
type Broker[T any] struct {
	mu     sync.Mutex
	subs   map[*Subscription[T]]struct{}
	closed bool
}

// Subscription is one subscriber's view of a Broker.
type Subscription[T any] struct {
	// C receives the published values that pass the filter. It is closed
	// when the subscription is cancelled or the broker closed.
	C       <-chan T
	c       chan T
	filter  func(T) bool
	dropped atomic.Int64
	b       *Broker[T]
	once    sync.Once
}

// Subscribe returns a subscription with a buffer of size values that
// receives the values for which filter returns true (every value when
// filter is nil). Cancel it when done.
func (b *Broker[T]) Subscribe(size int, filter func(T) bool) *Subscription[T] {
	if size <= 0 {
		size = DefaultBuffer
	}
	c := make(chan T, size)
	s := &Subscription[T]{C: c, c: c, filter: filter, b: b}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		s.once.Do(func() { close(c) })
		return s
	}
	if b.subs == nil {
		b.subs = map[*Subscription[T]]struct{}{}
	}
	b.subs[s] = struct{}{}
	return s
}

// Publish hands v to every subscriber whose filter takes it, without
// waiting: a subscriber with a full buffer misses v.
func (b *Broker[T]) Publish(v T) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		if s.filter != nil && !s.filter(v) {
			continue
		}
		select {
		case s.c <- v:
		default:
			s.dropped.Add(1)
		}
	}
}

// Subscribers is the number of live subscriptions.
func (b *Broker[T]) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

// Close ends every subscription; later subscriptions are closed at once
// and later publications go nowhere.
func (b *Broker[T]) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		delete(b.subs, s)
		s.once.Do(func() { close(s.c) })
	}
}

// Cancel ends the subscription and closes C. It may be called more than
// once.
func (s *Subscription[T]) Cancel() {
	s.b.mu.Lock()
	delete(s.b.subs, s)
	s.b.mu.Unlock()
	s.once.Do(func() { close(s.c) })
}

// Dropped is how many values the subscription missed because its buffer
// was full. A subscriber that sees it grow should reload a snapshot.
func (s *Subscription[T]) Dropped() int64 { return s.dropped.Load() }
