package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/svclab/svclab/lab/attempt"
	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/clustertest"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/session"
	"github.com/svclab/svclab/lab/store"
	"github.com/svclab/svclab/lab/views/viewstest"
	"github.com/svclab/svclab/scenarios"
)

// fakeAttempts is a hand-written Attempts kept in memory.
type fakeAttempts struct {
	mu       sync.Mutex
	catalog  *scenario.Catalog
	attempts []*Attempt
	pass     atomic.Bool
	started  chan string
	// hold, when set, keeps Start waiting (after its attempt is recorded)
	// until it is closed: a setup still running.
	hold    chan struct{}
	answers map[int64]map[string]string
}

func (f *fakeAttempts) Start(ctx context.Context, learner, scenarioID, clusterName string, p cluster.Progress) (*Attempt, error) {
	p.Start("Applying the setup manifests")(nil)
	f.mu.Lock()
	defer f.mu.Unlock()
	a := &Attempt{ID: int64(len(f.attempts) + 1), Learner: learner, ScenarioID: scenarioID, Cluster: clusterName, State: StateRunning, Started: time.Now()}
	f.attempts = append(f.attempts, a)
	if hold := f.hold; hold != nil {
		f.mu.Unlock()
		<-hold
		f.mu.Lock()
	}
	return a, nil
}

func (f *fakeAttempts) Current(ctx context.Context, learner, scenarioID string) (*Attempt, error) {
	list, _ := f.List(ctx, learner, scenarioID)
	if len(list) == 0 {
		return nil, ErrNoAttempt
	}
	return list[0], nil
}

func (f *fakeAttempts) List(_ context.Context, learner, scenarioID string) ([]*Attempt, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*Attempt
	for i := len(f.attempts) - 1; i >= 0; i-- {
		if a := f.attempts[i]; a.Learner == learner && a.ScenarioID == scenarioID {
			c := *a
			out = append(out, &c)
		}
	}
	return out, nil
}

func (f *fakeAttempts) get(id int64) *Attempt {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts[id-1]
}

func (f *fakeAttempts) Check(_ context.Context, id int64) (*grade.Report, error) {
	a := f.get(id)
	rep := &grade.Report{Scenario: a.ScenarioID, Passed: f.pass.Load(), Score: 40, Results: []grade.Result{
		{ID: "slice-has-ready-endpoints", Weight: 3, Passed: f.pass.Load(), Message: "The EndpointSlice of Service web lists <both> web Pods as ready."},
		{ID: "service-kept", Weight: 2, Passed: true, Message: "The Service web was fixed in place."},
	}}
	if !f.pass.Load() {
		// As lab/attempt does: the expected value waits for hint 2.
		r := &rep.Results[0]
		r.Detail = `{.spec.selector.app} of Service shop/web is "wbe"`
		f.mu.Lock()
		if a.HintsShown >= 2 {
			r.Expected = `expected "web"`
		} else {
			r.ExpectedAfterHint = 2
		}
		f.mu.Unlock()
	}
	if f.pass.Load() {
		rep.Score = 100
		f.mu.Lock()
		a.State = StatePassed
		f.mu.Unlock()
	}
	return rep, nil
}

func (f *fakeAttempts) Hint(_ context.Context, id int64) (int, string, error) {
	a := f.get(id)
	sc := f.catalog.Get(a.ScenarioID)
	f.mu.Lock()
	defer f.mu.Unlock()
	if a.HintsShown >= len(sc.Hints) {
		return 0, "", fmt.Errorf("all %d hints are shown", len(sc.Hints))
	}
	a.HintsShown++
	return a.HintsShown, sc.Hints[a.HintsShown-1], nil
}

func (f *fakeAttempts) Answer(_ context.Context, id int64, checkID, text string) error {
	a := f.get(id)
	if err := session.ValidateAnswer(f.catalog.Get(a.ScenarioID), checkID, text); err != nil {
		return fmt.Errorf("%w: %w", attempt.ErrBadAnswer, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.answers == nil {
		f.answers = map[int64]map[string]string{}
	}
	if f.answers[id] == nil {
		f.answers[id] = map[string]string{}
	}
	f.answers[id][checkID] = text
	return nil
}

func (f *fakeAttempts) Answers(_ context.Context, id int64) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.answers[id]), nil
}

