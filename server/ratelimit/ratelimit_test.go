package ratelimit

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestLimiter(t *testing.T) {
	type step struct {
		advance time.Duration
		key     string
		ok      bool
		wait    time.Duration
	}
	for _, tc := range []struct {
		name  string
		limit Limit
		steps []step
	}{
		{"burst then refused", Limit{Every: time.Second, Burst: 2}, []step{
			{0, "a", true, 0}, {0, "a", true, 0}, {0, "a", false, time.Second},
			{500 * time.Millisecond, "a", false, 500 * time.Millisecond},
			{500 * time.Millisecond, "a", true, 0},
		}},
		{"keys are independent", Limit{Every: time.Minute, Burst: 1}, []step{
			{0, "a", true, 0}, {0, "a", false, time.Minute}, {0, "b", true, 0},
		}},
		{"refill stops at the burst", Limit{Every: time.Second, Burst: 2}, []step{
			{0, "a", true, 0}, {time.Hour, "a", true, 0}, {0, "a", true, 0}, {0, "a", false, time.Second},
		}},
		{"join preset", Join, []step{
			{0, "ip", true, 0}, {0, "ip", true, 0}, {0, "ip", true, 0}, {0, "ip", true, 0}, {0, "ip", true, 0},
			{0, "ip", false, 12 * time.Second}, {12 * time.Second, "ip", true, 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeClock{t: time.Unix(1000, 0)}
			l := New(tc.limit, c.now)
			for i, s := range tc.steps {
				c.t = c.t.Add(s.advance)
				ok, wait := l.Allow(s.key)
				if ok != s.ok || wait != s.wait {
					t.Errorf("step %d (%s): Allow = %v, %v; want %v, %v", i, s.key, ok, wait, s.ok, s.wait)
				}
			}
		})
	}
}

func TestLimiterPrunes(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	l := New(Limit{Every: time.Second, Burst: 1}, c.now)
	for i := range pruneEvery - 1 {
		l.Allow(fmt.Sprint(i))
	}
	c.t = c.t.Add(time.Second)
	l.Allow("last")
	if n := l.Keys(); n != 1 {
		t.Errorf("%d buckets after the refilled ones were pruned, want 1", n)
	}
}

func TestMiddleware(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	h := Middleware(New(Limit{Every: 10 * time.Second, Burst: 1}, c.now), ClientIP, "join attempts")(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	do := func(addr string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/join", nil)
		r.RemoteAddr = addr
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := do("192.0.2.1:1111"); w.Code != http.StatusNoContent {
		t.Fatalf("first: %d", w.Code)
	}
	w := do("192.0.2.1:2222") // same address, other port
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "10" || !strings.Contains(w.Body.String(), "Too many join attempts: try again in 10 seconds.") {
		t.Errorf("second: %d %q %q", w.Code, w.Header().Get("Retry-After"), w.Body.String())
	}
	if w := do("192.0.2.2:1111"); w.Code != http.StatusNoContent {
		t.Errorf("another address: %d", w.Code)
	}
}

func TestFailuresMiddleware(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	l := New(Limit{Every: 10 * time.Second, Burst: 2}, clk.now)
	h := FailuresMiddleware(l, ClientIP, "join attempts")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("code") != "good" {
			http.Error(w, "that join code is not valid", http.StatusBadRequest)
			return
		}
		w.Write([]byte("joined"))
	}))
	try := func(code string) int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/join?code="+code, nil)
		req.RemoteAddr = "192.0.2.1:5000"
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for _, tc := range []struct {
		advance time.Duration
		code    string
		want    int
	}{
		// Successes cost nothing: a classroom joins at once.
		{0, "good", 200}, {0, "good", 200}, {0, "good", 200}, {0, "good", 200},
		// Two failures use the burst; then even a good code waits.
		{0, "bad", 400}, {0, "bad", 400}, {0, "bad", 429}, {0, "good", 429},
		{10 * time.Second, "good", 200},
		{0, "bad", 400}, {0, "bad", 429},
	} {
		clk.t = clk.t.Add(tc.advance)
		if got := try(tc.code); got != tc.want {
			t.Fatalf("after %+v: %d, want %d", tc, got, tc.want)
		}
	}
}

// TestFailuresMiddlewareConcurrentGuesses sends 20 wrong guesses at once:
// each costs a token before it is tried, so only the burst reaches the
// handler; a right one afterwards, once a token is back, costs nothing.
func TestFailuresMiddlewareConcurrentGuesses(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	l := New(Limit{Every: time.Minute, Burst: 5}, clock.now)
	var mu sync.Mutex
	reached := 0
	release := make(chan struct{})
	h := FailuresMiddleware(l, func(*http.Request) string { return "10.0.0.1" }, "guesses")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached++
		mu.Unlock()
		<-release
		if r.URL.Query().Get("code") == "right" {
			return
		}
		w.WriteHeader(http.StatusBadRequest)
	}))
	var wg sync.WaitGroup
	codes := make([]int, 20)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("POST", "/join?code=wrong", nil))
			codes[i] = rec.Code
		}()
	}
	time.Sleep(100 * time.Millisecond)
	close(release)
	wg.Wait()
	refused := 0
	for _, c := range codes {
		if c == http.StatusTooManyRequests {
			refused++
		}
	}
	if reached != 5 || refused != 15 {
		t.Errorf("%d guesses reached the handler and %d were refused, want 5 and 15", reached, refused)
	}
	clock.t = clock.t.Add(time.Minute)
	for i := 0; i < 3; i++ {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/join?code=right", nil))
		if rec.Code != http.StatusOK {
			t.Errorf("a right code after a minute: %d", rec.Code)
		}
	}
}
