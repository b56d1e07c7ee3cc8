//go:build linux

package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/svclab/svclab/lab/class"
	classlabs "github.com/svclab/svclab/lab/class/labs"
	"github.com/svclab/svclab/lab/embedded"
)

// TestClassLoad is the classroom's load test: 30 simulated learners
// (SVCLAB_LOAD_LEARNERS) join one class on embedded clusters, each with
// an HTTP client and the class's websocket, and all ask for a lab. The
// class runs SVCLAB_LOAD_LABS labs at once (default 2, so that the test
// fits CI; 30 gives every learner a lab, which takes about 20 GiB); the
// learners with one drive a scenario session over the websockets: start
// selector-typo, watch its live views, type the fix into the terminal,
// check until it passes. Meanwhile every learner loads their class page
// again and again, and the instructor pushes messages to everyone. It
// reports p50/p99 latencies of pages, of the first live-view frame and of
// pushed messages reaching every learner, and the memory per lab; and it
// checks that no learner ever receives another learner's row, lab, cell
// or private message.
func TestClassLoad(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("end-to-end: needs root for embedded clusters")
	}
	learners := envInt(t, "SVCLAB_LOAD_LEARNERS", 30)
	nlabs := envInt(t, "SVCLAB_LOAD_LABS", 2)
	ec := newEmbeddedClass(t, class.Spec{Name: "load", Scenarios: []string{"selector-typo"}, Capacity: nlabs, Seats: learners, TimeLimit: time.Hour})
	id := ec.created.Class.ID
	lt := &latencies{}

	// Join, then follow the class's stream, checking every frame.
	ls := make([]*loadLearner, learners)
	for i := range ls {
		l := &loadLearner{client: newClient(t, ec.url), class: id, name: fmt.Sprintf("learner-%02d", i+1), lt: lt}
		l.join(ec.created.Class.JoinCode)
		ls[i] = l
	}
	for _, l := range ls {
		l.follow(ec.url)
	}
	teacher := &loadLearner{client: newClient(t, ec.url), class: id, name: "instructor", lt: lt}
	teacher.signIn(ec.created.InstructorToken)
	for _, l := range ls {
		l.post("/class/"+id+"/lab", nil, "lab")
	}

	// Pages and messages while the labs start and the sessions run.
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(2)
	go func() {
		defer bg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			ls[i%len(ls)].get("/class/"+id+"/", "class page")
		}
	}()
	go func() {
		defer bg.Done()
		for n := 1; ; n++ {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Second):
			}
			body := fmt.Sprintf("announcement %d", n)
			sent := time.Now()
			for _, l := range ls {
				l.expect(body, sent)
			}
			teacher.post("/class/"+id+"/push", url.Values{"body": {body}}, "push")
			// A private message to one learner, which nobody else may see.
			to := ls[n%len(ls)]
			teacher.post("/class/"+id+"/push", url.Values{"to": {to.learnerID}, "body": {"private for " + to.name}}, "push")
		}
	}()

	// The learners whose lab is ready run a session each, at once.
	var sessions sync.WaitGroup
	ran := 0
	for _, l := range ls {
		if ran == nlabs {
			break
		}
		ran++
		sessions.Add(1)
		go func() {
			defer sessions.Done()
			l.session(ec.hub, id)
		}()
	}
	sessions.Wait()
	close(stop)
	bg.Wait()
	time.Sleep(time.Second) // the last announcement arrives

	for _, l := range ls {
		l.close()
	}
	lt.report(t)
	reportLabMemory(t, ec.p)
	if t.Failed() {
		return
	}
	for _, l := range ls {
		l.mu.Lock()
		if n := len(l.pending); n > 0 {
			t.Errorf("%s never got %d announcements", l.name, n)
		}
		l.mu.Unlock()
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// latencies collects samples per kind.
type latencies struct {
	mu sync.Mutex
	m  map[string][]time.Duration
}

func (l *latencies) add(kind string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string][]time.Duration{}
	}
	l.m[kind] = append(l.m[kind], d)
}

func (l *latencies) report(t *testing.T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kinds := make([]string, 0, len(l.m))
	for k := range l.m {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		d := slices.Clone(l.m[k])
		slices.Sort(d)
		pct := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
		t.Logf("latency %-18s n=%4d p50=%8s p99=%8s max=%8s", k, len(d), pct(.5).Round(100*time.Microsecond), pct(.99).Round(100*time.Microsecond), d[len(d)-1].Round(100*time.Microsecond))
	}
}

