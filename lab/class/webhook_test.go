package class

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svclab/svclab/internal/pgtest"
	"github.com/svclab/svclab/lab/class/labs"
)

// receiver is a webhook receiver on loopback that records what arrives and
// answers 503 to the first delivery of each id in fail.
type receiver struct {
	mu    sync.Mutex
	got   []WebhookEvent
	tries map[string]int
	bad   []string
	// signed are the signature headers and bodies, checked at the end
	// (the class's secret is known once the class exists, after the first
	// deliveries may have arrived).
	signed [][2]string
	failN  int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.signed = append(rc.signed, [2]string{r.Header.Get("X-Svclab-Signature"), string(body)})
	var e WebhookEvent
	if err := json.Unmarshal(body, &e); err != nil {
		rc.bad = append(rc.bad, "bad body "+string(body))
	}
	if r.Header.Get("X-Svclab-Event") != e.Type || r.Header.Get("X-Svclab-Delivery") != e.ID {
		rc.bad = append(rc.bad, "headers disagree with the body")
	}
	rc.tries[e.ID]++
	if rc.failN > 0 {
		rc.failN--
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	rc.got = append(rc.got, e)
}

func (rc *receiver) events() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []string
	for _, e := range rc.got {
		s := e.Type + " " + e.Learner.Name + " " + e.State
		if e.Scenario != "" {
			s += " " + e.Scenario
		}
		out = append(out, s)
	}
	return out
}

func TestWebhook(t *testing.T) {
	old := webhookRetries
	webhookRetries = []time.Duration{10 * time.Millisecond, 10 * time.Millisecond}
	t.Cleanup(func() { webhookRetries = old })
	rc := &receiver{tries: map[string]int{}, failN: 1}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	// The deliveries do not touch the database: SQLite is enough.
	r := openRoom(t, pgtest.SQLite(DBFileName), Spec{Name: "hooked", Scenarios: []string{"selector-typo"}, Capacity: 2, Webhook: srv.URL + "/hook"})
	if !strings.HasPrefix(r.Class.WebhookSecret, "whsec_") {
		t.Fatalf("webhook secret %q", r.Class.WebhookSecret)
	}
	ctx := context.Background()
	if _, err := r.StartLab(r.ann); err != nil {
		t.Fatal(err)
	}
	r.waitLab(t, r.ann.LearnerID, labs.Ready)
	// The board hears of the lab after the lab manager: wait for it.
	waitEvents(t, rc, 4)
	if err := r.Board.Started(ctx, r.ann.LearnerID, "selector-typo"); err != nil {
		t.Fatal(err)
	}
	if err := r.Board.Checked(ctx, r.ann.LearnerID, "selector-typo", report(true)); err != nil {
		t.Fatal(err)
	}
	// A second passing check changes nothing: no event.
	if err := r.Board.Checked(ctx, r.ann.LearnerID, "selector-typo", report(true)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"learner.joined Ann joined", "learner.joined Bob joined",
		"lab.state Ann starting", "lab.state Ann ready",
		"scenario.state Ann working selector-typo", "scenario.state Ann solved selector-typo",
	}
	waitEvents(t, rc, len(want))
	time.Sleep(50 * time.Millisecond) // nothing more arrives
	if got := rc.events(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, sb := range rc.signed {
		if sb[0] != Sign(r.Class.WebhookSecret, []byte(sb[1])) {
			rc.bad = append(rc.bad, "bad signature "+sb[0]+" of "+sb[1])
		}
	}
	if len(rc.bad) > 0 {
		t.Errorf("bad deliveries: %q", rc.bad)
	}
	// The first delivery was refused with 503 and sent again, same id.
	if first := rc.got[0]; rc.tries[first.ID] != 2 {
		t.Errorf("the refused delivery was tried %d times", rc.tries[first.ID])
	}
	if e := rc.got[len(rc.got)-1]; e.Score == nil || *e.Score != 100 || e.Class.Name != "hooked" {
		t.Errorf("solved event: %+v", e)
	}
}

func waitEvents(t *testing.T, rc *receiver, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(rc.events()) < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWebhookValidation(t *testing.T) {
	for _, u := range []string{"ftp://x", "not a url", "http://", "https://user:pw@example.test/hook"} {
		if err := ValidateWebhook(u); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
	if err := ValidateWebhook("https://hooks.example.test/svclab"); err != nil {
		t.Error(err)
	}
}
