package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/owner"
)

// Step is one step of a long operation as the UI shows it.
type Step struct {
	Name   string        `json:"name"`
	State  string        `json:"state"` // running, done, failed, info
	Error  string        `json:"error,omitempty"`
	Took   time.Duration `json:"took,omitempty"`
	Detail string        `json:"detail,omitempty"`
}

// Operation is a long operation (creating a cluster) whose steps are
// recorded and streamed to any number of watchers. It implements
// cluster.Progress.
type Operation struct {
	ID    string
	Title string
	// Owner is who may follow the operation ("" anybody on the local lab;
	// a class learner's key for theirs).
	Owner string
	// Next is the page to go to once the operation succeeded ("": none).
	Next string

	mu       sync.Mutex
	steps    []Step
	done     bool
	finished time.Time
	err      string
	// summary says, for a learner, what failed and what to do (err is
	// the raw error, behind "details").
	summary string
	watches map[chan Step]struct{}
}

func newOperation(id, title string) *Operation {
	return &Operation{ID: id, Title: title, watches: map[chan Step]struct{}{}}
}

var _ cluster.Progress = (*Operation)(nil)

// Start records a running step.
func (o *Operation) Start(name string) func(error) {
	start := time.Now()
	o.publish(Step{Name: name, State: "running"})
	return func(err error) {
		s := Step{Name: name, State: "done", Took: time.Since(start).Round(100 * time.Millisecond)}
		if err != nil {
			s.State, s.Error = "failed", err.Error()
		}
		o.publish(s)
	}
}

// Infof records a detail line.
func (o *Operation) Infof(format string, args ...any) {
	o.publish(Step{State: "info", Detail: fmt.Sprintf(format, args...)})
}

func (o *Operation) publish(s Step) {
	o.mu.Lock()
	defer o.mu.Unlock()
	// A finished step replaces its running line in the record; watchers
	// get both events.
	replaced := false
	if s.State == "done" || s.State == "failed" {
		for i := len(o.steps) - 1; i >= 0; i-- {
			if o.steps[i].Name == s.Name && o.steps[i].State == "running" {
				o.steps[i], replaced = s, true
				break
			}
		}
	}
	if !replaced {
		o.steps = append(o.steps, s)
	}
	for ch := range o.watches {
		select {
		case ch <- s:
		default: // a slow watcher misses a step rather than blocking the work
		}
	}
}

// finish marks the operation over.
func (o *Operation) finish(err error) {
	o.mu.Lock()
	o.done, o.finished = true, time.Now()
	if err != nil {
		o.err = err.Error()
		o.summary = failureSummary(err, o.steps)
	}
	watches := o.watches
	o.watches = map[chan Step]struct{}{}
	summary := o.summary
	o.mu.Unlock()
	final := Step{State: "finished"}
	if err != nil {
		final.State, final.Error, final.Detail = "failed", err.Error(), summary
	}
	for ch := range watches {
		select {
		case ch <- final:
		default:
		}
		close(ch)
	}
}

// Snapshot returns the steps so far and whether (and how) it ended: the
// raw error, and what it means for a learner.
func (o *Operation) Snapshot() (steps []Step, done bool, err, summary string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Step(nil), o.steps...), o.done, o.err, o.summary
}

// failureSummary says what failed in a learner's words: the step that
// failed (steps are named for people), or why it stopped, and what to do.
func failureSummary(err error, steps []Step) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "It was interrupted: the server stopped. Start it again once the server is back."
	case owner.IsInUse(err):
		// "cluster lab is in use by …: wait until it is done, or use
		// another cluster", a sentence.
		msg := err.Error()
		return strings.ToUpper(msg[:1]) + msg[1:] + "."
	}
	for i := len(steps) - 1; i >= 0; i-- {
		if steps[i].State == "failed" && steps[i].Name != "" {
			return fmt.Sprintf("This did not work: the step “%s” failed. Try again; if it fails again, start over, or use another cluster (the details below say what went wrong).", steps[i].Name)
		}
	}
	return "This did not work. Try again; if it fails again, start over, or use another cluster (the details below say what went wrong)."
}

// Watch returns the steps so far and a channel of later ones, closed when
// the operation ends; cancel stops watching.
func (o *Operation) Watch() (past []Step, next <-chan Step, cancel func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ch := make(chan Step, 64)
	past = append([]Step(nil), o.steps...)
	if o.done {
		close(ch)
		return past, ch, func() {}
	}
	o.watches[ch] = struct{}{}
	return past, ch, func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if _, ok := o.watches[ch]; ok {
			delete(o.watches, ch)
			close(ch)
		}
	}
}

// opRetention is how long a finished operation can still be followed (its
// page reloaded); then it is forgotten, so that the server does not
// remember every operation it ever ran.
const opRetention = time.Hour

// finishedBefore tells whether o ended before t.
func (o *Operation) finishedBefore(t time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.done && o.finished.Before(t)
}

// running tells whether o has not ended.
func (o *Operation) running() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.done
}

// pending is owner's operation that is still running and leads to next
// (a scenario being started or started over), or nil.
func (r *operations) pending(owner, next string) *Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.ops {
		if o.Owner == owner && o.Next == next && o.running() {
			return o
		}
	}
	return nil
}

// operations runs and remembers operations.
type operations struct {
	wg  sync.WaitGroup
	mu  sync.Mutex
	seq int
	ops map[string]*Operation
}

// start runs work in the background under ctx (cancelled when the server
// stops, so a create in progress rolls back).
func (r *operations) start(ctx context.Context, owner, title, next string, work func(ctx context.Context, op *Operation) error) *Operation {
	r.mu.Lock()
	r.seq++
	op := newOperation(fmt.Sprint(r.seq), title)
	op.Next, op.Owner = next, owner
	if r.ops == nil {
		r.ops = map[string]*Operation{}
	}
	cutoff := time.Now().Add(-opRetention)
	for id, o := range r.ops {
		if o.finishedBefore(cutoff) {
			delete(r.ops, id)
		}
	}
	r.ops[op.ID] = op
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		op.finish(work(ctx, op))
	}()
	return op
}

// wait waits for every operation to end.
func (r *operations) wait() { r.wg.Wait() }

func (r *operations) get(id string) (*Operation, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	op, ok := r.ops[id]
	return op, ok
}
