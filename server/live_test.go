package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/svclab/svclab/lab/views"
)

type frame struct {
	Topic string          `json:"topic"`
	Data  json.RawMessage `json:"data"`
}

func dialViews(t testing.TB, l *labServer) *websocket.Conn {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.Dial(wsURL(l.url)+"/scenarios/selector-typo/views", http.Header{"Origin": {l.url}})
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	return ws
}

// next reads frames until one of topic satisfies ok.
func next(t testing.TB, ws *websocket.Conn, topic string, ok func(json.RawMessage) bool) json.RawMessage {
	t.Helper()
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for a %s frame: %v", topic, err)
		}
		var f frame
		if err := json.Unmarshal(msg, &f); err != nil {
			t.Fatal(err)
		}
		if f.Topic == topic && (ok == nil || ok(f.Data)) {
			return f.Data
		}
	}
}

func rulesSummary(summary string) func(json.RawMessage) bool {
	return func(d json.RawMessage) bool {
		var v views.RulesView
		json.Unmarshal(d, &v)
		return len(v.Groups) == 1 && strings.Contains(v.Groups[0].Summary, summary)
	}
}

func TestViewsSocket(t *testing.T) {
	l := newLabServer(t)
	l.startAttempt(t, "selector-typo")
	ws := dialViews(t, l)
	defer ws.Close()
	next(t, ws, "slices", func(d json.RawMessage) bool { return strings.Contains(string(d), `"service":"shop/web"`) })
	next(t, ws, "rules/lab-worker", rulesSummary("rejected (no endpoints)"))
	// The rules change on the nodes: the panel gets the new groups, with
	// the changed lines marked.
	l.fc.SetRules(readTestdata(t, "nft-selector-typo-fixed.txt"))
	d := next(t, ws, "rules/lab-worker", rulesSummary("load-balanced to 2 endpoints"))
	var v views.RulesView
	json.Unmarshal(d, &v)
	changes := map[string]int{}
	for _, line := range v.Groups[0].Lines {
		changes[line.Change]++
	}
	if changes["added"] != 2 || changes["removed"] != 2 {
		t.Errorf("changes %v in %+v", changes, v.Groups[0].Lines)
	}
	next(t, ws, "probes", func(d json.RawMessage) bool { return strings.Contains(string(d), `"outcome":"success"`) })
	next(t, ws, "conntrack/lab-worker", func(d json.RawMessage) bool { return strings.Contains(string(d), `"backend":"10.244.2.2:8080"`) })
	// The packet path, asked for on the socket.
	ws.WriteJSON(map[string]any{"type": "path", "sourceName": "lab-worker", "fromNode": true, "dest": "10.96.38.171", "protocol": "tcp", "port": 80})
	next(t, ws, "path", func(d json.RawMessage) bool { return strings.Contains(string(d), `"outcome":"dnat"`) })
	// Malformed requests get an answer, not a closed socket.
	ws.WriteMessage(websocket.TextMessage, []byte("nonsense"))
	next(t, ws, "path", func(d json.RawMessage) bool { return strings.Contains(string(d), "could not be read") })
	ws.WriteJSON(map[string]any{"type": "path", "sourceName": "nowhere", "fromNode": true, "dest": "10.96.38.171", "port": 80})
	next(t, ws, "path", func(d json.RawMessage) bool { return strings.Contains(string(d), `no node or Pod \"nowhere\"`) })

	// An oversized frame ends that client's socket; the others go on.
	other := dialViews(t, l)
	defer other.Close()
	next(t, other, "rules/lab-worker", nil)
	ws.WriteMessage(websocket.TextMessage, []byte(strings.Repeat("x", maxViewMessage+1)))
	ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
				t.Logf("oversized frame closed the socket with %v", err)
			}
			break
		}
	}
	l.fc.SetRules(readTestdata(t, "nft-selector-typo-broken.txt"))
	next(t, other, "rules/lab-worker", rulesSummary("rejected"))
}

