package kind

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	kindlog "sigs.k8s.io/kind/pkg/log"

	"github.com/svclab/svclab/lab/cluster"
)

// progressLogger is a kind logger that turns kind's status lines
// (" • Preparing nodes 📦  ...", " ✓ Preparing nodes 📦") into steps of a
// cluster.Progress, so the CLI and the web UI show kind's progress as their
// own. kind's other user-facing lines become details; its debug lines go to
// the log.
type progressLogger struct {
	p   cluster.Progress
	log *slog.Logger

	mu   sync.Mutex
	step string
	done func(error)
}

var _ kindlog.Logger = (*progressLogger)(nil)

func newProgressLogger(p cluster.Progress, log *slog.Logger) *progressLogger {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &progressLogger{p: cluster.OrNop(p), log: log}
}

// errKindStep marks a step kind reported as failed; the error itself comes
// back from kind's Create.
var errKindStep = errors.New("failed")

func (l *progressLogger) line(s string) {
	s = strings.TrimRight(s, "\n")
	trimmed := strings.TrimSpace(s)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case strings.HasPrefix(trimmed, "• ") && strings.HasSuffix(trimmed, "..."):
		l.end(nil)
		l.step = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(trimmed, "• "), "..."))
		l.done = l.p.Start(l.step)
	case strings.HasPrefix(trimmed, "✓ "):
		l.end(nil)
	case strings.HasPrefix(trimmed, "✗ "):
		l.end(errKindStep)
	case trimmed == "", strings.HasPrefix(trimmed, "Creating cluster "):
		// The caller says it already.
	default:
		for _, part := range strings.Split(trimmed, "\n") {
			if part = strings.TrimSpace(part); part != "" {
				l.p.Infof("%s", part)
			}
		}
	}
}

// end ends the current step, if any. Called with mu held.
func (l *progressLogger) end(err error) {
	if l.done != nil {
		l.done(err)
	}
	l.step, l.done = "", nil
}

// Close ends a step kind left open (it returned an error mid-step).
func (l *progressLogger) Close(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done != nil && err == nil {
		err = errKindStep
	}
	l.end(err)
}

func (l *progressLogger) Warn(message string) {
	l.log.Warn("kind: " + message)
	l.line("warning: " + message)
}
func (l *progressLogger) Warnf(format string, args ...any) { l.Warn(fmt.Sprintf(format, args...)) }
func (l *progressLogger) Error(message string)             { l.log.Error("kind: " + message) }
func (l *progressLogger) Errorf(format string, args ...any) {
	l.Error(fmt.Sprintf(format, args...))
}

func (l *progressLogger) V(level kindlog.Level) kindlog.InfoLogger {
	if level <= 0 {
		return userLine{l}
	}
	return debugLine{l.log}
}

type userLine struct{ l *progressLogger }

func (u userLine) Info(message string)              { u.l.line(message) }
func (u userLine) Infof(format string, args ...any) { u.l.line(fmt.Sprintf(format, args...)) }
func (u userLine) Enabled() bool                    { return true }

type debugLine struct{ log *slog.Logger }

func (d debugLine) Info(message string) { d.log.Debug("kind: " + message) }
func (d debugLine) Infof(format string, args ...any) {
	d.log.Debug("kind: " + fmt.Sprintf(format, args...))
}
func (d debugLine) Enabled() bool { return d.log.Enabled(context.Background(), slog.LevelDebug) }
