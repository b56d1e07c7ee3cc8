package runner

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// recorder is the sync function under test: it records each call and
// returns the next scripted result.
type recorder struct {
	mu      sync.Mutex
	calls   int
	results []error // consumed in order; nil when exhausted
	panics  map[int]bool
	called  chan struct{}
}

func (r *recorder) fn(context.Context) error {
	r.mu.Lock()
	r.calls++
	n := r.calls
	var err error
	if len(r.results) > 0 {
		err, r.results = r.results[0], r.results[1:]
	}
	panics := r.panics[n]
	r.mu.Unlock()
	r.called <- struct{}{}
	if panics {
		panic("boom")
	}
	return err
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

type step struct {
	run      bool          // call Run
	advance  time.Duration // step the fake clock
	wantCall bool          // a call must happen after this step
}

func TestBoundedFrequencyRunner(t *testing.T) {
	const (
		minInterval   = time.Second
		retryInterval = 30 * time.Second
		maxInterval   = time.Hour
	)
	fail := errors.New("sync failed")
	tests := []struct {
		name    string
		results []error
		panics  map[int]bool
		steps   []step
		want    int
	}{
		{
			name: "run triggers an immediate call",
			steps: []step{
				{run: true, wantCall: true},
			},
			want: 1,
		},
		{
			name: "runs within minInterval coalesce into one",
			steps: []step{
				{run: true, wantCall: true},
				{run: true},
				{run: true},
				{advance: 500 * time.Millisecond},
				{advance: 500 * time.Millisecond, wantCall: true},
				{advance: minInterval},
			},
			want: 2,
		},
		{
			name: "no run and no timer means no call",
			steps: []step{
				{advance: 10 * time.Minute},
			},
			want: 0,
		},
		{
			name: "maxInterval forces a call",
			steps: []step{
				{advance: maxInterval, wantCall: true},
			},
			want: 1,
		},
		{
			name:    "a failure is retried after retryInterval",
			results: []error{fail},
			steps: []step{
				{run: true, wantCall: true},
				{advance: minInterval},
				{advance: retryInterval - minInterval, wantCall: true},
				{advance: retryInterval},
			},
			want: 2,
		},
		{
			name:   "a panic counts as a failure and is retried",
			panics: map[int]bool{1: true},
			steps: []step{
				{run: true, wantCall: true},
				{advance: retryInterval, wantCall: true},
			},
			want: 2,
		},
		{
			name: "after a success the next periodic call is maxInterval away",
			steps: []step{
				{run: true, wantCall: true},
				{advance: retryInterval},
				{advance: maxInterval - retryInterval, wantCall: true},
			},
			want: 2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := testingclock.NewFakeClock(time.Unix(1000, 0))
			rec := &recorder{results: tc.results, panics: tc.panics, called: make(chan struct{}, 16)}
			r, err := New("test", rec.fn, minInterval, retryInterval, maxInterval, fc, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { r.Loop(ctx); close(done) }()
			t.Cleanup(func() { cancel(); <-done })
			waitForWaiters(t, fc)

			for i, s := range tc.steps {
				if s.run {
					r.Run()
				}
				if s.advance > 0 {
					fc.Step(s.advance)
				}
				select {
				case <-rec.called:
					if !s.wantCall {
						t.Fatalf("step %d: unexpected call", i)
					}
				case <-time.After(50 * time.Millisecond):
					if s.wantCall {
						t.Fatalf("step %d: expected a call, got none", i)
					}
				}
				waitForWaiters(t, fc)
			}
			if got := rec.count(); got != tc.want {
				t.Errorf("calls = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestNewRejectsMaxBelowMin(t *testing.T) {
	if _, err := New("x", func(context.Context) error { return nil }, time.Minute, time.Second, time.Second, nil, nil); err == nil {
		t.Fatal("want an error when maxInterval < minInterval")
	}
}

// waitForWaiters waits until the loop is blocked on a fake-clock timer.
func waitForWaiters(t *testing.T, fc *testingclock.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !fc.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("runner never waited on the clock")
		}
		time.Sleep(time.Millisecond)
	}
}
