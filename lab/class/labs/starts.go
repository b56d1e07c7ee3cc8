package labs

import (
	"context"
	"runtime"
	"sync"
)

// StartLimit bounds how many clusters are created at once. Creating a
// cluster is CPU-bound for its first half minute (a control plane
// starting, images unpacked, add-ons rolled out): on a 2-core machine, 30
// labs created at once all miss their readiness deadlines, while two at a
// time each start in about 20 seconds. One StartLimit is shared by every
// class a server runs; waiters go first come, first served.
type StartLimit struct {
	mu      sync.Mutex
	n       int
	running int
	waiting []chan struct{}
}

// DefaultMaxStarting is how many clusters are created at once by default:
// one per CPU.
func DefaultMaxStarting() int { return max(1, runtime.NumCPU()) }

// NewStartLimit returns a limit of n creations at once (n < 1:
// DefaultMaxStarting).
func NewStartLimit(n int) *StartLimit {
	if n < 1 {
		n = DefaultMaxStarting()
	}
	return &StartLimit{n: n}
}

// Max is how many creations run at once.
func (s *StartLimit) Max() int { return s.n }

// Acquire waits for a slot. ahead, called at once when the caller must
// wait, is told how many creations are running or waiting before it. The
// slot is released by calling release (once); an ended ctx gives up the
// place in line.
func (s *StartLimit) Acquire(ctx context.Context, ahead func(n int)) (release func(), err error) {
	s.mu.Lock()
	if s.running < s.n && len(s.waiting) == 0 {
		s.running++
		s.mu.Unlock()
		return s.release, nil
	}
	ch := make(chan struct{})
	s.waiting = append(s.waiting, ch)
	n := s.running + len(s.waiting) - 1
	s.mu.Unlock()
	if ahead != nil {
		ahead(n)
	}
	select {
	case <-ch:
		return s.release, nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		select {
		case <-ch:
			// The slot was handed over just now: pass it on.
			s.releaseLocked()
		default:
			for i, w := range s.waiting {
				if w == ch {
					s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
					break
				}
			}
		}
		return nil, ctx.Err()
	}
}

func (s *StartLimit) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked()
}

// releaseLocked hands the slot to the first waiter, or frees it.
func (s *StartLimit) releaseLocked() {
	if len(s.waiting) > 0 {
		ch := s.waiting[0]
		s.waiting = s.waiting[1:]
		close(ch)
		return
	}
	s.running--
}
