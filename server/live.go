package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/views"
	"github.com/svclab/svclab/server/terminal"
)

// Limits of the live websockets.
const (
	// maxViewMessage bounds what a browser may send on the views socket
	// (a packet-path request is a few hundred bytes).
	maxViewMessage = 4 << 10
	// maxTerminalsPerLearner bounds the terminals one learner has open.
	maxTerminalsPerLearner = 8
	// maxTerminalMessage bounds one terminal input frame (a paste).
	maxTerminalMessage = 64 << 10
	writeTimeout       = 5 * time.Second
	pingEvery          = 5 * time.Second
	// pongWait is how long a socket waits for its client's pong (or any
	// frame) before it counts the client gone: a laptop that slept or a
	// network that dropped leaves no FIN behind.
	pongWait = 2*pingEvery + 5*time.Second
)

// liveTarget finds the scenario, the learner's running attempt and its
// cluster for a websocket request, answering with an error when there is
// none.
func (s *Server) liveTarget(w http.ResponseWriter, r *http.Request) (*scenario.Scenario, *Attempt, cluster.Cluster, bool) {
	sc, ok := s.scenarioFor(w, r)
	if !ok {
		return nil, nil, nil, false
	}
	scope := s.scopeOf(r)
	a, err := scope.current(r.Context(), sc.ID)
	if err != nil {
		if errors.Is(err, ErrNoAttempt) {
			http.Error(w, "start the scenario first", http.StatusConflict)
		} else {
			http.Error(w, "finding your attempt: "+err.Error(), http.StatusInternalServerError)
		}
		return nil, nil, nil, false
	}
	c, err := scope.clusters.Get(r.Context(), a.Cluster)
	if err != nil {
		http.Error(w, fmt.Sprintf("cluster %s of this attempt is not there any more (%v): reset the scenario to set it up again", a.Cluster, err), http.StatusConflict)
		return nil, nil, nil, false
	}
	return sc, a, c, true
}

type viewRequest struct {
	Type string `json:"type"`
	views.PathRequest
}

// parseViewRequest reads a views socket's frame: a packet-path request.
func parseViewRequest(msg []byte) (views.PathRequest, error) {
	var req viewRequest
	if err := json.Unmarshal(msg, &req); err != nil || req.Type != "path" {
		return views.PathRequest{}, errors.New(`the request could not be read: expected {"type":"path",...}`)
	}
	if req.Port < 1 || req.Port > 65535 || req.Dest == "" || len(req.Dest) > 253 || len(req.SourceName) > 253 {
		return views.PathRequest{}, fmt.Errorf("choose a Service port to trace (port %d, address %q)", req.Port, req.Dest)
	}
	return req.PathRequest, nil
}

// Close codes of the views socket, which the page acts on.
const (
	// closeLabChanged: another attempt started, or the cluster was
	// rebuilt; the page loads again to show the new one.
	closeLabChanged = 4001
	// closeLabDown: the lab cannot be watched (its cluster is gone or
	// does not answer); the page shows it down and tries again.
	closeLabDown = 4002
)

// labCheckEvery is how often an open views socket checks that its attempt
// and its cluster's generation are still the learner's current ones.
const labCheckEvery = 2 * time.Second

// labFrame tells the page what the views show: which attempt, on which
// life of which cluster.
type labFrame struct {
	Cluster    string `json:"cluster"`
	Generation string `json:"generation"`
	Attempt    int64  `json:"attempt"`
}

// downHealth is the Health of a lab that cannot be watched at all.
func downHealth(summary string, err error) views.Health {
	h := views.Health{State: views.HealthDown, Summary: summary, StartOver: true, Checked: time.Now(),
		Parts: []views.HealthPart{{ID: views.PartAPI, Title: "Cluster", Text: summary}}}
	if err != nil {
		h.Parts[0].Detail = err.Error()
	}
	return h
}

