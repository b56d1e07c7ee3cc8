package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"github.com/svclab/svclab/lab/class"
	"github.com/svclab/svclab/web"
)

// classFrame is one message of a class's event stream: first the snapshot
// the person may see (the whole board for the instructor, their own row
// for a learner), then each change.
type classFrame struct {
	Kind     string          `json:"kind"` // "snapshot" or "update"
	Snapshot *class.Snapshot `json:"snapshot,omitempty"`
	Update   *class.Update   `json:"update,omitempty"`
}

// classEvents streams the board (instructor) or the learner's own row, lab
// and messages (learner) over a websocket.
func (s *Server) classEvents(w http.ResponseWriter, r *http.Request) {
	cc := classOf(r)
	// Subscribe before the snapshot, so nothing falls between them.
	sub, err := cc.room.Subscribe(cc.who, 256)
	if err != nil {
		refuse(w, r, err)
		return
	}
	defer sub.Cancel()
	snap, err := cc.room.Snapshot(r.Context(), cc.who)
	if err != nil {
		http.Error(w, "the class could not be read: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	conn, err := s.upgrader().Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	keepAlive(conn)
	conn.SetReadLimit(512)
	ctx, cancel := context.WithCancel(s.base())
	defer cancel()
	go func() {
		defer cancel()
		for {
			if _, _, err := readFrame(conn); err != nil {
				return // the page went away
			}
		}
	}()
	send := func(f classFrame) error {
		b, err := json.Marshal(f)
		if err != nil {
			return err
		}
		conn.SetWriteDeadline(time.Now().Add(writeTimeout))
		return conn.WriteMessage(websocket.TextMessage, b)
	}
	if send(classFrame{Kind: "snapshot", Snapshot: &snap}) != nil {
		return
	}
	dropped := sub.Dropped()
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case u, ok := <-sub.C:
			if !ok {
				conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "the class has ended on this server"), time.Now().Add(time.Second))
				return
			}
			if d := sub.Dropped(); d != dropped {
				// The page read too slowly and missed changes: a fresh
				// snapshot puts it right.
				dropped = d
				snap, err := cc.room.Snapshot(ctx, cc.who)
				if err != nil || send(classFrame{Kind: "snapshot", Snapshot: &snap}) != nil {
					return
				}
				continue
			}
			if send(classFrame{Kind: "update", Update: &u}) != nil {
				return
			}
		case <-ping.C:
			if conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeTimeout)) != nil {
				return
			}
		}
	}
}

// boardView draws a board snapshot for the pages.
func boardView(snap class.Snapshot, s *Server) web.BoardView {
	var v web.BoardView
	for _, id := range snap.Scenarios {
		ref := web.ScenarioRef{ID: id, Title: id}
		if s.Catalog != nil {
			if sc := s.Catalog.Get(id); sc != nil {
				ref.Title = sc.Title
			}
		}
		v.Scenarios = append(v.Scenarios, ref)
	}
	for _, r := range snap.Rows {
		row := web.BoardRow{LearnerID: r.Learner.ID, Name: r.Learner.Name, Lab: web.LabView{
			State: string(r.Lab.State), Cluster: r.Lab.Cluster, Reason: r.Lab.Reason, Position: r.Lab.Position}}
		if !r.Lab.ExpiresAt.IsZero() && r.Lab.State == "ready" {
			row.Lab.Expires = r.Lab.ExpiresAt.UTC().Format(time.RFC3339)
		}
		for _, c := range r.Cells {
			cv := web.CellView{Scenario: c.Scenario, State: string(c.State), TimeSpent: c.TimeSpent.Round(time.Second).String(), Hints: c.HintsUsed, Checks: c.Checks}
			if c.LastCheck != nil {
				cv.Score = c.LastCheck.Text
				if cv.Score == "" {
					cv.Score = fmt.Sprintf("%.0f%%", c.LastCheck.Score) // recorded before scores had their text
				}
			}
			row.Cells = append(row.Cells, cv)
		}
		v.Rows = append(v.Rows, row)
	}
	for _, m := range snap.Messages {
		v.Messages = append(v.Messages, web.MessageView{Kind: m.Kind, Scenario: m.Scenario, Body: m.Body, At: m.At.UTC().Format("15:04"), Private: m.To != ""})
	}
	return v
}