func (f *fakeAttempts) Solve(context.Context, int64, io.Writer) error { return nil }

func (f *fakeAttempts) Reset(ctx context.Context, id int64, p cluster.Progress) (*Attempt, error) {
	a := f.get(id)
	f.mu.Lock()
	a.State = StateAbandoned
	f.mu.Unlock()
	return f.Start(ctx, a.Learner, a.ScenarioID, a.Cluster, p)
}

func (f *fakeAttempts) End(_ context.Context, id int64) error {
	a := f.get(id)
	f.mu.Lock()
	defer f.mu.Unlock()
	if a.State != StatePassed {
		a.State = StateAbandoned
	}
	return nil
}

func (f *fakeAttempts) Active(_ context.Context, learner string) ([]*Attempt, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*Attempt
	for _, a := range f.attempts {
		if a.Learner == learner && (a.State == StateRunning || a.State == StateErrored) {
			c := *a
			out = append(out, &c)
		}
	}
	return out, nil
}

func (f *fakeAttempts) Progress(_ context.Context, learner string) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for _, a := range f.attempts {
		if a.Learner == learner {
			out[a.ScenarioID] = a.State
		}
	}
	return out, nil
}

func loadCatalog(t testing.TB) *scenario.Catalog {
	cat, probs := scenarios.Load(scenario.Options{})
	if len(probs) > 0 {
		t.Fatalf("scenarios: %v", probs)
	}
	return cat
}

