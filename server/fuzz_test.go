package server

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/svclab/svclab/lab/class"
)

// FuzzTerminalFrame feeds the terminal socket's frame handlers whatever a
// hostile page sends: a text frame is a resize or nothing, a binary frame
// is typed input the command recorder reads; neither panics, a resize is
// always within bounds, and a recorded command is never longer than its
// cap.
func FuzzTerminalFrame(f *testing.F) {
	for _, seed := range []string{`{"type":"resize","rows":24,"cols":80}`, `{"type":"resize","rows":-1,"cols":99999999999}`,
		`{"type":"resize","rows":1e9}`, `{"type":"x"}`, "kubectl get pods\r", "\x1b[A\x1b[200~paste\x1b[201~\r", "\xff\xfe\x00", "a\x7f\x08\x03\x15b\n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		if sz, ok := parseResize(msg); ok && (sz[0] < 1 || sz[1] < 1 || sz[0] > 1000 || sz[1] > 1000) {
			t.Fatalf("a resize to %v passed", sz)
		}
		rec := &commandRecorder{record: func(cmd string) {
			if utf8.RuneCountInString(cmd) > 501 || strings.ContainsAny(cmd, "\r\n") {
				t.Fatalf("recorded %q", cmd)
			}
		}}
		rec.feed(msg)
		rec.feed(msg)
		if len(rec.line) > 4096 {
			t.Fatalf("the line grew to %d runes", len(rec.line))
		}
	})
}

// FuzzViewFrame feeds the views socket's handler: a request is a path
// request with a port and a destination, or an error to show.
func FuzzViewFrame(f *testing.F) {
	for _, seed := range []string{`{"type":"path","dest":"10.96.0.10","port":53,"protocol":"udp","sourceName":"default/client"}`,
		`{"type":"path","port":0}`, `{"type":"path","dest":"","port":70000}`, `[]`, `{"type":"path","dest":` + strings.Repeat(`"a`, 10) + `}`, `null`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		req, err := parseViewRequest(msg)
		if err == nil && (req.Port < 1 || req.Port > 65535 || req.Dest == "" || len(req.Dest) > 253) {
			t.Fatalf("accepted %+v", req)
		}
		if err != nil && err.Error() == "" {
			t.Fatal("an error without a message")
		}
	})
}

// FuzzJoinForm posts whatever a stranger might to the join and sign-in
// forms of a class server: the answer is a redirect or an error written
// for a person (4xx), never a 500, never the join code or the instructor
// token in a refusal.
func FuzzJoinForm(f *testing.F) {
	cs := newClassServer(f, class.Spec{Name: "fuzz", Scenarios: []string{"selector-typo"}, Capacity: 1000})
	id := cs.created.Class.ID
	for _, seed := range [][2]string{{cs.created.Class.JoinCode, "Ann"}, {"", ""}, {"AAAA-AAAA", "=cmd"}, {"%00", strings.Repeat("x", 300)},
		{cs.created.Class.JoinCode, "\u202eevil"}, {"svi_" + strings.Repeat("a", 32), "<script>"}} {
		f.Add(seed[0], seed[1], "code=x&name=y")
	}
	f.Fuzz(func(t *testing.T, code, name, raw string) {
		for _, req := range []struct {
			path string
			body string
		}{
			{"/join", url.Values{"code": {code}, "name": {name}}.Encode()},
			{"/join", raw},
			{"/class/" + id + "/instructor", url.Values{"token": {code}}.Encode()},
			{"/class/" + id + "/instructor", raw},
		} {
			r, err := http.NewRequest(http.MethodPost, cs.ts.URL+req.path, strings.NewReader(req.body))
			if err != nil {
				continue
			}
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(resp)
			switch {
			case resp.StatusCode >= 500:
				t.Fatalf("POST %s %q: %d %s", req.path, req.body, resp.StatusCode, body)
			case resp.StatusCode >= 400 && (strings.Contains(body, cs.created.InstructorToken) ||
				code != cs.created.Class.JoinCode && strings.Contains(body, cs.created.Class.JoinCode)):
				t.Fatalf("a refusal shows a secret: %s", body)
			}
		}
	})
}

func readAll(resp *http.Response) string {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return string(b)
}
