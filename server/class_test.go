package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/svclab/svclab/lab/class"
	classlabs "github.com/svclab/svclab/lab/class/labs"
	"github.com/svclab/svclab/lab/cluster/clustertest"
	"github.com/svclab/svclab/lab/views/viewstest"
)

// classServer is a server of one class, "k8s-101", on fake clusters.
type classServer struct {
	s        *Server
	ts       *httptest.Server
	hub      *class.Hub
	room     *class.Classroom
	created  class.Created
	provider *clustertest.Provider
}

func newClassServer(t testing.TB, spec class.Spec) *classServer {
	t.Helper()
	ctx := context.Background()
	cat := loadCatalog(t)
	db, err := class.OpenDB(ctx, filepath.Join(t.TempDir(), class.DBFileName), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := spec.Normalize(cat); err != nil {
		t.Fatal(err)
	}
	created, err := db.CreateClass(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	fp := viewstest.NewProvider(readTestdata(t, "nft-selector-typo-broken.txt"))
	hub := class.NewHub(class.Options{DB: db, Provider: fp, Catalog: cat, Log: slog.New(slog.DiscardHandler),
		Labs: classlabs.Config{Memory: func() (uint64, error) { return 64 << 30, nil }, TickInterval: 50 * time.Millisecond}})
	if err := hub.OpenAll(ctx); err != nil {
		t.Fatal(err)
	}
	room, err := hub.Classroom(created.Class.ID)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Clusters: fp, Log: slog.New(slog.DiscardHandler), Background: ctx, Catalog: cat, Classes: hub, ClassesOnly: true}
	s.feeds.linger = time.Millisecond
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { ts.Close(); s.Wait(); hub.Shutdown(context.Background()) })
	return &classServer{s: s, ts: ts, hub: hub, room: room, created: created, provider: fp}
}

// client is one person's browser: a cookie jar, no redirects followed.
type client struct {
	t    *testing.T
	base string
	c    *http.Client
	// bearer, when set, is sent as an Authorization header instead.
	bearer string
}

func (cs *classServer) client(t *testing.T) *client { return newClient(t, cs.ts.URL) }