// viewsSocket streams the views of the learner's running attempt. It ends
// when the attempt or its cluster's generation stops being current, so
// that the page never shows an old lab.
func (s *Server) viewsSocket(w http.ResponseWriter, r *http.Request) {
	sc, ok := s.scenarioFor(w, r)
	if !ok {
		return
	}
	scope := s.scopeOf(r)
	a, err := scope.current(r.Context(), sc.ID)
	if err != nil {
		if errors.Is(err, ErrNoAttempt) {
			http.Error(w, "start the scenario first", http.StatusConflict)
		} else {
			http.Error(w, "finding your attempt: "+err.Error(), http.StatusInternalServerError)
		}
		return
	}
	conn, err := s.upgrader().Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	keepAlive(conn)
	conn.SetReadLimit(maxViewMessage)
	ctx, cancel := context.WithCancel(s.base())
	defer cancel()
	closeWith := func(code int, msg string) {
		conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, trimReason(msg)), time.Now().Add(time.Second))
	}
	down := func(summary string, err error) {
		writeFrame(conn, mustFrame(views.TopicHealth, downHealth(summary, err)))
		closeWith(closeLabDown, summary)
	}
	c, err := scope.clusters.Get(ctx, a.Cluster)
	if err != nil {
		down(fmt.Sprintf("The lab is down: its cluster %s is not there any more.", a.Cluster), err)
		return
	}
	gen, err := cluster.Generation(c)
	if err != nil {
		down(fmt.Sprintf("The lab is down: cluster %s cannot be reached.", a.Cluster), err)
		return
	}
	if writeFrame(conn, mustFrame("lab", labFrame{Cluster: c.Name(), Generation: gen, Attempt: a.ID})) != nil {
		return
	}
	lab, release, err := s.acquireFeed(ctx, c, gen, sc, a)
	if err != nil {
		if ctx.Err() == nil {
			s.Log.Warn("watching a lab", "cluster", c.Name(), "err", err)
			down(fmt.Sprintf("The lab is down: cluster %s does not answer.", a.Cluster), err)
		}
		return
	}
	defer release()
	sub := lab.Bus().Subscribe()
	defer sub.Close()

	// ended carries why the socket ends: another attempt, another
	// generation, a cluster gone.
	type ending struct {
		code  int
		msg   string
		frame views.Frame
	}
	ended := make(chan ending, 1)
	go func() {
		t := time.NewTicker(labCheckEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if now, err := scope.current(ctx, sc.ID); err == nil && now.ID != a.ID {
				ended <- ending{code: closeLabChanged, msg: "another attempt started"}
				return
			}
			c2, err := scope.clusters.Get(ctx, a.Cluster)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				summary := fmt.Sprintf("The lab is down: its cluster %s is not there any more.", a.Cluster)
				ended <- ending{code: closeLabDown, msg: summary, frame: mustFrame(views.TopicHealth, downHealth(summary, err))}
				return
			}
			if g, err := cluster.Generation(c2); err == nil && g != gen {
				ended <- ending{code: closeLabChanged, msg: "the cluster was rebuilt"}
				return
			}
		}
	}()

	private := make(chan views.Frame, 4)
	go func() {
		defer cancel()
		for {
			_, msg, err := readFrame(conn)
			if err != nil {
				return // gone, or a frame over the limit
			}
			req, err := parseViewRequest(msg)
			if err != nil {
				sendPrivate(private, mustFrame("path", map[string]string{"error": err.Error()}))
				continue
			}
			pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
			p, err := lab.Path(pctx, req)
			pcancel()
			if err != nil {
				sendPrivate(private, mustFrame("path", map[string]string{"error": "The packet path could not be traced.", "detail": err.Error()}))
				continue
			}
			sendPrivate(private, mustFrame("path", p))
		}
	}()
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-ended:
			if e.frame != nil {
				writeFrame(conn, e.frame)
			}
			closeWith(e.code, e.msg)
			return
		case _, open := <-sub.Ready():
			if !open {
				// The Lab stopped: its cluster was rebuilt or another
				// attempt took it.
				closeWith(closeLabChanged, "the lab changed")
				return
			}
			for _, f := range sub.Take() {
				if writeFrame(conn, f) != nil {
					return
				}
			}
		case f := <-private:
			if writeFrame(conn, f) != nil {
				return
			}
		case <-ping.C:
			if conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeTimeout)) != nil {
				return
			}
		}
	}
}