// loadLearner is one simulated learner (or the instructor).
type loadLearner struct {
	*client
	class, name string
	learnerID   string
	lt          *latencies
	conn        *websocket.Conn
	done        chan struct{}
	mu          sync.Mutex
	pending     map[string]time.Time
}

// do is client.do, timed as kind.
func (l *loadLearner) do(method, path string, form url.Values, kind string) (int, string, http.Header) {
	if method == http.MethodPost && form == nil {
		form = url.Values{}
	}
	start := time.Now()
	code, body, h := l.client.do(method, path, form)
	if code != 0 {
		l.lt.add(kind, time.Since(start))
	}
	return code, body, h
}

func (l *loadLearner) get(path, kind string) string {
	code, body, _ := l.do(http.MethodGet, path, nil, kind)
	if code != http.StatusOK {
		l.t.Errorf("%s: GET %s: %d %.200s", l.name, path, code, body)
	}
	return body
}

func (l *loadLearner) post(path string, form url.Values, kind string) string {
	code, body, _ := l.do(http.MethodPost, path, form, kind)
	if code != http.StatusOK {
		l.t.Errorf("%s: POST %s: %d %.200s", l.name, path, code, body)
	}
	return body
}

func (l *loadLearner) join(code string) {
	status, body, _ := l.do(http.MethodPost, "/join", url.Values{"code": {code}, "name": {l.name}}, "join")
	if status != http.StatusSeeOther {
		l.t.Fatalf("%s: join: %d %.300s", l.name, status, body)
	}
}

func (l *loadLearner) signIn(token string) {
	status, _, _ := l.do(http.MethodPost, "/class/"+l.class+"/instructor", url.Values{"token": {token}}, "sign-in")
	if status != http.StatusSeeOther {
		l.t.Fatalf("instructor sign-in: %d", status)
	}
}

// follow dials the class's stream and checks every frame: only this
// learner's row, lab and cells, only messages to everyone or to them.
func (l *loadLearner) follow(base string) {
	u := "ws" + strings.TrimPrefix(base, "http") + "/class/" + l.class + "/events"
	d := websocket.Dialer{Jar: l.c.Jar}
	conn, _, err := d.Dial(u, http.Header{"Origin": {base}})
	if err != nil {
		l.t.Fatalf("%s: class stream: %v", l.name, err)
	}
	var f classFrame
	if err := conn.ReadJSON(&f); err != nil || f.Snapshot == nil || len(f.Snapshot.Rows) != 1 || f.Snapshot.Rows[0].Learner.Name != l.name {
		l.t.Fatalf("%s: first frame %+v %v", l.name, f, err)
	}
	l.learnerID = f.Snapshot.Rows[0].Learner.ID
	l.conn, l.done, l.pending = conn, make(chan struct{}), map[string]time.Time{}
	go func() {
		defer close(l.done)
		for {
			var f classFrame
			if err := conn.ReadJSON(&f); err != nil {
				return
			}
			l.check(f)
		}
	}()
}

func (l *loadLearner) check(f classFrame) {
	if f.Snapshot != nil {
		for _, r := range f.Snapshot.Rows {
			if r.Learner.ID != l.learnerID {
				l.t.Errorf("%s received %s's row", l.name, r.Learner.Name)
			}
		}
		return
	}
	u := f.Update
	if u == nil {
		return
	}
	if u.Kind == class.UpdateMessage {
		if u.Message.To != "" && u.Message.To != l.learnerID {
			l.t.Errorf("%s received a message to %s: %q", l.name, u.Message.To, u.Message.Body)
		}
		l.mu.Lock()
		if sent, ok := l.pending[u.Message.Body]; ok {
			l.lt.add("pushed message", time.Since(sent))
			delete(l.pending, u.Message.Body)
		}
		l.mu.Unlock()
		return
	}
	if u.Learner != l.learnerID || (u.Lab != nil && u.Lab.Learner != "" && u.Lab.Learner != l.learnerID) {
		l.t.Errorf("%s received an update of %s's: %s", l.name, u.Learner, u.Kind)
	}
}

func (l *loadLearner) expect(body string, sent time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending[body] = sent
}

