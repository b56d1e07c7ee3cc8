package cluster

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// Progress receives the steps of a long operation. Start begins a step,
// the returned function ends it with its error (nil for success). Infof
// reports a detail of the current step.
type Progress interface {
	Start(step string) (done func(err error))
	Infof(format string, args ...any)
}

// NopProgress discards everything.
type NopProgress struct{}

func (NopProgress) Start(string) func(error) { return func(error) {} }
func (NopProgress) Infof(string, ...any)     {}

// OrNop returns p, or a NopProgress when p is nil.
func OrNop(p Progress) Progress {
	if p == nil {
		return NopProgress{}
	}
	return p
}

// TextProgress writes steps as lines, kind-style:
//
//   - Starting etcd ...
//     ✓ Starting etcd (0.4s)
type TextProgress struct {
	mu  sync.Mutex
	W   io.Writer
	Now func() time.Time
}

// NewTextProgress returns a TextProgress writing to w.
func NewTextProgress(w io.Writer) *TextProgress { return &TextProgress{W: w, Now: time.Now} }

func (p *TextProgress) Start(step string) func(error) {
	p.mu.Lock()
	start := p.Now()
	fmt.Fprintf(p.W, " • %s ...\n", step)
	p.mu.Unlock()
	return func(err error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		d := p.Now().Sub(start).Round(100 * time.Millisecond)
		if err != nil {
			fmt.Fprintf(p.W, " ✗ %s (%s): %v\n", step, d, err)
			return
		}
		fmt.Fprintf(p.W, " ✓ %s (%s)\n", step, d)
	}
}

func (p *TextProgress) Infof(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.W, "   %s\n", fmt.Sprintf(format, args...))
}

// Action is one step of a pipeline.
type Action struct {
	Name string
	Run  func(ctx context.Context) error
}

// RunActions runs actions in order, reporting each as a step, and stops at
// the first failure.
func RunActions(ctx context.Context, p Progress, actions []Action) error {
	p = OrNop(p)
	for _, a := range actions {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted before %s: %w", lowerFirst(a.Name), err)
		}
		done := p.Start(a.Name)
		err := a.Run(ctx)
		done(err)
		if err != nil {
			return fmt.Errorf("%s: %w", lowerFirst(a.Name), err)
		}
	}
	return nil
}

func lowerFirst(s string) string {
	if s == "" || s[0] < 'A' || s[0] > 'Z' {
		return s
	}
	return string(s[0]+'a'-'A') + s[1:]
}