func readTestdata(t testing.TB, name string) string {
	b, err := os.ReadFile("../lab/views/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type labServer struct {
	s  *Server
	ts *httptest.Server
	fa *fakeAttempts
	fc *viewstest.Cluster
	// p holds fc; a test deletes it there to make the lab go away.
	p   *clustertest.Provider
	tl  *memTimeline
	url string
}

func newLabServer(t testing.TB, configure ...func(*Server)) *labServer {
	cat := loadCatalog(t)
	rules := readTestdata(t, "nft-selector-typo-broken.txt")
	fc := viewstest.New("lab", rules)
	p := viewstest.NewProvider(rules)
	p.Add(fc.Cluster)
	fa := &fakeAttempts{catalog: cat}
	tl := &memTimeline{}
	s := &Server{Clusters: p, Log: slog.New(slog.DiscardHandler), Background: context.Background(), Catalog: cat, Attempts: fa, Timeline: tl}
	s.feeds.linger = time.Millisecond
	for _, f := range configure {
		f(s)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { ts.Close(); s.Wait() })
	return &labServer{s: s, ts: ts, fa: fa, fc: fc, p: p, tl: tl, url: ts.URL}
}

// gone says whether the lab's cluster is gone.
func (l *labServer) gone() bool { return !slices.Contains(l.p.Names(), l.fc.Name()) }

func (l *labServer) startAttempt(t testing.TB, id string) {
	t.Helper()
	resp, err := noRedirect.PostForm(l.url+"/scenarios/"+id+"/start", url.Values{"cluster": {"lab"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/operations/") {
		t.Fatalf("start: %d %s", resp.StatusCode, loc)
	}
	l.s.ops.wait()
	page := get(t, l.url+loc)
	if !strings.Contains(page, `data-next="/scenarios/`+id+`"`) || !strings.Contains(page, "Continue") {
		t.Errorf("operation page after start:\n%s", page)
	}
}

func TestCatalog(t *testing.T) {
	l := newLabServer(t)
	l.startAttempt(t, "selector-typo")
	for _, tc := range []struct {
		query      string
		want, lack []string
	}{
		{"", []string{`data-scenario="selector-typo" data-progress="running"`, `data-scenario="etp-local-drop"`, "in progress", `id="clusters-section"`}, nil},
		{"?difficulty=easy", []string{`data-scenario="selector-typo"`}, []string{`data-scenario="etp-local-drop"`}},
		{"?domain=Storage", []string{`id="no-scenarios"`}, []string{`data-scenario=`}},
		{"?domain=" + url.QueryEscape("Services & Networking"), []string{`data-scenario="selector-typo"`, `selected>Services &amp; Networking`}, nil},
	} {
		page := get(t, l.url+"/"+tc.query)
		for _, w := range tc.want {
			if !strings.Contains(page, w) {
				t.Errorf("catalog%s lacks %q", tc.query, w)
			}
		}
		for _, w := range tc.lack {
			if strings.Contains(page, w) {
				t.Errorf("catalog%s has %q", tc.query, w)
			}
		}
	}
}

func TestScenarioPageAndActions(t *testing.T) {
	l := newLabServer(t)
	page := get(t, l.url+"/scenarios/selector-typo")
	for _, w := range []string{`id="start-form"`, "<code>web</code>", "A Service that refuses every connection"} {
		if !strings.Contains(page, w) {
			t.Errorf("page before start lacks %q", w)
		}
	}
	if strings.Contains(page, `id="terminal"`) {
		t.Error("terminal shown before start")
	}
	// Actions before a start are refused with a message.
	if code, body := post(t, l.url+"/scenarios/selector-typo/check", nil); code != http.StatusConflict || !strings.Contains(body, "start it first") {
		t.Errorf("check before start: %d %s", code, body)
	}
	l.startAttempt(t, "selector-typo")
	page = get(t, l.url+"/scenarios/selector-typo")
	for _, w := range []string{`id="terminal"`, `data-node="lab-control-plane"`, "control-plane (kubectl)", `id="panel-slices"`, `id="panel-rules"`, `id="panel-conntrack"`, `id="panel-probes"`, `id="panel-timeline"`, `id="panel-path"`, `value="pod|shop/client"`, `id="check"`} {
		if !strings.Contains(page, w) {
			t.Errorf("running page lacks %q", w)
		}
	}
	// A hint, then the check: failing, then passing with the explanation.
	code, body := post(t, l.url+"/scenarios/selector-typo/hint", nil)
	var hint struct {
		Index int
		HTML  string
		More  bool
	}
	json.Unmarshal([]byte(body), &hint)
	if code != 200 || hint.Index != 1 || !strings.Contains(hint.HTML, "<code>kubectl -n shop get endpointslices") || !hint.More {
		t.Errorf("hint: %d %s", code, body)
	}
	if page := get(t, l.url+"/scenarios/selector-typo"); !strings.Contains(page, "Connection refused") || !strings.Contains(page, "straight away") {
		t.Error("the shown hint is not on the reloaded page")
	}
	code, body = post(t, l.url+"/scenarios/selector-typo/check", nil)
	if code != 200 || !strings.Contains(body, `"passed":false`) || strings.Contains(body, "explanationHTML") {
		t.Errorf("failing check: %d %s", code, body)
	}
	l.fa.pass.Store(true)
	code, body = post(t, l.url+"/scenarios/selector-typo/check", nil)
	if code != 200 || !strings.Contains(body, `"state":"passed"`) || !strings.Contains(body, "explanationHTML") {
		t.Errorf("passing check: %d %s", code, body)
	}
	if !strings.Contains(body, `href=\"https://kubernetes.io/docs/`) {
		t.Errorf("the passing check's explanation cites no source: %s", body)
	}
	if page := get(t, l.url+"/scenarios/selector-typo"); !strings.Contains(page, "Why it broke") || !strings.Contains(page, "What broke.") {
		t.Error("the explanation is not on the page of a passed attempt")
	} else if !strings.Contains(page, "<h4>Sources</h4>") || !strings.Contains(page, `href="https://kubernetes.io/docs/concepts/services-networking/service/"`) {
		t.Error("the explanation of a passed attempt shows no sources")
	}
	// The hint and both checks are on the attempt's timeline, in order,
	// and the replay page steps through them.
	l.s.flushTimeline()
	var kinds []string
	for _, e := range l.tl.events(1) {
		kinds = append(kinds, e.Kind+": "+e.Text)
	}
	want := "hint: hint 1 of 3 shown|check: Check my work: 1 of 2 checks passed, score 40% (2 of 5 points)|check: Check my work: 2 of 2 checks passed, score 100% (5 of 5 points)"
	if strings.Join(kinds, "|") != want {
		t.Errorf("timeline:\n%s\nwant\n%s", strings.Join(kinds, "\n"), strings.ReplaceAll(want, "|", "\n"))
	}
	replay := get(t, l.url+"/scenarios/selector-typo/replay")
	for _, w := range []string{`id="replay-pos"`, `max="3"`, "hint 1 of 3 shown", "2 of 2 checks passed", "+00:0"} {
		if !strings.Contains(replay, w) {
			t.Errorf("the replay page lacks %q", w)
		}
	}
	if strings.Contains(replay, `id="replay-attempts"`) {
		t.Error("the replay page lists attempts when there is only one")
	}

	// After a reset the replay shows the new attempt, lists both, and
	// replays the first on ?attempt=1; an attempt that is not the
	// learner's at this scenario is not found.
	// Start over asks first, saying what is lost.
	if code, page := post(t, l.url+"/scenarios/selector-typo/reset", nil); code != http.StatusOK || !strings.Contains(page, "Start over?") || !strings.Contains(page, "What you changed in the cluster is lost") || !strings.Contains(page, `name="confirmed" value="yes"`) {
		t.Errorf("an unconfirmed reset: %d %s", code, page)
	}
	resp, err := noRedirect.PostForm(l.url+"/scenarios/selector-typo/reset", url.Values{"confirmed": {"yes"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	l.s.ops.wait()
	replay = get(t, l.url+"/scenarios/selector-typo/replay")
	for _, w := range []string{`id="replay-attempts"`, `href="/scenarios/selector-typo/replay?attempt=1"`, "attempt 2 · running", "replay-empty"} {
		if !strings.Contains(replay, w) {
			t.Errorf("the replay page after a reset lacks %q", w)
		}
	}
	first := get(t, l.url+"/scenarios/selector-typo/replay?attempt=1")
	for _, w := range []string{"attempt 1 · abandoned", "2 of 2 checks passed", `href="/scenarios/selector-typo/replay?attempt=2"`} {
		if !strings.Contains(first, w) {
			t.Errorf("the replay of attempt 1 lacks %q", w)
		}
	}
	for _, q := range []string{"3", "x", "-1"} {
		resp, err := http.Get(l.url + "/scenarios/selector-typo/replay?attempt=" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("replay ?attempt=%s: %d, want 404", q, resp.StatusCode)
		}
	}
}

// memTimeline is a hand-written Timeline kept in memory.
type memTimeline struct {
	mu sync.Mutex
	m  map[int64][]store.Event
}

func (m *memTimeline) AppendEvents(_ context.Context, id int64, evs []store.Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[int64][]store.Event{}
	}
	m.m[id] = append(m.m[id], evs...)
	return nil
}

func (m *memTimeline) Events(_ context.Context, id int64) ([]store.Event, error) {
	return m.events(id), nil
}

func (m *memTimeline) events(id int64) []store.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]store.Event(nil), m.m[id]...)
}

func TestScenarioBadInput(t *testing.T) {
	l := newLabServer(t)
	for _, tc := range []struct {
		method, path string
		form         url.Values
		code         int
		want         string
	}{
		{"GET", "/scenarios/nope", nil, 404, `no scenario "nope"`},
		{"POST", "/scenarios/nope/start", url.Values{}, 404, `no scenario "nope"`},
		{"POST", "/scenarios/selector-typo/start", url.Values{"cluster": {"Bad_Name"}}, 400, "is not valid"},
		{"POST", "/scenarios/selector-typo/hint", nil, 409, "start it first"},
		{"GET", "/scenarios/selector-typo/views", nil, 409, "start the scenario first"},
		{"GET", "/assets/nope.js", nil, 404, ""},
	} {
		var code int
		var body string
		if tc.method == "GET" {
			resp, err := http.Get(l.url + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			code, body = resp.StatusCode, string(b)
		} else {
			code, body = post(t, l.url+tc.path, tc.form)
		}
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s: %d %s, want %d with %q", tc.method, tc.path, code, body, tc.code, tc.want)
		}
	}
	// The server still serves.
	if page := get(t, l.url+"/"); !strings.Contains(page, "selector-typo") {
		t.Error("catalog gone after bad input")
	}
}

// Cross-site POSTs are refused; so are websockets from another origin.
func TestCrossSiteRequestsRefused(t *testing.T) {
	l := newLabServer(t)
	req, _ := http.NewRequest("POST", l.url+"/scenarios/selector-typo/start", strings.NewReader("cluster=lab"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "forgery") {
		t.Errorf("cross-site POST: %d %s", resp.StatusCode, body)
	}
	if _, err := l.fa.Current(context.Background(), DefaultLearner, "selector-typo"); err != ErrNoAttempt {
		t.Error("the cross-site POST started an attempt")
	}
	// Same-origin POSTs from the page pass.
	req, _ = http.NewRequest("POST", l.url+"/scenarios/selector-typo/start", strings.NewReader("cluster=lab"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", l.url)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err = noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("same-origin POST: %d", resp.StatusCode)
	}
	l.s.ops.wait()
	for _, path := range []string{"/views", "/terminal?node=lab-worker", "/terminal?node=lab-control-plane"} {
		for _, origin := range []string{"https://evil.example", "null", l.url + ".evil.example", "http://127.0.0.1:1"} {
			_, resp, err = websocket.DefaultDialer.Dial(wsURL(l.url)+"/scenarios/selector-typo"+path, http.Header{"Origin": {origin}})
			if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Errorf("cross-origin websocket %s from %s: err %v, response %v", path, origin, err, resp)
			}
		}
	}
}

func wsURL(u string) string { return strings.Replace(u, "http", "ws", 1) }

func post(t testing.TB, u string, form url.Values) (int, string) {
	t.Helper()
	resp, err := noRedirect.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// An attempt whose setup or grading failed says why, and can be started
// over.
func TestErroredAttempt(t *testing.T) {
	l := newLabServer(t)
	l.startAttempt(t, "selector-typo")
	a := l.fa.get(1)
	l.fa.mu.Lock()
	a.State, a.Error = StateErrored, "setting up selector-typo: the Pods of Deployment shop/web did not become ready in 3m0s"
	l.fa.mu.Unlock()
	page := get(t, l.url+"/scenarios/selector-typo")
	for _, w := range []string{`id="attempt-error"`, "The scenario could not be set up. Use Start over", "<summary>details</summary>", "did not become ready in 3m0s", `class="state-errored"`, `id="reset"`} {
		if !strings.Contains(page, w) {
			t.Errorf("errored attempt page lacks %q", w)
		}
	}
	resp, err := noRedirect.PostForm(l.url+"/scenarios/selector-typo/reset", url.Values{"confirmed": {"yes"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("reset: %d", resp.StatusCode)
	}
	l.s.ops.wait()
	if cur, _ := l.fa.Current(context.Background(), DefaultLearner, "selector-typo"); cur.ID != 2 || cur.State != StateRunning {
		t.Errorf("after reset: %+v", cur)
	}
}

// TestAnswers: a scenario with answer checks shows a field per question;
// an answer saves with or without script (JSON, or the page again), shows
// on the reloaded page, and a question the scenario does not ask or an
// answer too long is refused with a message.
func TestAnswers(t *testing.T) {
	l := newLabServer(t)
	base := l.url + "/scenarios/debugging-sequence"
	if code, body := post(t, base+"/answer", url.Values{"check": {"step-named"}, "text": {"6"}}); code != http.StatusConflict || !strings.Contains(body, "start it first") {
		t.Errorf("answer before start: %d %s", code, body)
	}
	l.startAttempt(t, "debugging-sequence")
	page := get(t, base)
	for _, w := range []string{`class="questions"`, `id="answer-step-named"`, `id="answer-what-it-showed"`, "Which step of the sequence showed the fault?", `action="/scenarios/debugging-sequence/answer"`} {
		if !strings.Contains(page, w) {
			t.Errorf("page lacks %q", w)
		}
	}
	// Without script: the form posts and the page comes back.
	code, _ := post(t, base+"/answer", url.Values{"check": {"step-named"}, "text": {"  6  "}})
	if code != http.StatusSeeOther {
		t.Errorf("form post: %d, want a redirect to the page", code)
	}
	if m, _ := l.fa.Answers(context.Background(), 1); m["step-named"] != "6" {
		t.Errorf("answers %v: the trimmed answer was not saved", m)
	}
	if page := get(t, base); !strings.Contains(page, `placeholder="Your answer">6</textarea>`) || !strings.Contains(page, "Saved.") {
		t.Error("the saved answer is not on the reloaded page")
	}
	// With script: JSON.
	answer := func(form url.Values) (int, string) {
		req, _ := http.NewRequest("POST", base+"/answer", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := answer(url.Values{"check": {"what-it-showed"}, "text": {"internalTrafficPolicy: Local"}}); code != 200 || !strings.Contains(body, `"saved":true`) {
		t.Errorf("JSON answer: %d %s", code, body)
	}
	for _, tc := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"check": {"worker2-orders-reach-inventory"}, "text": {"6"}}, "asks no question"},
		{url.Values{"check": {"nope"}, "text": {"6"}}, "asks no question"},
		{url.Values{"check": {"step-named"}, "text": {strings.Repeat("6", scenario.MaxAnswerLength+1)}}, "keep it under"},
	} {
		if code, body := answer(tc.form); code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("%v: %d %s, want 400 %q", tc.form, code, body, tc.want)
		}
	}
	if m, _ := l.fa.Answers(context.Background(), 1); len(m) != 2 || m["step-named"] != "6" {
		t.Errorf("answers after refused ones: %v", m)
	}
	// A page on another site cannot answer for the learner.
	req, _ := http.NewRequest("POST", base+"/answer", strings.NewReader(url.Values{"check": {"step-named"}, "text": {"7"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "http://evil.example")
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site answer: %d, want 403", resp.StatusCode)
	}
	// An answer is text on the page, never markup.
	if code, body := answer(url.Values{"check": {"what-it-showed"}, "text": {`</textarea><script>alert(1)</script>`}}); code != 200 {
		t.Fatalf("answer with markup: %d %s", code, body)
	}
	if page := get(t, base); strings.Contains(page, "<script>alert(1)") || !strings.Contains(page, "&lt;/textarea&gt;&lt;script&gt;") {
		t.Error("an answer's markup reaches the page unescaped")
	}
	// Scenarios without questions show none.
	l.startAttempt(t, "selector-typo")
	if page := get(t, l.url+"/scenarios/selector-typo"); strings.Contains(page, `class="questions"`) {
		t.Error("a scenario without questions shows notes")
	}
}

// An errored attempt's recorded error (what lab/attempt writes) is told to
// the learner in words that fit what happened.
func TestAttemptProblem(t *testing.T) {
	for _, tc := range []struct{ err, want string }{
		{"grading timed out after 2m0s", "A check ran out of time"},
		{"cluster lab is taken over by svclab exercise run (pid 4242)", "Another svclab took this cluster over"},
		{"interrupted: context canceled", "Setting the scenario up was interrupted"},
		{"cluster lab of attempt 3 is gone: start the scenario again with 'svclab scenario reset selector-typo'", "Your lab's cluster was deleted"},
		{"cluster lab of attempt 3 was deleted and created again since the scenario was set up, and what it set up went with it: start the scenario again with 'svclab scenario reset selector-typo'", "Your lab's cluster was deleted"},
		{"applying shop/web: the server is currently unable to handle the request", "The scenario could not be set up"},
	} {
		if got := attemptProblem(tc.err); !strings.HasPrefix(got, tc.want) {
			t.Errorf("attemptProblem(%q) = %q, want it to start %q", tc.err, got, tc.want)
		}
	}
}
