package labs

import (
	"context"
	"runtime"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// StartLimit bounds how many clusters are created at once. Creating a
// cluster is CPU-bound for its first half minute (a control plane
// starting, images unpacked, add-ons rolled out): on a 2-core machine, 30
// labs created at once all miss their readiness deadlines. One StartLimit
// is shared by every class a server runs; waiters go first come, first
// served.
type StartLimit struct {
	sem *semaphore.Weighted
	n   int
	// queued counts the creations running or waiting.
	queued atomic.Int64
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
	return &StartLimit{sem: semaphore.NewWeighted(int64(n)), n: n}
}

// Max is how many creations run at once.
func (s *StartLimit) Max() int { return s.n }

// Acquire waits for a slot. ahead, called at once when the caller must
// wait, is told how many creations are running or waiting before it. The
// slot is released by calling release (once); an ended ctx gives up the
// place in line.
func (s *StartLimit) Acquire(ctx context.Context, ahead func(n int)) (release func(), err error) {
	before := s.queued.Add(1) - 1
	if !s.sem.TryAcquire(1) {
		if ahead != nil {
			ahead(int(before))
		}
		if err := s.sem.Acquire(ctx, 1); err != nil {
			s.queued.Add(-1)
			return nil, err
		}
	}
	return func() {
		s.sem.Release(1)
		s.queued.Add(-1)
	}, nil
}
