package hostexec

import (
	"context"
	"strings"
	"testing"
)

func TestExecRun(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		stdin   []byte
		argv    []string
		out     string
		wantErr string
	}{
		{name: "output", argv: []string{"sh", "-c", "echo hello"}, out: "hello\n"},
		{name: "input", stdin: []byte("from stdin\n"), argv: []string{"cat"}, out: "from stdin\n"},
		{name: "stderr is in the output", argv: []string{"sh", "-c", "echo oops >&2"}, out: "oops\n"},
		{name: "a failure carries the command and its output", argv: []string{"sh", "-c", "echo RTNETLINK answers: File exists; exit 2"},
			out: "RTNETLINK answers: File exists\n", wantErr: "sh -c echo RTNETLINK answers: File exists; exit 2: exit status 2: RTNETLINK answers: File exists"},
		{name: "a missing program", argv: []string{"svclab-no-such-program"}, wantErr: "executable file not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Exec{}.Run(ctx, tc.stdin, tc.argv[0], tc.argv[1:]...)
			if string(out) != tc.out {
				t.Errorf("output %q, want %q", out, tc.out)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
