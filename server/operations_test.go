package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/svclab/svclab/lab/cluster"
)

// fakeCreator is a hand-written Clusters whose Create reports the steps it
// is given, waiting on release between the first and the rest.
type fakeCreator struct {
	fakeLister
	mu      sync.Mutex
	got     []cluster.CreateOptions
	release chan struct{}
	fail    error
}

func (f *fakeCreator) Create(ctx context.Context, opts cluster.CreateOptions) (cluster.Cluster, error) {
	f.mu.Lock()
	f.got = append(f.got, opts)
	f.mu.Unlock()
	done := opts.Progress.Start("Starting etcd")
	done(nil)
	select {
	case <-f.release:
	case <-ctx.Done():
		opts.Progress.Start("Removing the half-created cluster")(nil)
		return nil, ctx.Err()
	}
	opts.Progress.Infof("kubeconfig: /x")
	done = opts.Progress.Start("Starting kube-apiserver")
	done(f.fail)
	return nil, f.fail
}

func newTestServer(t *testing.T, c Clusters) (*Server, *httptest.Server) {
	s := &Server{Clusters: c, Log: slog.New(slog.DiscardHandler), Background: context.Background()}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func TestCreateClusterFromUI(t *testing.T) {
	for _, fail := range []error{nil, errors.New("etcd would not start")} {
		t.Run(fmt.Sprint(fail), func(t *testing.T) {
			fc := &fakeCreator{release: make(chan struct{}), fail: fail}
			s, ts := newTestServer(t, fc)
			resp, err := noRedirect.PostForm(ts.URL+"/clusters", url.Values{"name": {"lab"}, "nodes": {"2"}, "proxyMode": {"iptables"}})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			loc := resp.Header.Get("Location")
			if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/operations/") {
				t.Fatalf("POST /clusters: %d, Location %q", resp.StatusCode, loc)
			}
			// The page shows the steps so far.
			op, ok := s.ops.get(strings.TrimPrefix(loc, "/operations/"))
			if !ok {
				t.Fatalf("no operation behind %s", loc)
			}
			waitUntil(t, func() bool { steps, _, _, _ := op.Snapshot(); return len(steps) >= 1 && steps[0].State == "done" })
			page := get(t, ts.URL+loc)
			if !strings.Contains(page, "Starting etcd ✓") || !strings.Contains(page, `data-done="false"`) {
				t.Errorf("operation page:\n%s", page)
			}
			// The websocket replays the past and streams the rest.
			ws, _, err := websocket.DefaultDialer.Dial(strings.Replace(ts.URL, "http", "ws", 1)+loc+"/events", http.Header{"Origin": {ts.URL}})
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			close(fc.release)
			var events []string
			for {
				_, msg, err := ws.ReadMessage()
				if err != nil {
					break
				}
				var st Step
				if err := json.Unmarshal(msg, &st); err != nil {
					t.Fatal(err)
				}
				events = append(events, st.State+":"+st.Name+st.Detail+st.Error)
			}
			// The replay holds each finished step once; live events
			// include the running ones.
			want := "done:Starting etcd|info:kubeconfig: /x|running:Starting kube-apiserver|done:Starting kube-apiserver|finished:"
			if fail != nil {
				// The final event says what it means for a learner too
				// (the page shows it), not only the raw error.
				want = "done:Starting etcd|info:kubeconfig: /x|running:Starting kube-apiserver|failed:Starting kube-apiserveretcd would not start|failed:" +
					"This did not work: the step “Starting kube-apiserver” failed. Try again; if it fails again, start over, or use another cluster (the details below say what went wrong)." + "etcd would not start"
			}
			if got := strings.Join(events, "|"); got != want {
				t.Errorf("events:\n%s\nwant\n%s", got, want)
			}
			if opts := fc.got[0]; opts.Name != "lab" || opts.Workers != 1 || opts.ProxyMode != "iptables" {
				t.Errorf("create options %+v", opts)
			}
			s.Wait()
		})
	}
}

func TestCreateClusterBadInput(t *testing.T) {
	_, ts := newTestServer(t, &fakeCreator{release: make(chan struct{})})
	for _, tc := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"name": {"Bad_Name"}}, "is not valid"},
		{url.Values{}, "cluster name is empty"},
		{url.Values{"name": {"lab"}, "nodes": {"0"}}, "use a number from 1 to 21"},
		{url.Values{"name": {"lab"}, "nodes": {"many"}}, "use a number from 1 to 21"},
		{url.Values{"name": {"lab"}, "proxyMode": {"ipvs"}}, "proxy mode ipvs is not available"},
		{url.Values{"name": {"lab"}, "proxyMode": {"<b>x"}}, "unknown proxy mode"},
	} {
		resp, err := noRedirect.PostForm(ts.URL+"/clusters", tc.form)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), tc.want) {
			t.Errorf("%v: %d %s, want 400 with %q", tc.form, resp.StatusCode, body, tc.want)
		}
	}
	for _, path := range []string{"/operations/99", "/operations/99/events"} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
}

// A watcher that disappears, or never reads, must not hold up the work.
func TestOperationWatcherGoneDoesNotBlock(t *testing.T) {
	fc := &fakeCreator{release: make(chan struct{})}
	s, ts := newTestServer(t, fc)
	resp, err := noRedirect.PostForm(ts.URL+"/clusters", url.Values{"name": {"lab"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	ws, _, err := websocket.DefaultDialer.Dial(strings.Replace(ts.URL, "http", "ws", 1)+loc+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.Close() // gone without a word
	op, _ := s.ops.get(strings.TrimPrefix(loc, "/operations/"))
	_, stuck, cancel := op.Watch() // and one that never reads
	defer cancel()
	_ = stuck
	for i := 0; i < 200; i++ {
		op.Infof("line %d", i)
	}
	close(fc.release)
	done := make(chan struct{})
	go func() { s.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the operation is blocked by its watchers")
	}
}

// Stopping the server cancels a create in progress, which rolls back.
func TestOperationCancelledWithServer(t *testing.T) {
	fc := &fakeCreator{release: make(chan struct{})}
	s, ts := newTestServer(t, fc)
	ctx, cancel := context.WithCancel(context.Background())
	s.Background = ctx
	resp, err := noRedirect.PostForm(ts.URL+"/clusters", url.Values{"name": {"lab"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	s.Wait()
	op, _ := s.ops.get(strings.TrimPrefix(resp.Header.Get("Location"), "/operations/"))
	steps, done, errText, _ := op.Snapshot()
	if !done || !strings.Contains(errText, "context canceled") || steps[len(steps)-1].Name != "Removing the half-created cluster" {
		t.Errorf("after cancel: done=%v err=%q steps=%+v", done, errText, steps)
	}
}

func get(t testing.TB, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not met in 2s")
}
