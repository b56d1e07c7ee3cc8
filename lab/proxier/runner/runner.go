package runner

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/utils/clock"
)

// BoundedFrequencyRunner runs a function with bounded frequency, as
// kube-proxy's sync-runner does.
type BoundedFrequencyRunner struct {
	name   string
	logger *slog.Logger

	minInterval   time.Duration
	retryInterval time.Duration
	maxInterval   time.Duration

	run   chan struct{}
	fn    func(ctx context.Context) error
	clock clock.Clock
}

// New returns a runner for fn. kube-proxy uses minInterval = minSyncPeriod
// (1s), retryInterval = syncPeriod (30s) and maxInterval = the full-sync
// period (1h). maxInterval must not be shorter than minInterval.
func New(name string, fn func(ctx context.Context) error, minInterval, retryInterval, maxInterval time.Duration, c clock.Clock, logger *slog.Logger) (*BoundedFrequencyRunner, error) {
	if maxInterval < minInterval {
		return nil, fmt.Errorf("%s: maxInterval (%v) must be >= minInterval (%v)", name, maxInterval, minInterval)
	}
	if c == nil {
		c = clock.RealClock{}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &BoundedFrequencyRunner{
		name:          name,
		logger:        logger.With("runner", name),
		minInterval:   minInterval,
		retryInterval: retryInterval,
		maxInterval:   maxInterval,
		run:           make(chan struct{}, 1),
		fn:            fn,
		clock:         c,
	}, nil
}

// Loop runs until ctx is done. Each iteration waits for Run or for the
// next-run timer (maxInterval after a success, min(retryInterval,
// maxInterval) after a failure), calls fn (a panic in fn is logged and
// counts as a failure), then waits minInterval.
func (r *BoundedFrequencyRunner) Loop(ctx context.Context) {
	r.logger.DebugContext(ctx, "loop running")
	minTimer := r.clock.NewTimer(r.minInterval)
	defer minTimer.Stop()
	nextRun := r.clock.NewTimer(r.maxInterval)
	defer nextRun.Stop()

	for {
		select {
		case <-ctx.Done():
			r.logger.DebugContext(ctx, "loop stopping")
			return
		case <-nextRun.C():
		case <-r.run:
		}
		// Stop the timers while fn runs, so that tests with a fake clock
		// can synchronize on HasWaiters; they are re-armed afterwards.
		minTimer.Stop()
		nextRun.Stop()

		err := r.call(ctx)
		next := r.maxInterval
		if err != nil {
			next = min(r.retryInterval, r.maxInterval)
			r.logger.InfoContext(ctx, "scheduling retry", "interval", next, "err", err)
		}
		minTimer.Reset(r.minInterval)
		nextRun.Reset(next)

		select {
		case <-ctx.Done():
			r.logger.DebugContext(ctx, "loop stopping")
			return
		case <-minTimer.C():
		}
	}
}

func (r *BoundedFrequencyRunner) call(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			r.logger.ErrorContext(ctx, "sync function panicked", "panic", p)
			err = fmt.Errorf("%s: panic: %v", r.name, p)
		}
	}()
	return r.fn(ctx)
}

// Run asks for a run as soon as minInterval allows. It never blocks; calls
// made while a run is already pending are coalesced into it.
func (r *BoundedFrequencyRunner) Run() {
	select {
	case r.run <- struct{}{}:
	default:
	}
}