func sendPrivate(ch chan views.Frame, f views.Frame) {
	select {
	case ch <- f:
	default: // the client asks faster than it reads
	}
}

func writeFrame(conn *websocket.Conn, f []byte) error {
	conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	return conn.WriteMessage(websocket.TextMessage, f)
}

func mustFrame(topic string, data any) views.Frame {
	b, _ := json.Marshal(map[string]any{"topic": topic, "time": time.Now(), "data": data})
	return b
}

// trimReason fits a close reason into a control frame.
func trimReason(s string) string {
	for len(s) > 120 {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

type terminalControl struct {
	Type string `json:"type"`
	Rows int    `json:"rows"`
	Cols int    `json:"cols"`
}

// keepAlive makes a pong from conn's client push its read deadline on
// (readFrame sets it).
func keepAlive(conn *websocket.Conn) {
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(pongWait)) })
}

// readFrame reads the client's next frame. It fails once the client has
// sent neither a frame nor a pong for pongWait since the server began
// waiting, and the socket's reader then ends it. The wait counts from the
// read, not from the upgrade: what a socket does before it reads
// (preparing a node's kubectl, starting a lab's feed) may take longer.
func readFrame(conn *websocket.Conn) (int, []byte, error) {
	conn.SetReadDeadline(time.Now().Add(pongWait))
	return conn.ReadMessage()
}

// parseResize reads a terminal's text frame: a resize to rows × cols
// (1 to 1000 each), or nothing svclab acts on.
func parseResize(msg []byte) ([2]uint16, bool) {
	var ctl terminalControl
	if json.Unmarshal(msg, &ctl) != nil || ctl.Type != "resize" {
		return [2]uint16{}, false
	}
	if ctl.Rows < 1 || ctl.Cols < 1 || ctl.Rows > 1000 || ctl.Cols > 1000 {
		return [2]uint16{}, false
	}
	return [2]uint16{uint16(ctl.Rows), uint16(ctl.Cols)}, true
}