// A client that never reads holds up neither the lab nor the others.
func TestViewsSlowClient(t *testing.T) {
	l := newLabServer(t)
	l.startAttempt(t, "selector-typo")
	stuck := dialViews(t, l) // never reads
	defer stuck.Close()
	ws := dialViews(t, l)
	defer ws.Close()
	next(t, ws, "rules/lab-worker", nil)
	dumps := []string{readTestdata(t, "nft-selector-typo-fixed.txt"), readTestdata(t, "nft-selector-typo-broken.txt")}
	for i := 0; i < 40; i++ {
		l.fc.SetRules(dumps[i%2])
		want := []string{"load-balanced", "rejected"}[i%2]
		next(t, ws, "rules/lab-worker", rulesSummary(want))
	}
}

func TestTerminalSocketBadInput(t *testing.T) {
	l := newLabServer(t)
	l.startAttempt(t, "selector-typo")
	for _, tc := range []struct {
		query string
		code  int
	}{
		{"?node=elsewhere", http.StatusNotFound},
		{"", http.StatusNotFound},
	} {
		_, resp, err := websocket.DefaultDialer.Dial(wsURL(l.url)+"/scenarios/selector-typo/terminal"+tc.query, http.Header{"Origin": {l.url}})
		if err == nil || resp == nil || resp.StatusCode != tc.code {
			t.Errorf("terminal%s: %v %v, want %d", tc.query, err, resp, tc.code)
		}
	}
}

func TestCommandRecorder(t *testing.T) {
	var got []string
	r := &commandRecorder{record: func(s string) { got = append(got, s) }}
	for _, in := range []string{"kubectl get pox", "\x7fds\r", "ls\x1b[A\x03", "echo hi\r", "\r", "héllo\r"} {
		r.feed([]byte(in))
	}
	if strings.Join(got, "|") != "kubectl get pods|echo hi|héllo" {
		t.Errorf("recorded %q", got)
	}
}

// The terminal socket carries bytes both ways, resizes the node's terminal,
// records typed commands on the timeline, and closes on an oversized frame.
func TestTerminalSocket(t *testing.T) {
	l := newLabServer(t)
	l.startAttempt(t, "selector-typo")
	views := dialViews(t, l) // a running Lab records the commands
	defer views.Close()
	next(t, views, "slices", nil)
	term, resp, err := websocket.DefaultDialer.Dial(wsURL(l.url)+"/scenarios/selector-typo/terminal?node=lab-worker", http.Header{"Origin": {l.url}})
	if err != nil {
		t.Fatal(err, resp)
	}
	defer term.Close()
	term.WriteMessage(websocket.TextMessage, []byte(`{"type":"resize","rows":40,"cols":120}`))
	term.WriteMessage(websocket.TextMessage, []byte(`{"type":"resize","rows":0,"cols":99999}`)) // ignored
	term.WriteMessage(websocket.TextMessage, []byte(`not json`))                                // ignored
	term.WriteMessage(websocket.BinaryMessage, []byte("kubectl get pods -A\r"))
	term.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got strings.Builder
	for !strings.Contains(got.String(), "kubectl get pods -A\r") {
		typ, msg, err := term.ReadMessage()
		if err != nil {
			t.Fatalf("terminal: %v (so far %q)", err, got.String())
		}
		if typ == websocket.BinaryMessage {
			got.Write(msg)
		}
	}
	next(t, views, "timeline", func(d json.RawMessage) bool {
		return strings.Contains(string(d), `"kind":"command"`) && strings.Contains(string(d), "kubectl get pods -A")
	})
	// The command is kept on the attempt's timeline for replay and audit.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		found := false
		for _, e := range l.tl.events(1) {
			found = found || (e.Kind == "command" && e.Source == "lab-worker" && e.Text == "kubectl get pods -A")
		}
		if found {
			break
		}
		if time.Now().Add(20 * time.Millisecond).After(deadline) {
			t.Errorf("the command is not on the attempt's timeline: %+v", l.tl.events(1))
		}
	}
	for deadline := time.Now().Add(5 * time.Second); len(l.fc.Resizes()) == 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if r := l.fc.Resizes(); len(r) != 1 || r[0] != "rows 40 cols 120" {
		t.Errorf("resizes %q", r)
	}
	// A frame over the limit ends this terminal, and only it.
	term.WriteMessage(websocket.BinaryMessage, make([]byte, maxTerminalMessage+1))
	for {
		if _, _, err := term.ReadMessage(); err != nil {
			break
		}
	}
	if page := get(t, l.url+"/"); !strings.Contains(page, "selector-typo") {
		t.Error("the server stopped serving")
	}
}