// newClient is a browser of the server at base: a cookie jar of its own,
// redirects not followed.
func newClient(t *testing.T, base string) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: base, c: &http.Client{Jar: jar, Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (c *client) do(method, path string, form url.Values) (int, string, http.Header) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if method == http.MethodPost {
		req.Header.Set("Accept", "application/json")
	}
	if c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	resp, err := c.c.Do(req)
	if err != nil {
		// Errorf, not Fatal: load test learners call this from goroutines.
		c.t.Errorf("%s %s: %v", method, path, err)
		return 0, "", nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// join joins the class through the join form.
func (cs *classServer) join(t *testing.T, name string) (*client, string) {
	t.Helper()
	c := cs.client(t)
	code, body, h := c.do(http.MethodPost, "/join", url.Values{"code": {cs.created.Class.JoinCode}, "name": {name}})
	if code != http.StatusSeeOther || h.Get("Location") != "/class/"+cs.created.Class.ID+"/" {
		t.Fatalf("joining as %s: %d %s %s", name, code, h.Get("Location"), body)
	}
	snap, err := cs.room.Board.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range snap.Rows {
		if r.Learner.Name == name {
			return c, r.Learner.ID
		}
	}
	t.Fatalf("%s is not on the board", name)
	return nil, ""
}

func (cs *classServer) instructor(t *testing.T) *client {
	t.Helper()
	c := cs.client(t)
	id := cs.created.Class.ID
	code, _, h := c.do(http.MethodPost, "/class/"+id+"/instructor", url.Values{"token": {cs.created.InstructorToken}})
	if code != http.StatusSeeOther || h.Get("Location") != "/class/"+id+"/board" {
		t.Fatalf("instructor sign-in: %d %s", code, h.Get("Location"))
	}
	return c
}

func testSpec() class.Spec {
	return class.Spec{Name: "k8s-101", Scenarios: []string{"selector-typo", "targetport-mismatch"}, Capacity: 2}
}

// TestClassAuthorization sends every class route as every kind of person
// and checks who gets through: a learner reaches their own lab only, the
// instructor watches every lab read-only and runs the board, anybody else
// gets nothing.
func TestClassAuthorization(t *testing.T) {
	cs := newClassServer(t, testSpec())
	other := newClassServer(t, class.Spec{Name: "other", Scenarios: []string{"selector-typo"}, Capacity: 1})
	id := cs.created.Class.ID
	ann, annID := cs.join(t, "Ann")
	bob, bobID := cs.join(t, "Bob")
	teacher := cs.instructor(t)
	anon := cs.client(t)
	// Tokens of another class are nobody here.
	eve, _ := other.join(t, "Eve")
	stranger := cs.client(t)
	stranger.bearer = cookieOf(t, eve, other, other.created.Class.ID)
	otherTeacher := cs.client(t)
	otherTeacher.bearer = other.created.InstructorToken
	// A learner's token as a bearer header works as the cookie does.
	annBearer := cs.client(t)
	annBearer.bearer = cookieOf(t, ann, cs, id)

	if code, _, _ := ann.do(http.MethodPost, "/class/"+id+"/lab", nil); code != http.StatusOK {
		t.Fatalf("Ann's lab: %d", code)
	}
	waitLab(t, cs.room, annID, classlabs.Ready)

	const (
		ok     = http.StatusOK
		see    = http.StatusSeeOther
		unauth = http.StatusUnauthorized
		forb   = http.StatusForbidden
	)
	// pass: any answer but a refusal (401, 403, 404 for hidden things).
	const pass = -1
	annSc := "/class/" + id + "/scenarios/selector-typo"
	watchAnn := "/class/" + id + "/learners/" + annID + "/scenarios/selector-typo"
	// What Ann, Bob, the instructor and anybody else (anonymous, a
	// learner or the instructor of another class) get.
	routes := []struct {
		method, path            string
		ann, bob, teacher, anon int
	}{
		{"GET", "/class/" + id + "/", ok, ok, see, ok},
		{"POST", "/class/" + id + "/lab", pass, pass, forb, unauth},
		{"GET", "/class/" + id + "/events", pass, pass, pass, unauth},
		{"GET", "/class/" + id + "/board", forb, forb, ok, see},
		{"POST", "/class/" + id + "/push", forb, forb, pass, unauth},
		{"POST", "/class/" + id + "/learners/" + annID + "/extend", forb, forb, ok, unauth},
		{"POST", "/class/" + id + "/learners/" + bobID + "/reset", forb, forb, pass, unauth},
		{"GET", "/class/" + id + "/results.csv", forb, forb, ok, unauth},
		{"GET", "/class/" + id + "/results.json", forb, forb, ok, unauth},
		{"GET", annSc, ok, ok, forb, unauth},
		{"POST", annSc + "/start", pass, pass, forb, unauth},
		{"POST", annSc + "/check", pass, pass, forb, unauth},
		{"POST", annSc + "/hint", pass, pass, forb, unauth},
		{"POST", annSc + "/reset", pass, pass, forb, unauth},
		{"GET", annSc + "/views", pass, pass, forb, unauth},
		{"GET", annSc + "/terminal?node=x", pass, pass, forb, unauth},
		{"GET", annSc + "/replay", pass, pass, forb, unauth},
		{"GET", watchAnn, forb, forb, ok, unauth},
		{"GET", watchAnn + "/replay", forb, forb, pass, unauth},
		{"GET", watchAnn + "/views", forb, forb, pass, unauth},
		{"GET", watchAnn + "/terminal?node=x", forb, forb, pass, unauth},
		// A scenario outside the class is not there for anybody.
		{"GET", "/class/" + id + "/scenarios/nodeport-primary-ip", http.StatusNotFound, http.StatusNotFound, forb, unauth},
	}
	check := func(who string, c *client, method, path string, want int) {
		t.Helper()
		var form url.Values
		if method == http.MethodPost {
			form = url.Values{"body": {"hello"}}
		}
		got, body, _ := c.do(method, path, form)
		switch {
		case want == pass && (got == unauth || got == forb):
			t.Errorf("%s %s %s: refused with %d, want through: %.200s", who, method, path, got, body)
		case want != pass && got != want:
			t.Errorf("%s %s %s: %d, want %d: %.200s", who, method, path, got, want, body)
		}
	}
	for _, r := range routes {
		check("Ann", ann, r.method, r.path, r.ann)
		check("Ann (bearer)", annBearer, r.method, r.path, r.ann)
		check("Bob", bob, r.method, r.path, r.bob)
		check("the instructor", teacher, r.method, r.path, r.teacher)
		check("anonymous", anon, r.method, r.path, r.anon)
		check("a learner of another class", stranger, r.method, r.path, r.anon)
		check("another class's instructor", otherTeacher, r.method, r.path, r.anon)
	}
	// Who has not joined gets the join form, never the code.
	for _, c := range []struct {
		who string
		c   *client
	}{{"anonymous", anon}, {"a learner of another class", stranger}, {"another class's instructor", otherTeacher}} {
		code, body, _ := c.c.do(http.MethodGet, "/class/"+id+"/", nil)
		if code != ok || strings.Contains(body, cs.created.Class.JoinCode) || !strings.Contains(body, `name="code"`) {
			t.Errorf("%s's class page: %d, shows the join code: %v", c.who, code, strings.Contains(body, cs.created.Class.JoinCode))
		}
	}
	if len(id) < 16 {
		t.Errorf("the class id %q is short enough to guess", id)
	}
	// Operations (a scenario starting) are their starter's alone.
	code, _, h := ann.do(http.MethodPost, annSc+"/start", url.Values{})
	op := h.Get("Location")
	if code != see || !strings.HasPrefix(op, "/class/"+id+"/operations/") {
		t.Fatalf("Ann's start: %d %s", code, op)
	}
	for _, c := range []struct {
		who  string
		c    *client
		want int
	}{{"Ann", ann, ok}, {"Bob", bob, http.StatusNotFound}, {"the instructor", teacher, forb}, {"anonymous", anon, unauth}} {
		for _, path := range []string{op, op + "/events"} {
			if got, _, _ := c.c.do(http.MethodGet, path, nil); got != c.want && !(c.want == ok && path != op) {
				t.Errorf("%s GET %s: %d, want %d", c.who, path, got, c.want)
			}
		}
	}
	// The local lab's pages are off on a class server.
	for _, p := range []string{"/scenarios/selector-typo", "/operations/1"} {
		if code, _, _ := ann.do(http.MethodGet, p, nil); code != http.StatusNotFound {
			t.Errorf("GET %s on a class server: %d, want 404", p, code)
		}
	}
	if code, _, _ := ann.do(http.MethodPost, "/clusters", url.Values{"name": {"x"}}); code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
		t.Errorf("POST /clusters on a class server: %d", code)
	}
}

func cookieOf(t *testing.T, c *client, cs *classServer, classID string) string {
	t.Helper()
	u, _ := url.Parse(cs.ts.URL + "/class/" + classID + "/")
	for _, ck := range c.c.Jar.Cookies(u) {
		if ck.Name == cookieName(classID) {
			return ck.Value
		}
	}
	t.Fatal("no class cookie")
	return ""
}

func waitLab(t *testing.T, room *class.Classroom, learner string, want classlabs.State) classlabs.Lab {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, _ := room.Labs.Lab(learner)
		if l.State == want {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("lab of %s is %+v, want %s", learner, l, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClassBoardLive follows the board's stream as the instructor and a
// learner's stream as that learner: joins, labs, pushed messages and
// hints arrive live, and a learner never sees another's row or private
// messages.
func TestClassBoardLive(t *testing.T) {
	cs := newClassServer(t, testSpec())
	id := cs.created.Class.ID
	teacher := cs.instructor(t)
	board := dialClass(t, cs, teacher, id)
	first := board.next(t)
	if first.Kind != "snapshot" || len(first.Snapshot.Rows) != 0 || len(first.Snapshot.Scenarios) != 2 {
		t.Fatalf("first frame: %+v", first)
	}
	ann, annID := cs.join(t, "Ann")
	board.waitFor(t, "Ann joins", func(f classFrame) bool {
		return f.Update != nil && f.Update.Kind == class.UpdateLearner && f.Update.Row.Learner.Name == "Ann"
	})
	bob, bobID := cs.join(t, "Bob")
	annStream := dialClass(t, cs, ann, id)
	if f := annStream.next(t); f.Kind != "snapshot" || len(f.Snapshot.Rows) != 1 || f.Snapshot.Rows[0].Learner.ID != annID {
		t.Fatalf("Ann's first frame: %+v", f)
	}
	if code, _, _ := ann.do(http.MethodPost, "/class/"+id+"/lab", nil); code != http.StatusOK {
		t.Fatalf("Ann's lab: %d", code)
	}
	board.waitFor(t, "Ann's lab ready on the board", func(f classFrame) bool {
		return f.Update != nil && f.Update.Kind == class.UpdateLab && f.Update.Learner == annID && f.Update.Lab.State == classlabs.Ready
	})
	annStream.waitFor(t, "Ann's lab ready on her page", func(f classFrame) bool {
		return f.Update != nil && f.Update.Kind == class.UpdateLab && f.Update.Lab.State == classlabs.Ready
	})
	// A private hint to Bob, then a message to everyone.
	if code, body, _ := teacher.do(http.MethodPost, "/class/"+id+"/push", url.Values{"to": {bobID}, "kind": {"hint"}, "scenario": {"selector-typo"}, "body": {"Compare the selector with the Pod labels."}}); code != http.StatusOK {
		t.Fatalf("push to Bob: %d %s", code, body)
	}
	if code, body, _ := teacher.do(http.MethodPost, "/class/"+id+"/push", url.Values{"body": {"Ten minutes left."}}); code != http.StatusOK {
		t.Fatalf("push to all: %d %s", code, body)
	}
	annStream.waitFor(t, "the message to everyone reaches Ann", func(f classFrame) bool {
		if f.Update != nil && f.Update.Kind == class.UpdateMessage && strings.Contains(f.Update.Message.Body, "Compare the selector") {
			t.Fatalf("Ann got Bob's private hint: %+v", f.Update.Message)
		}
		if f.Update != nil && f.Update.Learner == bobID {
			t.Fatalf("Ann got an update of Bob's: %+v", f.Update)
		}
		return f.Update != nil && f.Update.Kind == class.UpdateMessage && f.Update.Message.Body == "Ten minutes left."
	})
	bobStream := dialClass(t, cs, bob, id)
	f := bobStream.next(t)
	var bodies []string
	for _, m := range f.Snapshot.Messages {
		bodies = append(bodies, m.Body)
	}
	if len(f.Snapshot.Rows) != 1 || f.Snapshot.Rows[0].Learner.ID != bobID || strings.Join(bodies, "|") != "Compare the selector with the Pod labels.|Ten minutes left." {
		t.Fatalf("Bob's snapshot: rows %+v messages %q", f.Snapshot.Rows, bodies)
	}
	// Bad pushes are refused with a reason.
	if code, body, _ := teacher.do(http.MethodPost, "/class/"+id+"/push", url.Values{"body": {""}}); code != http.StatusBadRequest || !strings.Contains(body, "error") {
		t.Errorf("empty push: %d %s", code, body)
	}
	// The class page shows the learner their lab and the messages.
	_, page, _ := ann.do(http.MethodGet, "/class/"+id+"/", nil)
	for _, want := range []string{`id="lab-state"`, "ready", "Ten minutes left.", `data-scenario="selector-typo"`} {
		if !strings.Contains(page, want) {
			t.Errorf("Ann's class page lacks %q", want)
		}
	}
	if strings.Contains(page, "Compare the selector") || strings.Contains(page, "Bob") {
		t.Errorf("Ann's class page shows Bob's things:\n%s", page)
	}
	// The instructor extends Ann's lab; her page hears of it.
	if code, body, _ := teacher.do(http.MethodPost, "/class/"+id+"/learners/"+annID+"/extend?minutes=15", nil); code != http.StatusOK {
		t.Fatalf("extend: %d %s", code, body)
	}
	annStream.waitFor(t, "the extension reaches Ann", func(f classFrame) bool {
		return f.Update != nil && f.Update.LabEvent != nil && f.Update.LabEvent.Kind == classlabs.EventExtended
	})
	if code, body, _ := teacher.do(http.MethodPost, "/class/"+id+"/learners/"+annID+"/extend?minutes=lots", nil); code != http.StatusBadRequest {
		t.Errorf("extend by lots: %d %s", code, body)
	}
	// Results export.
	code, csv, h := teacher.do(http.MethodGet, "/class/"+id+"/results.csv", nil)
	if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/csv") || !strings.Contains(csv, "Ann") || !strings.Contains(csv, "Bob") {
		t.Errorf("results.csv: %d %s\n%s", code, h.Get("Content-Type"), csv)
	}
}

// TestJoinBadInput: wrong codes, taken names and a full class get a
// message for the learner, and set no cookie.
func TestJoinBadInput(t *testing.T) {
	spec := testSpec()
	spec.Seats = 2
	cs := newClassServer(t, spec)
	cs.join(t, "Ann")
	for _, tc := range []struct {
		name, code, learner string
		status              int
		want                string
	}{
		{"wrong code", "NOPE-NOPE", "Bob", http.StatusBadRequest, "not valid"},
		{"empty name", cs.created.Class.JoinCode, "  ", http.StatusBadRequest, "name"},
		{"taken name", cs.created.Class.JoinCode, "ann", http.StatusConflict, "already uses that name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cs.client(t)
			code, body, h := c.do(http.MethodPost, "/join", url.Values{"code": {tc.code}, "name": {tc.learner}})
			if code != tc.status || !strings.Contains(body, tc.want) || h.Get("Set-Cookie") != "" {
				t.Errorf("%d (want %d), cookie %q, body:\n%.600s", code, tc.status, h.Get("Set-Cookie"), body)
			}
			if !strings.Contains(body, `value="`+tc.learner+`"`) && strings.TrimSpace(tc.learner) != "" {
				t.Errorf("the form lost what the learner typed")
			}
		})
	}
	cs.join(t, "Bob")
	c := cs.client(t)
	if code, body, _ := c.do(http.MethodPost, "/join", url.Values{"code": {cs.created.Class.JoinCode}, "name": {"Cid"}}); code != http.StatusConflict || !strings.Contains(body, "full") {
		t.Errorf("joining a full class: %d %.300s", code, body)
	}
	if code, body, _ := c.do(http.MethodGet, "/class/nosuchclass/", nil); code != http.StatusNotFound || !strings.Contains(body, "no class") {
		t.Errorf("unknown class: %d %s", code, body)
	}
	// Guessing codes is rate limited.
	limited := false
	for i := 0; i < 10 && !limited; i++ {
		code, _, h := c.do(http.MethodPost, "/join", url.Values{"code": {fmt.Sprintf("GUESS-%04d", i)}, "name": {"Eve"}})
		limited = code == http.StatusTooManyRequests && h.Get("Retry-After") != ""
	}
	if !limited {
		t.Error("10 join attempts in a row were not rate limited")
	}
	// A wrong instructor token.
	code, body, _ := c.do(http.MethodPost, "/class/"+cs.created.Class.ID+"/instructor", url.Values{"token": {"svclab-instructor-wrong"}})
	if code != http.StatusUnauthorized && code != http.StatusTooManyRequests {
		t.Errorf("wrong instructor token: %d %.300s", code, body)
	}
}

type classStream struct {
	conn *websocket.Conn
}

func dialClass(t *testing.T, cs *classServer, c *client, classID string) *classStream {
	t.Helper()
	u, _ := url.Parse(cs.ts.URL + "/class/" + classID + "/events")
	h := http.Header{"Origin": {cs.ts.URL}}
	if c.bearer != "" {
		h.Set("Authorization", "Bearer "+c.bearer)
	}
	d := websocket.Dialer{Jar: c.c.Jar}
	conn, resp, err := d.Dial("ws"+strings.TrimPrefix(u.String(), "http"), h)
	if err != nil {
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		t.Fatalf("dialing the class stream: %v (%d)", err, code)
	}
	t.Cleanup(func() { conn.Close() })
	return &classStream{conn: conn}
}

func (s *classStream) next(t *testing.T) classFrame {
	t.Helper()
	s.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, b, err := s.conn.ReadMessage()
	if err != nil {
		t.Fatalf("reading the class stream: %v", err)
	}
	var f classFrame
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("frame %s: %v", b, err)
	}
	return f
}

func (s *classStream) waitFor(t *testing.T, what string, ok func(classFrame) bool) classFrame {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if f := s.next(t); ok(f) {
			return f
		}
	}
	t.Fatalf("%s: not seen", what)
	return classFrame{}
}

