//go:build linux

package nodeagent

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
)

// slogLogger routes virtual-kubelet's logging (errors syncing pods,
// failed status updates) to the agent's log; without it virtual-kubelet
// logs nothing and a pod that never starts leaves no trace. Debug
// messages are dropped.
type slogLogger struct{ l *slog.Logger }

var _ vklog.Logger = slogLogger{}

func (s slogLogger) log(level slog.Level, msg string) {
	s.l.Log(context.Background(), level, msg)
}

func (s slogLogger) Debug(...any)          {}
func (s slogLogger) Debugf(string, ...any) {}
func (s slogLogger) Info(a ...any)         { s.log(slog.LevelInfo, fmt.Sprint(a...)) }
func (s slogLogger) Infof(f string, a ...any) {
	s.log(slog.LevelInfo, fmt.Sprintf(f, a...))
}
func (s slogLogger) Warn(a ...any) { s.log(slog.LevelWarn, fmt.Sprint(a...)) }
func (s slogLogger) Warnf(f string, a ...any) {
	s.log(slog.LevelWarn, fmt.Sprintf(f, a...))
}
func (s slogLogger) Error(a ...any) { s.log(slog.LevelError, fmt.Sprint(a...)) }
func (s slogLogger) Errorf(f string, a ...any) {
	s.log(slog.LevelError, fmt.Sprintf(f, a...))
}
func (s slogLogger) Fatal(a ...any) { s.Error(a...); os.Exit(1) }
func (s slogLogger) Fatalf(f string, a ...any) {
	s.Errorf(f, a...)
	os.Exit(1)
}
func (s slogLogger) WithField(k string, v any) vklog.Logger {
	return slogLogger{s.l.With(k, plain(v))}
}
func (s slogLogger) WithFields(f vklog.Fields) vklog.Logger {
	l := s.l
	for k, v := range f {
		l = l.With(k, plain(v))
	}
	return slogLogger{l}
}
func (s slogLogger) WithError(err error) vklog.Logger {
	return slogLogger{s.l.With("err", plain(err))}
}

// plain renders errors by their message: virtual-kubelet's carry stack
// traces that slog would print in full.
func plain(v any) any {
	if err, ok := v.(error); ok && err != nil {
		return err.Error()
	}
	return v
}
