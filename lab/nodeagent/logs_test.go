package nodeagent

import (
	"bytes"
	"context"
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
			path := filepath.Join(t.TempDir(), "0.log")
			l, err := openContainerLog(path)
			if err != nil {
				t.Fatal(err)
			}
			l.copy("stdout", strings.NewReader("old\nnew "))
			var done atomic.Bool
			rc, err := readLog(context.Background(), path, api.ContainerLogOpts{Follow: true}, tc.start, done.Load)
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
