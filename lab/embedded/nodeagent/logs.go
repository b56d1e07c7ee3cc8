//go:build linux

package nodeagent

import (
	"bufio"
	"context"
	"io"
	"os"
	"strings"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// logStart says where reading a log starts.
type logStart int

const (
	// fromStart reads what the log holds (tailed), as kubectl logs.
	fromStart logStart = iota
	// fromNow skips what the log holds and only follows, as kubectl
	// attach: kubectl prints the earlier output itself first.
	fromNow
)

// readLog streams a container log (rel, in the node's state directory) in
// the CRI format back as kubectl expects it: the text (with --timestamps, preceded by the time),
// honouring tail, since, limit and follow (until done() says the container
// has exited and the file is drained).
func readLog(ctx context.Context, t stateTree, rel string, opts api.ContainerLogOpts, start logStart, done func() bool) (io.ReadCloser, error) {
	f, err := t.open(rel)
	if err != nil {
		if os.IsNotExist(err) {
			return io.NopCloser(strings.NewReader("")), nil
		}
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		defer f.Close()
		pw.CloseWithError(streamLog(ctx, f, pw, opts, start, done))
	}()
	return pr, nil
}

func streamLog(ctx context.Context, f io.ReadSeeker, w io.Writer, opts api.ContainerLogOpts, start logStart, done func() bool) error {
	var since time.Time
	if opts.SinceSeconds > 0 {
		since = time.Now().Add(-time.Duration(opts.SinceSeconds) * time.Second)
	}
	if !opts.SinceTime.IsZero() {
		since = opts.SinceTime
	}
	format := func(line string) (string, bool) {
		ts, rest, ok := strings.Cut(line, " ")
		if !ok {
			return "", false
		}
		_, rest, _ = strings.Cut(rest, " ") // stream
		tag, text, _ := strings.Cut(rest, " ")
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err == nil && !since.IsZero() && t.Before(since) {
			return "", false
		}
		if tag == "P" {
			text = strings.TrimSuffix(text, "\n")
		}
		if opts.Timestamps {
			text = ts + " " + text
		}
		return text, true
	}
	br := bufio.NewReader(f)
	var written int
	limit := opts.LimitBytes
	emit := func(s string) error {
		if limit > 0 && written+len(s) > limit {
			s = s[:limit-written]
		}
		n, err := io.WriteString(w, s)
		written += n
		return err
	}
	// Existing content, tailed.
	var lines []string
	for {
		line, err := br.ReadString('\n')
		if strings.HasSuffix(line, "\n") {
			if s, ok := format(line); ok {
				lines = append(lines, s)
			}
		} else if line != "" {
			// An incomplete last line: re-read it when following.
			f.Seek(-int64(len(line)), io.SeekCurrent)
			br.Reset(f)
		}
		if err != nil {
			break
		}
	}
	if start == fromNow {
		lines = nil
	}
	if opts.Tail > 0 && len(lines) > opts.Tail {
		lines = lines[len(lines)-opts.Tail:]
	}
	for _, s := range lines {
		if err := emit(s); err != nil {
			return err
		}
		if limit > 0 && written >= limit {
			return nil
		}
	}
	if !opts.Follow {
		return nil
	}
	var pending string
	for {
		line, err := br.ReadString('\n')
		pending += line
		if strings.HasSuffix(pending, "\n") {
			if s, ok := format(pending); ok {
				if err := emit(s); err != nil {
					return err
				}
			}
			pending = ""
			continue
		}
		if err != io.EOF {
			return err
		}
		if done() {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}
