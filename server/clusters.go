package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/gorilla/websocket"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/web"
)

// createCluster starts creating a cluster from the form and sends the
// browser to the page that follows its progress.
func (s *Server) createCluster(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "the form could not be read: "+err.Error(), http.StatusBadRequest)
		return
	}
	name := strings.TrimSpace(r.PostFormValue("name"))
	if err := cluster.ValidateName(name); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	nodes := 3
	if v := strings.TrimSpace(r.PostFormValue("nodes")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 21 {
			http.Error(w, fmt.Sprintf("nodes %q: use a number from 1 to 21", v), http.StatusBadRequest)
			return
		}
		nodes = n
	}
	mode := strings.TrimSpace(r.PostFormValue("proxyMode"))
	if err := cluster.ValidateProxyMode(mode); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	base := s.Background
	if base == nil {
		base = context.Background()
	}
	op := s.ops.start(base, "", "Creating cluster "+name, "", func(ctx context.Context, op *Operation) error {
		_, err := s.Clusters.Create(ctx, cluster.CreateOptions{Name: name, Workers: nodes - 1, ProxyMode: mode, Progress: op})
		if err != nil {
			s.Log.Error("creating a cluster from the UI", "cluster", name, "err", err)
		}
		return err
	})
	http.Redirect(w, r, "/operations/"+op.ID, http.StatusSeeOther)
}

func (s *Server) operation(w http.ResponseWriter, r *http.Request) {
	op, ok := s.operationFor(w, r)
	if !ok {
		return
	}
	steps, done, errText, summary := op.Snapshot()
	writeHTML(w, r, s, web.Operation(s.scopeOf(r).operationURL(op.ID)+"/events", op.Title, op.Next, viewSteps(steps), done, web.Failure{Summary: summary, Detail: errText}))
}

// operationFor finds the {id} operation of the request's scope: a class
// learner's operations are theirs alone.
func (s *Server) operationFor(w http.ResponseWriter, r *http.Request) (*Operation, bool) {
	op, ok := s.ops.get(chi.URLParam(r, "id"))
	if !ok || op.Owner != s.scopeOf(r).owner {
		http.Error(w, "no such operation", http.StatusNotFound)
		return nil, false
	}
	return op, true
}

func viewSteps(steps []Step) []web.Step {
	out := make([]web.Step, 0, len(steps))
	for _, st := range steps {
		out = append(out, web.Step{Name: st.Name, State: st.State, Error: st.Error, Detail: st.Detail, Took: st.Took.String()})
	}
	return out
}

// operationEvents streams an operation's steps over a websocket: the past
// ones first, then each as it happens, ending with a "finished" or
// "failed" event.
func (s *Server) operationEvents(w http.ResponseWriter, r *http.Request) {
	op, ok := s.operationFor(w, r)
	if !ok {
		return
	}
	// Watch before the handshake completes, so every step published after
	// the client's Dial returns reaches it live.
	past, next, cancel := op.Watch()
	defer cancel()
	conn, err := s.upgrader().Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	defer conn.Close()
	keepAlive(conn)
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	// Notice a client that goes away.
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		for {
			if _, _, err := readFrame(conn); err != nil {
				return
			}
		}
	}()
	send := func(st Step) error {
		conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		b, _ := json.Marshal(st)
		return conn.WriteMessage(websocket.TextMessage, b)
	}
	for _, st := range past {
		if err := send(st); err != nil {
			return
		}
	}
	for {
		select {
		case <-gone:
			return
		case <-ping.C:
			if conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeTimeout)) != nil {
				return
			}
		case st, ok := <-next:
			if !ok {
				_, done, errText, summary := op.Snapshot()
				if done {
					final := Step{State: "finished"}
					if errText != "" {
						// What it means for the learner too, as the live
						// final step says it.
						final = Step{State: "failed", Error: errText, Detail: summary}
					}
					send(final)
				}
				conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
				return
			}
			if st.State == "finished" || (st.State == "failed" && st.Name == "") {
				continue // sent once, from the snapshot, when the channel closes
			}
			if err := send(st); err != nil {
				return
			}
		}
	}
}