// terminalSocket bridges xterm.js to a shell on one of the attempt's
// cluster's nodes: binary frames carry bytes, text frames resize.
func (s *Server) terminalSocket(w http.ResponseWriter, r *http.Request) {
	_, a, c, ok := s.liveTarget(w, r)
	if !ok {
		return
	}
	node := r.URL.Query().Get("node")
	nodes, err := c.Nodes(r.Context())
	if err != nil {
		http.Error(w, "listing the nodes: "+err.Error(), http.StatusBadGateway)
		return
	}
	var target *cluster.Node
	for i := range nodes {
		if nodes[i].Name == node {
			target = &nodes[i]
		}
	}
	if target == nil {
		http.Error(w, fmt.Sprintf("cluster %s has no node %q", c.Name(), node), http.StatusNotFound)
		return
	}
	// A learner's open terminals are bounded: each is a shell (and its
	// processes) on a node of theirs.
	release, ok := s.terms.take(s.scopeOf(r).owner)
	if !ok {
		http.Error(w, fmt.Sprintf("You have %d terminals open already: close one (its browser tab) before opening another.", maxTerminalsPerLearner), http.StatusTooManyRequests)
		return
	}
	defer release()
	conn, err := s.upgrader().Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	keepAlive(conn)
	conn.SetReadLimit(maxTerminalMessage)
	ctx, cancel := context.WithCancel(s.base())
	defer cancel()
	closeWith := func(code int, msg string) {
		conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, trimReason(msg)), time.Now().Add(time.Second))
	}
	scope := s.scopeOf(r)
	key := tapKey(c.Name(), node)
	if scope.readOnly {
		s.watchTerminal(ctx, conn, key, node)
		return
	}
	publish, resizeTap, endTap := s.taps.session(key)
	defer endTap()
	opts := terminal.Options{}
	if target.Role == cluster.RoleControlPlane && s.KubeBin != nil {
		conn.SetWriteDeadline(time.Now().Add(writeTimeout))
		conn.WriteMessage(websocket.TextMessage, []byte("Preparing kubectl on "+node+" …"))
		if opts.KubeBin, err = s.KubeBin(ctx); err != nil {
			s.Log.Error("finding kubectl for a terminal", "node", node, "err", err)
			closeWith(websocket.CloseInternalServerErr, "kubectl could not be prepared on "+node+": the server's log says why")
			return
		}
	}
	sh, err := terminal.Open(ctx, c, node, opts)
	if err != nil {
		// Why goes to the log: it names host paths.
		s.Log.Error("opening a terminal", "node", node, "err", err)
		closeWith(websocket.CloseInternalServerErr, "the shell on "+node+" could not start: the lab may be down (see the top of the page, or Start over)")
		return
	}
	defer sh.Close()
	conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	conn.WriteMessage(websocket.TextMessage, []byte(""))
	// Every command line typed is kept on the attempt's timeline (replay,
	// audit) and shown on the live one.
	rec := &commandRecorder{record: func(cmd string) {
		ev := views.TimelineEvent{Time: time.Now(), Kind: views.KindCommand, Source: node, Text: cmd}
		s.record(a.ID, ev)
		if lab := s.runningFeed(c.Name(), a.ID); lab != nil {
			lab.Record(ev)
		}
	}}
	// Pings find a browser that went away without a word; its terminal
	// (and the learner's count of them) is freed within pongWait.
	go func() {
		t := time.NewTicker(pingEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeTimeout)) != nil {
					cancel()
					return
				}
			}
		}
	}()
	// A terminal of a lab that stops being the learner's to change (their
	// exam is over) closes.
	if scope.writable != nil {
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if !scope.writable(ctx) {
						closeWith(websocket.ClosePolicyViolation, "your exam is over: the terminal is closed")
						cancel()
						return
					}
				}
			}
		}()
	}
	// Browser → shell.
	go func() {
		defer cancel()
		for {
			typ, msg, err := readFrame(conn)
			if err != nil {
				return
			}
			if typ == websocket.BinaryMessage {
				rec.feed(msg)
				if scope.activity != nil {
					scope.activity()
				}
				if _, err := sh.Write(msg); err != nil {
					return
				}
				continue
			}
			if sz, ok := parseResize(msg); ok {
				resizeTap(sz)
				// An ioctl on the server's side of the terminal: a
				// window dragged sends dozens a second, and each costs
				// nothing on the node.
				sh.Resize(sz[0], sz[1])
			}
		}
	}()
	// Shell → browser.
	go func() {
		defer cancel()
		buf := make([]byte, 32<<10)
		for {
			n, err := sh.Read(buf)
			if n > 0 {
				publish(buf[:n])
				conn.SetWriteDeadline(time.Now().Add(writeTimeout))
				if conn.WriteMessage(websocket.BinaryMessage, buf[:n]) != nil {
					return
				}
			}
			if err != nil {
				// A shell that could not run (its node's container is
				// gone, the node is out of processes) is told apart from
				// one the learner left; why goes to the log, not to the
				// page (the error names host paths).
				if err := sh.Err(); err != nil {
					s.Log.Warn("a terminal's shell ended", "node", node, "err", err)
					closeWith(websocket.CloseInternalServerErr, "the shell on "+node+" could not run: the lab may be down (see the top of the page, or Start over)")
					return
				}
				closeWith(websocket.CloseNormalClosure, "the shell exited")
				return
			}
		}
	}()
	<-ctx.Done()
}

