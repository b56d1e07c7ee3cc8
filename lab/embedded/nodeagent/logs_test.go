//go:build linux

package nodeagent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

const sampleLog = `2026-01-02T03:04:05.000000001Z stdout F first
2026-01-02T03:04:06.000000001Z stderr F second
2026-01-02T03:04:07.000000001Z stdout P part-
2026-01-02T03:04:07.500000001Z stdout F ial
2026-01-02T03:04:08.000000001Z stdout F fourth
`

func TestStreamLog(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  api.ContainerLogOpts
		start logStart
		want  string
	}{
		{"all", api.ContainerLogOpts{}, fromStart, "first\nsecond\npart-ial\nfourth\n"},
		{"tail", api.ContainerLogOpts{Tail: 2}, fromStart, "ial\nfourth\n"},
		{"timestamps", api.ContainerLogOpts{Tail: 1, Timestamps: true}, fromStart, "2026-01-02T03:04:08.000000001Z fourth\n"},
		{"since", api.ContainerLogOpts{SinceTime: time.Date(2026, 1, 2, 3, 4, 7, 600000000, time.UTC)}, fromStart, "fourth\n"},
		{"limit", api.ContainerLogOpts{LimitBytes: 8}, fromStart, "first\nse"},
		{"attach skips what is there", api.ContainerLogOpts{}, fromNow, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := streamLog(context.Background(), strings.NewReader(sampleLog), &out, tc.opts, tc.start, func() bool { return true }); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("got %q, want %q", out.String(), tc.want)
			}
		})
	}
}

// TestReadLogFollow appends to a log while it is followed: -f and attach
// both see the new lines, attach none of the old, and both end once the
// container is done and the file drained.
func TestReadLogFollow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start logStart
		want  string
	}{
		{"logs -f", fromStart, "old\nnew one\nnew two\n"},
		// "new " was written before attach: a terminal attached then
		// would not have seen it either.
		{"attach", fromNow, "one\nnew two\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "0.log")
			l, err := openContainerLog(stateTree{dir}, "0.log", DefaultLogLimits)
			if err != nil {
				t.Fatal(err)
			}
			l.copy("stdout", strings.NewReader("old\nnew "))
			var done atomic.Bool
			rc, err := readLog(context.Background(), stateTree{dir}, "0.log", api.ContainerLogOpts{Follow: true}, tc.start, done.Load)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			time.Sleep(300 * time.Millisecond)
			// The partial line "new " is completed by the next write.
			f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			f.WriteString(time.Now().UTC().Format(time.RFC3339Nano) + " stdout F one\n")
			f.Close()
			l.copy("stdout", strings.NewReader("new two\n"))
			l.Close()
			done.Store(true)
			got, err := io.ReadAll(rc)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestContainerLogRotation floods a log: it never holds more than its
// files' worth, the newest output stays in the current file, and kubectl
// logs reads it back.
func TestContainerLogRotation(t *testing.T) {
	dir := t.TempDir()
	l, err := openContainerLog(stateTree{dir}, "0.log", LogLimits{MaxBytes: 4096, MaxFiles: 3})
	if err != nil {
		t.Fatal(err)
	}
	var in strings.Builder
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&in, "line %d of a flood\n", i)
	}
	l.copy("stdout", strings.NewReader(in.String()))
	l.Close()
	entries, _ := os.ReadDir(dir)
	var total int64
	var names []string
	for _, e := range entries {
		fi, _ := e.Info()
		total += fi.Size()
		names = append(names, e.Name())
	}
	if len(entries) != 3 {
		t.Errorf("files %v, want the log and 2 rotated ones", names)
	}
	if total > 3*(4096+200) {
		t.Errorf("the logs hold %d bytes, more than 3 files of 4 KiB", total)
	}
	r, err := readLog(context.Background(), stateTree{dir}, "0.log", api.ContainerLogOpts{Tail: 1}, fromStart, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r)
	if string(b) != "line 1999 of a flood\n" {
		t.Errorf("the last line read back: %q", b)
	}
}

// A line without end (300 MB of output and no newline, here 4 MiB) is
// written as partial entries of maxLogLine and rotated like any other
// output: the log stays within its files, and kubectl logs joins the
// partial entries of the line that is left back into one.
func TestContainerLogEndlessLine(t *testing.T) {
	dir := t.TempDir()
	l, err := openContainerLog(stateTree{dir}, "0.log", LogLimits{MaxBytes: 64 << 10, MaxFiles: 2})
	if err != nil {
		t.Fatal(err)
	}
	l.copy("stdout", io.MultiReader(strings.NewReader(strings.Repeat("x", 4<<20)), strings.NewReader("\nlast\n")))
	l.Close()
	entries, _ := os.ReadDir(dir)
	var total int64
	for _, e := range entries {
		fi, _ := e.Info()
		total += fi.Size()
	}
	if total > 2*(64<<10+maxLogLine+200) {
		t.Errorf("the logs hold %d bytes, more than 2 files of 64 KiB", total)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "0.log"))
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if len(line) > maxLogLine+100 {
			t.Fatalf("an entry of %d bytes", len(line))
		}
	}
	r, err := readLog(context.Background(), stateTree{dir}, "0.log", api.ContainerLogOpts{Tail: 1}, fromStart, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	if string(got) != "last\n" {
		t.Errorf("the last line read back: %q", got)
	}
}
