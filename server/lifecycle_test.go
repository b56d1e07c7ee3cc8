package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/svclab/svclab/lab/cluster/owner"
	"github.com/svclab/svclab/lab/views"
)

// waitClose reads ws until it closes and returns the close error.
func waitClose(t *testing.T, ws *websocket.Conn, within time.Duration) (*websocket.CloseError, []string) {
	t.Helper()
	ws.SetReadDeadline(time.Now().Add(within))
	var topics []string
	for {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) {
				t.Fatalf("the socket did not close within %s: %v", within, err)
			}
			return ce, topics
		}
		var f frame
		json.Unmarshal(msg, &f)
		topics = append(topics, f.Topic)
	}
}

// The views say which attempt on which life of the cluster they show, and
// end when that stops being the learner's: a rebuilt cluster, a new
// attempt, a cluster gone (with a down health frame first).
func TestViewsFollowTheLabsLife(t *testing.T) {
	l := newLabServer(t)
	l.startAttempt(t, "selector-typo")
	ws := dialViews(t, l)
	var lab labFrame
	json.Unmarshal(next(t, ws, "lab", nil), &lab)
	if lab.Cluster != "lab" || lab.Attempt != 1 || len(lab.Generation) != 12 {
		t.Errorf("lab frame %+v", lab)
	}
	next(t, ws, views.TopicHealth, func(d json.RawMessage) bool {
		var h views.Health
		json.Unmarshal(d, &h)
		return h.State == views.HealthHealthy
	})
	l.fc.Rebuild()
	if ce, _ := waitClose(t, ws, 3*labCheckEvery); ce.Code != closeLabChanged {
		t.Errorf("rebuilt: closed with %v", ce)
	}
	// The next socket shows the new life, from a new Lab.
	ws = dialViews(t, l)
	var lab2 labFrame
	json.Unmarshal(next(t, ws, "lab", nil), &lab2)
	if lab2.Generation == lab.Generation || lab2.Attempt != 1 {
		t.Errorf("after the rebuild: %+v (before %+v)", lab2, lab)
	}
	next(t, ws, "slices", nil)
	l.s.feeds.mu.Lock()
	n := len(l.s.feeds.running)
	l.s.feeds.mu.Unlock()
	if n != 1 {
		t.Errorf("%d Labs run for one cluster", n)
	}
	// Another attempt (Start over) ends it too.
	if code, _ := post(t, l.url+"/scenarios/selector-typo/reset", url.Values{"confirmed": {"yes"}}); code != http.StatusSeeOther {
		t.Fatalf("reset: %d", code)
	}
	l.s.ops.wait()
	if ce, _ := waitClose(t, ws, 3*labCheckEvery); ce.Code != closeLabChanged {
		t.Errorf("reset: closed with %v", ce)
	}
	// A cluster gone: the socket says the lab is down, and closes.
	ws = dialViews(t, l)
	next(t, ws, "slices", nil)
	l.p.Delete(t.Context(), "lab")
	ce, topics := waitClose(t, ws, 3*labCheckEvery)
	if ce.Code != closeLabDown || topics[len(topics)-1] != views.TopicHealth || !strings.Contains(ce.Text, "The lab is down") {
		t.Errorf("cluster gone: closed with %v after %v", ce, topics)
	}
	// A new socket to a lab that is gone gets the same, at once.
	ws = dialViews(t, l)
	h := next(t, ws, views.TopicHealth, nil)
	if !strings.Contains(string(h), `"state":"down"`) || !strings.Contains(string(h), `"startOver":true`) || !strings.Contains(string(h), `"detail":`) {
		t.Errorf("health of a gone lab: %s", h)
	}
}