// watchTerminal shows the instructor what the learner's terminals on a
// node show, read-only: what the learner types is echoed by their shell,
// what the instructor types goes nowhere.
func (s *Server) watchTerminal(ctx context.Context, conn *websocket.Conn, key, node string) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	recent, size, out, stop := s.taps.watch(key)
	defer stop()
	go func() {
		defer cancel()
		for {
			if _, _, err := readFrame(conn); err != nil {
				return // input is ignored; a read error means the watcher left
			}
		}
	}()
	conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	if conn.WriteMessage(websocket.TextMessage, []byte("")) != nil {
		return
	}
	// The learner's shell draws for the learner's terminal (line editing,
	// wrapping): the watcher shows it at that size, told first.
	if size != ([2]uint16{}) && writeSize(conn, size) != nil {
		return
	}
	banner := "\x1b[2m[watching " + node + " read-only]\x1b[0m\r\n"
	if len(recent) == 0 {
		banner = "\x1b[2m[watching " + node + " read-only: the learner has no terminal open here yet]\x1b[0m\r\n"
	}
	if writeBinary(conn, append([]byte(banner), recent...)) != nil {
		return
	}
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-out:
			if m.data == nil {
				if writeSize(conn, m.size) != nil {
					return
				}
				continue
			}
			if writeBinary(conn, m.data) != nil {
				return
			}
		case <-ping.C:
			if conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeTimeout)) != nil {
				return
			}
		}
	}
}

// writeSize tells a read-only terminal the learner's size (rows, cols), as
// the control message the learner's terminal sends for a resize, with
// type "size".
func writeSize(conn *websocket.Conn, sz [2]uint16) error {
	b, err := json.Marshal(terminalControl{Type: "size", Rows: int(sz[0]), Cols: int(sz[1])})
	if err != nil {
		return err
	}
	conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	return conn.WriteMessage(websocket.TextMessage, b)
}

func writeBinary(conn *websocket.Conn, b []byte) error {
	conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	return conn.WriteMessage(websocket.BinaryMessage, b)
}

// commandRecorder turns typed bytes into command lines for the timeline:
// printable characters accumulate, backspace removes one, escape sequences
// (arrows, history) and Ctrl-C/Ctrl-U discard the line, Enter records it.
type commandRecorder struct {
	line   []rune
	escape bool
	record func(string)
}

func (c *commandRecorder) feed(b []byte) {
	for _, r := range string(b) {
		switch {
		case c.escape:
			if (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z') || r == '~' {
				c.escape = false
			}
		case r == 0x1b:
			c.escape = true
		case r == '\r' || r == '\n':
			if cmd := strings.TrimSpace(string(c.line)); cmd != "" {
				if len(cmd) > 500 {
					cmd = cmd[:500] + "…"
				}
				c.record(cmd)
			}
			c.line = c.line[:0]
		case r == 0x7f || r == 0x08:
			if len(c.line) > 0 {
				c.line = c.line[:len(c.line)-1]
			}
		case r == 0x03 || r == 0x15:
			c.line = c.line[:0]
		case r >= 0x20:
			if len(c.line) < 4096 {
				c.line = append(c.line, r)
			}
		}
	}
}

// terminalCounts counts each learner's open terminals.
type terminalCounts struct {
	mu sync.Mutex
	n  map[string]int
}

// take counts one more terminal of owner, unless they have
// maxTerminalsPerLearner open; release counts it off.
func (t *terminalCounts) take(owner string) (release func(), ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == nil {
		t.n = map[string]int{}
	}
	if t.n[owner] >= maxTerminalsPerLearner {
		return nil, false
	}
	t.n[owner]++
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.n[owner]--; t.n[owner] <= 0 {
			delete(t.n, owner)
		}
	}, true
}