// TestClassExam walks an exam as a learner: start the clock, the review
// stays closed until the end, finish, the score and the review with the
// reference solutions; the instructor reads anybody's review, another
// learner nobody's but their own.
func TestClassExam(t *testing.T) {
	cs := newClassServer(t, class.Spec{Name: "exam", Exam: true, Scenarios: []string{"selector-typo", "targetport-mismatch"}, Capacity: 2, TimeLimit: time.Hour})
	id := cs.created.Class.ID
	ann, annID := cs.join(t, "Ann")
	bob, _ := cs.join(t, "Bob")
	teacher := cs.instructor(t)
	_, page, _ := ann.do(http.MethodGet, "/class/"+id+"/", nil)
	if !strings.Contains(page, `id="exam" data-state="not-started"`) || !strings.Contains(page, `id="exam-start"`) {
		t.Fatalf("exam box before the start:\n%s", page)
	}
	if code, _, h := ann.do(http.MethodPost, "/class/"+id+"/exam/start", url.Values{}); code != http.StatusSeeOther || h.Get("Location") != "/class/"+id+"/" {
		t.Fatalf("starting the exam: %d %s", code, h.Get("Location"))
	}
	_, page, _ = ann.do(http.MethodGet, "/class/"+id+"/", nil)
	if !strings.Contains(page, `data-state="running"`) || !strings.Contains(page, `id="exam-finish"`) {
		t.Fatalf("exam box while running:\n%s", page)
	}
	if code, body, _ := ann.do(http.MethodGet, "/class/"+id+"/review", nil); code != http.StatusConflict || !strings.Contains(body, "the review opens when the exam ends") {
		t.Errorf("review during the exam: %d %s", code, body)
	}
	if code, _, h := ann.do(http.MethodPost, "/class/"+id+"/exam/finish", url.Values{}); code != http.StatusSeeOther || h.Get("Location") != "/class/"+id+"/review" {
		t.Fatalf("finishing the exam: %d %s", code, h.Get("Location"))
	}
	code, review, _ := ann.do(http.MethodGet, "/class/"+id+"/review", nil)
	for _, want := range []string{"0% (0 of 2 points)", `data-scenario="selector-typo"`, `data-scenario="targetport-mismatch"`, "kubectl", "Reference solution", "not checked"} {
		if code != http.StatusOK || !strings.Contains(review, want) {
			t.Errorf("Ann's review (%d) lacks %q", code, want)
		}
	}
	_, page, _ = ann.do(http.MethodGet, "/class/"+id+"/", nil)
	if !strings.Contains(page, `data-state="finished"`) || !strings.Contains(page, `id="review-link"`) {
		t.Errorf("exam box after the end:\n%s", page)
	}
	// The exam is over: Ann's lab is hers to look at, not to change.
	annSc := "/class/" + id + "/scenarios/selector-typo"
	for _, path := range []string{annSc + "/start", annSc + "/check", annSc + "/reset", annSc + "/hint"} {
		if code, body, _ := ann.do(http.MethodPost, path, url.Values{}); code != http.StatusForbidden || !strings.Contains(body, "exam is over") {
			t.Errorf("POST %s after the exam: %d %.120s, want 403", path, code, body)
		}
	}
	if code, _, _ := ann.do(http.MethodGet, annSc, nil); code != http.StatusOK {
		t.Errorf("Ann's scenario page after the exam: %d", code)
	}
	if code, body, _ := teacher.do(http.MethodGet, "/class/"+id+"/learners/"+annID+"/review", nil); code != http.StatusOK || !strings.Contains(body, "0 of 2 points") || !strings.Contains(body, "Ann") {
		t.Errorf("the instructor's view of Ann's review: %d", code)
	}
	if code, _, _ := bob.do(http.MethodGet, "/class/"+id+"/learners/"+annID+"/review", nil); code != http.StatusForbidden {
		t.Errorf("Bob reading Ann's review: %d, want 403", code)
	}
	if code, body, _ := bob.do(http.MethodGet, "/class/"+id+"/review", nil); code != http.StatusConflict || !strings.Contains(body, "not started") {
		t.Errorf("Bob's review before his exam: %d %s", code, body)
	}
	if code, _, _ := cs.client(t).do(http.MethodPost, "/class/"+id+"/exam/start", url.Values{}); code != http.StatusUnauthorized {
		t.Errorf("an anonymous exam start: %d, want 401", code)
	}
}