func (l *loadLearner) close() {
	if l.conn != nil {
		l.conn.Close()
		<-l.done
	}
}

// session drives selector-typo on the learner's lab over HTTP and the
// websockets, as the browser does.
func (l *loadLearner) session(hub *class.Hub, classID string) {
	t := l.t
	room, err := hub.Classroom(classID)
	if err != nil {
		t.Error(err)
		return
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		lab, _ := room.Labs.Lab(l.learnerID)
		if lab.State == classlabs.Ready {
			break
		}
		if lab.State == classlabs.Failed || time.Now().After(deadline) {
			t.Errorf("%s: lab %+v", l.name, lab)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	sc := "/class/" + classID + "/scenarios/selector-typo"
	code, _, h := l.do(http.MethodPost, sc+"/start", url.Values{}, "start")
	if code != http.StatusSeeOther {
		t.Errorf("%s: start: %d", l.name, code)
		return
	}
	op := h.Get("Location")
	for {
		page := l.get(op, "operation page")
		if strings.Contains(page, `data-done="true"`) {
			if strings.Contains(page, `<span class="state-broken">Failed:`) {
				t.Errorf("%s: the scenario did not start:\n%s", l.name, page)
				return
			}
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	l.get(sc, "scenario page")
	wsBase := "ws" + strings.TrimPrefix(l.base, "http")
	d := websocket.Dialer{Jar: l.c.Jar}
	start := time.Now()
	vc, _, err := d.Dial(wsBase+sc+"/views", http.Header{"Origin": {l.base}})
	if err != nil {
		t.Errorf("%s: views: %v", l.name, err)
		return
	}
	defer vc.Close()
	if _, _, err := vc.ReadMessage(); err != nil {
		t.Errorf("%s: views: %v", l.name, err)
		return
	}
	l.lt.add("first view frame", time.Since(start))
	go func() {
		for {
			if _, _, err := vc.ReadMessage(); err != nil {
				return
			}
		}
	}()
	lab, _ := room.Labs.Lab(l.learnerID)
	tc, _, err := d.Dial(wsBase+sc+"/terminal?node="+url.QueryEscape(lab.Cluster+"-control-plane"), http.Header{"Origin": {l.base}})
	if err != nil {
		t.Errorf("%s: terminal: %v", l.name, err)
		return
	}
	defer tc.Close()
	tc.WriteMessage(websocket.BinaryMessage, []byte(`kubectl -n shop patch service web --type=merge -p '{"spec":{"selector":{"app":"web"}}}'`+"\r"))
	var out strings.Builder
	tc.SetReadDeadline(time.Now().Add(2 * time.Minute))
	for !strings.Contains(out.String(), "service/web patched") {
		_, msg, err := tc.ReadMessage()
		if err != nil {
			t.Errorf("%s: terminal: %v (so far %q)", l.name, err, out.String())
			return
		}
		out.Write(msg)
	}
	for try := 0; ; try++ {
		time.Sleep(2 * time.Second) // as a learner: the proxiers sync, then check
		body := l.post(sc+"/check", nil, "check")
		if strings.Contains(body, `"state":"passed"`) {
			return
		}
		if try == 10 {
			t.Errorf("%s: the fixed scenario does not pass: %.500s", l.name, body)
			return
		}
	}
}

// reportLabMemory logs the memory of each lab cluster (embedded's
// Cluster.Memory: its control plane, node agents and containers).
func reportLabMemory(t *testing.T, p *embedded.Provider) {
	ctx := context.Background()
	sums, err := p.List(ctx)
	if err != nil {
		t.Errorf("listing the labs: %v", err)
		return
	}
	var total uint64
	for _, s := range sums {
		c, err := p.Get(ctx, s.Name)
		if err != nil {
			continue
		}
		m := c.(*embedded.Cluster).Memory()
		t.Logf("memory of lab %s: %d MiB PSS (%d MiB RSS) in %d processes", s.Name, m.PSS>>20, m.RSS>>20, m.Processes)
		total += m.PSS
	}
	if len(sums) > 0 {
		t.Logf("memory per lab: %d MiB PSS on average over %d labs", (total/uint64(len(sums)))>>20, len(sums))
	}
	t.Logf("the test process (server and class): %d MiB resident", selfRSS()>>10)
}

// selfRSS is this process's resident memory in KiB.
func selfRSS() int64 {
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb
		}
	}
	return 0
}