// A control-plane terminal whose kubectl takes longer to prepare than a
// silent client is allowed (a busy node, a class starting at once) opens
// and works: the client's silence counts from when the shell reads.
func TestTerminalSlowToPrepare(t *testing.T) {
	kubeBin := filepath.Join(t.TempDir(), "svclab-kube")
	if err := os.WriteFile(kubeBin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	l := newLabServer(t, func(s *Server) {
		s.KubeBin = func(ctx context.Context) (string, error) {
			select {
			case <-time.After(pongWait + 2*time.Second):
			case <-ctx.Done():
				return "", ctx.Err()
			}
			return kubeBin, nil
		}
	})
	l.startAttempt(t, "selector-typo")
	term, resp, err := websocket.DefaultDialer.Dial(wsURL(l.url)+"/scenarios/selector-typo/terminal?node=lab-control-plane", http.Header{"Origin": {l.url}})
	if err != nil {
		t.Fatal(err, resp)
	}
	defer term.Close()
	term.WriteMessage(websocket.BinaryMessage, []byte("kubectl get pods\r"))
	term.SetReadDeadline(time.Now().Add(pongWait + 20*time.Second))
	var got strings.Builder
	for !strings.Contains(got.String(), "kubectl get pods\r") {
		_, msg, err := term.ReadMessage()
		if err != nil {
			t.Fatalf("terminal: %v (so far %q)", err, got.String())
		}
		got.Write(msg)
	}
	if !strings.HasPrefix(got.String(), "Preparing kubectl on lab-control-plane") {
		t.Errorf("the terminal did not say it prepares kubectl first: %q", got.String())
	}
}

// A browser that went away without a word (it answers no ping) loses its
// terminal within pongWait of the server's waiting for it.
func TestTerminalSilentClientDropped(t *testing.T) {
	l := newLabServer(t)
	l.startAttempt(t, "selector-typo")
	term, resp, err := websocket.DefaultDialer.Dial(wsURL(l.url)+"/scenarios/selector-typo/terminal?node=lab-worker", http.Header{"Origin": {l.url}})
	if err != nil {
		t.Fatal(err, resp)
	}
	defer term.Close()
	term.SetPingHandler(func(string) error { return nil }) // no pong
	start := time.Now()
	term.SetReadDeadline(start.Add(pongWait + 2*pingEvery + 10*time.Second))
	for {
		if _, _, err := term.ReadMessage(); err != nil {
			var ce *websocket.CloseError
			if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() && !errors.As(err, &ce) {
				t.Fatalf("the server kept a silent client's terminal for %s", time.Since(start).Round(time.Second))
			}
			break
		}
	}
	if d := time.Since(start); d < pongWait {
		t.Errorf("the terminal closed after %s, before pongWait (%s)", d, pongWait)
	}
}

// The live views slow down together once there are more than two running
// per CPU.
func TestLabsPace(t *testing.T) {
	per := 2 * runtime.NumCPU()
	for _, tc := range []struct{ running, want int }{
		{0, 1}, {1, 1}, {per, 1}, {per + 1, 2}, {3 * per, 3}, {3*per + 1, 4},
	} {
		ls := &feeds{running: map[feedKey]*feedEntry{}}
		for i := range tc.running {
			ls.running[feedKey{cluster: fmt.Sprint(i)}] = &feedEntry{}
		}
		if got := ls.pace(); got != tc.want {
			t.Errorf("%d labs running: pace %d, want %d", tc.running, got, tc.want)
		}
	}
}