// TestClassChecksRateLimited: a learner's checks are limited (3 at once,
// then one every 5 s), per learner; the local lab's are not.
func TestClassChecksRateLimited(t *testing.T) {
	cs := newClassServer(t, testSpec())
	id := cs.created.Class.ID
	ann, _ := cs.join(t, "Ann")
	bob, _ := cs.join(t, "Bob")
	check := "/class/" + id + "/scenarios/selector-typo/check"
	var codes []int
	for range 4 {
		code, _, _ := ann.do(http.MethodPost, check, url.Values{})
		codes = append(codes, code)
	}
	if codes[3] != http.StatusTooManyRequests || slices.Contains(codes[:3], http.StatusTooManyRequests) {
		t.Errorf("Ann's four checks answered %v, want the fourth refused with 429", codes)
	}
	if code, _, _ := bob.do(http.MethodPost, check, url.Values{}); code == http.StatusTooManyRequests {
		t.Error("Bob's first check was refused: the limit is per learner")
	}
}

// TestInstructorSession: the instructor token is exchanged for a session
// at sign-in; the cookie never holds the token, and signing out ends the
// session for whoever kept a copy of the cookie.
func TestInstructorSession(t *testing.T) {
	cs := newClassServer(t, testSpec())
	id := cs.created.Class.ID
	teacher := cs.instructor(t)
	session := cookieOf(t, teacher, cs, id)
	if session == cs.created.InstructorToken || !strings.HasPrefix(session, class.SessionTokenPrefix) {
		t.Fatalf("the instructor's cookie holds %q, want a session token, not the instructor token", session)
	}
	if code, _, _ := teacher.do(http.MethodGet, "/class/"+id+"/board", nil); code != http.StatusOK {
		t.Fatalf("the board: %d", code)
	}
	copyOf := cs.client(t)
	copyOf.bearer = session
	code, _, h := teacher.do(http.MethodPost, "/class/"+id+"/instructor/signout", url.Values{})
	if code != http.StatusSeeOther || h.Get("Location") != "/class/"+id+"/instructor" {
		t.Fatalf("sign-out: %d %s", code, h.Get("Location"))
	}
	for who, c := range map[string]*client{"the instructor's browser": teacher, "a copy of the old cookie": copyOf} {
		if code, _, h := c.do(http.MethodGet, "/class/"+id+"/board", nil); code != http.StatusSeeOther || !strings.HasSuffix(h.Get("Location"), "/instructor") {
			t.Errorf("%s after sign-out: %d %s, want the sign-in page", who, code, h.Get("Location"))
		}
	}
	// A wrong token signs nobody in.
	c := cs.client(t)
	if code, _, _ := c.do(http.MethodPost, "/class/"+id+"/instructor", url.Values{"token": {"svi_wrong"}}); code != http.StatusUnauthorized {
		t.Errorf("a wrong instructor token: %d", code)
	}
}

