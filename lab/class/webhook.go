package class

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/class/stream"
)

// A class with a webhook (svclab class create --webhook URL) posts an
// event there whenever a learner's session changes state: a learner
// joined, a scenario's state on the board changed (working, checks
// passing, solved), a lab changed state (queued, starting, ready, ended,
// failed). The body is JSON (WebhookEvent); X-Svclab-Signature carries
// "sha256=" and the HMAC-SHA256 of the body keyed with the class's
// webhook secret (printed once by "svclab class create"), so receivers
// can check where it came from. Deliveries run in the background, never
// holding up the class: failures (network errors, 429 and 5xx answers)
// are retried with backoff, and a receiver that keeps failing loses
// events (logged) rather than queueing them for ever.

// Webhook event types.
const (
	EventLearnerJoined = "learner.joined"
	EventScenarioState = "scenario.state"
	EventLabState      = "lab.state"
)

// WebhookEvent is the body of a webhook delivery.
type WebhookEvent struct {
	// ID identifies the delivery; retries send the same ID.
	ID    string    `json:"id"`
	Type  string    `json:"type"`
	At    time.Time `json:"at"`
	Class struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"class"`
	Learner struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"learner"`
	// Scenario and Score are set for scenario.state (Score: the last
	// check run's, when there is one).
	Scenario string   `json:"scenario,omitempty"`
	State    string   `json:"state"`
	Score    *float64 `json:"score,omitempty"`
	// Reason says why a lab ended or failed.
	Reason string `json:"reason,omitempty"`
}

// ValidateWebhook checks a webhook URL.
func ValidateWebhook(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--webhook %q: give an http:// or https:// URL", raw)
	}
	if u.User != nil {
		return fmt.Errorf("--webhook: put no credentials in the URL; receivers check the X-Svclab-Signature header instead")
	}
	return nil
}

// newWebhookSecret draws a class's webhook secret.
func newWebhookSecret() string {
	b := make([]byte, 24)
	rand.Read(b)
	return "whsec_" + hex.EncodeToString(b)
}

// Sign is the X-Svclab-Signature of body under secret.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// webhookQueue bounds the deliveries waiting; webhookRetries are the
// waits before each retry.
const webhookQueue = 1024

var webhookRetries = []time.Duration{time.Second, 4 * time.Second, 16 * time.Second}

// webhook follows a class's board and delivers its state changes.
type webhook struct {
	url, secret string
	class       *Class
	board       *Board
	client      *http.Client
	log         *slog.Logger
	retries     []time.Duration

	sub   *stream.Subscription[Update]
	queue chan WebhookEvent
	// ctx ends the deliveries (close, when its time is up).
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// last is the state last reported per learner/scenario and per lab.
	last map[string]string
}

func startWebhook(c *Class, b *Board, log *slog.Logger) *webhook {
	w := &webhook{
		url: c.Webhook, secret: c.WebhookSecret, class: c, board: b, log: log, retries: webhookRetries,
		client: &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		sub:    b.subscribe("", webhookQueue),
		queue:  make(chan WebhookEvent, webhookQueue),
		last:   map[string]string{},
	}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	// What the board shows at the start is not a change.
	b.mu.Lock()
	for id, r := range b.rows {
		w.last["lab/"+id] = string(r.Lab.State)
		for _, cell := range r.Cells {
			w.last[id+"/"+cell.Scenario] = string(cell.State)
		}
	}
	b.mu.Unlock()
	w.wg.Add(2)
	go w.follow()
	go w.deliver()
	return w
}

// follow turns board updates into webhook events.
func (w *webhook) follow() {
	defer w.wg.Done()
	defer close(w.queue)
	for {
		select {
		case <-w.ctx.Done():
			return
		case u, ok := <-w.sub.C:
			if !ok {
				return
			}
			if e, ok := w.event(u); ok {
				select {
				case w.queue <- e:
				default:
					w.log.Warn("the class's webhook falls behind: an event was dropped", "class", w.class.Name, "type", e.Type)
				}
			}
		}
	}
}

func (w *webhook) event(u Update) (WebhookEvent, bool) {
	e := WebhookEvent{ID: newID(16), At: time.Now().UTC()}
	e.Class.ID, e.Class.Name = w.class.ID, w.class.Name
	e.Learner.ID, e.Learner.Name = u.Learner, w.board.learnerName(u.Learner)
	switch u.Kind {
	case UpdateLearner:
		if _, seen := w.last["lab/"+u.Learner]; seen {
			return e, false
		}
		w.last["lab/"+u.Learner] = ""
		e.Type, e.State = EventLearnerJoined, "joined"
		if u.Row != nil {
			e.Learner.Name = u.Row.Learner.Name
		}
	case UpdateCell:
		key := u.Learner + "/" + u.Cell.Scenario
		if w.last[key] == string(u.Cell.State) {
			return e, false
		}
		w.last[key] = string(u.Cell.State)
		e.Type, e.Scenario, e.State = EventScenarioState, u.Cell.Scenario, string(u.Cell.State)
		if u.Cell.LastCheck != nil {
			s := u.Cell.LastCheck.Score
			e.Score = &s
		}
	case UpdateLab:
		key := "lab/" + u.Learner
		if u.Lab == nil || w.last[key] == string(u.Lab.State) {
			return e, false
		}
		w.last[key] = string(u.Lab.State)
		e.Type, e.State, e.Reason = EventLabState, string(u.Lab.State), u.Lab.Reason
	default:
		return e, false
	}
	return e, true
}

// deliver posts the queued events, in order, retrying failures.
func (w *webhook) deliver() {
	defer w.wg.Done()
	for e := range w.queue {
		body, err := json.Marshal(e)
		if err != nil {
			continue
		}
		for try := 0; ; try++ {
			retry, err := w.post(e, body)
			if err == nil {
				break
			}
			if !retry || try >= len(w.retries) {
				w.log.Warn("the class's webhook refused an event", "class", w.class.Name, "type", e.Type, "delivery", e.ID, "tries", try+1, "err", err)
				break
			}
			select {
			case <-time.After(w.retries[try]):
			case <-w.ctx.Done():
				return
			}
		}
	}
}

// post delivers one event; retry says whether a failure may pass.
func (w *webhook) post(e WebhookEvent, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(w.ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "svclab-webhook")
	req.Header.Set("X-Svclab-Event", e.Type)
	req.Header.Set("X-Svclab-Delivery", e.ID)
	req.Header.Set("X-Svclab-Signature", Sign(w.secret, body))
	resp, err := w.client.Do(req)
	if err != nil {
		return true, err
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode < 300:
		return false, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return true, fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return false, fmt.Errorf("the receiver answered %s", resp.Status)
}

// close stops following the board and ends the deliveries: what is queued
// gets until ctx ends.
func (w *webhook) close(ctx context.Context) {
	w.sub.Cancel()
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		w.cancel()
		<-done
	}
	w.cancel()
}