// End, delete and the Clusters page: each asks first and says what is
// lost, then does it.
func TestLifecycleActions(t *testing.T) {
	l := newLabServer(t)
	l.startAttempt(t, "selector-typo")
	page := get(t, l.url+"/scenarios/selector-typo")
	for _, w := range []string{`id="reset"`, `id="end"`, `id="delete-lab"`, `data-confirm-text="The scenario is set up again from scratch on cluster lab`, `id="confirm-dialog"`, "Show hint 1 of 3"} {
		if !strings.Contains(page, w) {
			t.Errorf("the workspace lacks %q", w)
		}
	}
	clusters := get(t, l.url+"/clusters")
	for _, w := range []string{`data-cluster="lab"`, "A Service that refuses every connection", "attempt 1, running", `action="/scenarios/selector-typo/end"`, `action="/clusters/lab/delete"`} {
		if !strings.Contains(clusters, w) {
			t.Errorf("the Clusters page lacks %q", w)
		}
	}
	if code, body := post(t, l.url+"/scenarios/selector-typo/end", nil); code != http.StatusOK || !strings.Contains(body, "End this scenario?") {
		t.Errorf("an unconfirmed end: %d", code)
	}
	if cur, _ := l.fa.Current(t.Context(), DefaultLearner, "selector-typo"); cur.State != StateRunning {
		t.Errorf("an unconfirmed end ended it: %+v", cur)
	}
	if code, _ := post(t, l.url+"/scenarios/selector-typo/end", url.Values{"confirmed": {"yes"}}); code != http.StatusSeeOther {
		t.Errorf("end: %d", code)
	}
	l.s.ops.wait()
	if cur, _ := l.fa.Current(t.Context(), DefaultLearner, "selector-typo"); cur.State != StateAbandoned {
		t.Errorf("after end: %+v", cur)
	}
	if page := get(t, l.url+"/scenarios/selector-typo"); !strings.Contains(page, `id="start-form"`) {
		t.Error("after end the scenario page does not offer to start")
	}
	// Delete the lab from the workspace: the attempt ends, the cluster goes.
	l.startAttempt(t, "selector-typo")
	if code, body := post(t, l.url+"/scenarios/selector-typo/delete-lab", nil); code != http.StatusOK || !strings.Contains(body, "Delete cluster lab?") || !strings.Contains(body, "The scenario running on it ends") {
		t.Errorf("an unconfirmed delete: %d %s", code, body)
	}
	if code, _ := post(t, l.url+"/scenarios/selector-typo/delete-lab", url.Values{"confirmed": {"yes"}}); code != http.StatusSeeOther {
		t.Errorf("delete: %d", code)
	}
	l.s.ops.wait()
	if cur, _ := l.fa.Current(t.Context(), DefaultLearner, "selector-typo"); cur.State != StateAbandoned || !l.gone() {
		t.Errorf("after delete: %+v, cluster gone %v", cur, l.gone())
	}
	if clusters := get(t, l.url+"/clusters"); !strings.Contains(clusters, `id="no-clusters"`) {
		t.Error("the Clusters page still lists the deleted cluster")
	}
	if code, _ := post(t, l.url+"/clusters/lab/delete", url.Values{"confirmed": {"yes"}}); code != http.StatusNotFound {
		t.Errorf("deleting a cluster that is gone: %d", code)
	}
	if code, _ := post(t, l.url+"/clusters/Bad_Name/delete", nil); code != http.StatusBadRequest {
		t.Errorf("a bad name: %d", code)
	}
}

// While a start over runs, the scenario's page is its operation's: the
// attempt it would show is being set up.
func TestScenarioPageFollowsARunningStartOver(t *testing.T) {
	l := newLabServer(t)
	l.startAttempt(t, "selector-typo")
	hold := make(chan struct{})
	l.fa.mu.Lock()
	l.fa.hold = hold
	l.fa.mu.Unlock()
	code, _ := post(t, l.url+"/scenarios/selector-typo/reset", url.Values{"confirmed": {"yes"}})
	if code != http.StatusSeeOther {
		t.Fatalf("reset: %d", code)
	}
	resp, err := noRedirect.Get(l.url + "/scenarios/selector-typo")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/operations/") {
		t.Errorf("the page during the start over: %d → %q", resp.StatusCode, loc)
	}
	close(hold)
	l.s.ops.wait()
	if page := get(t, l.url+"/scenarios/selector-typo"); !strings.Contains(page, `data-attempt="2"`) {
		t.Error("after the start over the page does not show attempt 2")
	}
}

// Deleting a cluster another process holds is refused, as the command
// line refuses it, and says who holds it.
func TestDeleteRefusesAClusterSomebodyHolds(t *testing.T) {
	l := newLabServer(t)
	dir := t.TempDir()
	mine, err := owner.New(owner.Options{Dir: dir, Command: "svclab serve"})
	if err != nil {
		t.Fatal(err)
	}
	l.s.Owners = mine
	other, _ := owner.New(owner.Options{Dir: dir, Command: "svclab exercise run"})
	lease, err := other.Acquire(t.Context(), owner.Claim{Backend: "embedded", Cluster: "lab"}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	code, _ := post(t, l.url+"/clusters/lab/delete", url.Values{"confirmed": {"yes"}})
	if code != http.StatusSeeOther {
		t.Fatalf("delete: %d", code)
	}
	l.s.ops.wait()
	if l.gone() {
		t.Fatal("a cluster another process holds was deleted")
	}
	op, _ := l.s.ops.get("1")
	_, done, raw, summary := op.Snapshot()
	if !done || !strings.Contains(summary, "Cluster lab is in use by svclab exercise run") {
		t.Errorf("the operation: done %v, %q (%s)", done, summary, raw)
	}
	lease.Close()
	post(t, l.url+"/clusters/lab/delete", url.Values{"confirmed": {"yes"}})
	l.s.ops.wait()
	if !l.gone() {
		t.Error("the cluster was not deleted once free")
	}
}