// TestCookiesSecureBehindHTTPS: behind a TLS-terminating proxy
// (--public-url https://…) the class's cookies are Secure and HSTS is
// sent, though the server itself speaks plain HTTP to the proxy.
func TestCookiesSecureBehindHTTPS(t *testing.T) {
	cs := newClassServer(t, testSpec())
	cs.s.Access = &Access{Hosts: []string{"lab.example.org"}, Secure: true, TrustProxy: true}
	ts := httptest.NewServer(cs.s.Handler())
	defer ts.Close()
	form := url.Values{"code": {cs.created.Class.JoinCode}, "name": {"Ann"}}
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/join", strings.NewReader(form.Encode()))
	req.Host = "lab.example.org"
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == cookieName(cs.created.Class.ID) {
			cookie = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || cookie == nil || !cookie.Secure || !cookie.HttpOnly {
		t.Errorf("joining behind HTTPS: %d, cookie %+v", resp.StatusCode, cookie)
	}
	if resp.Header.Get("Strict-Transport-Security") == "" {
		t.Error("no HSTS behind HTTPS")
	}
	// Another name than the public one is refused.
	req, _ = http.NewRequest(http.MethodGet, ts.URL+"/join", nil)
	req.Host = "other.example.org"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a request for another name: %v %v", resp.StatusCode, err)
	}
}
