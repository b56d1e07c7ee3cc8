package server

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

func TestHostAllowed(t *testing.T) {
	local := &Access{}
	named := &Access{Hosts: []string{"lab.example.org", "10.1.2.3:8443"}}
	for _, tc := range []struct {
		a    *Access
		host string
		want bool
	}{
		{local, "127.0.0.1:8080", true},
		{local, "127.0.0.5", true},
		{local, "localhost:8080", true},
		{local, "LOCALHOST.", true},
		{local, "lab.localhost:8080", true},
		{local, "[::1]:8080", true},
		{local, "rebind.example:8080", false},
		{local, "127.0.0.1.evil.example", false},
		{local, "localhost.evil.example", false},
		{local, "10.1.2.3:8080", false},
		{local, "", false},
		{named, "lab.example.org", true},
		{named, "lab.example.org:443", true},
		{named, "10.1.2.3:8443", true},
		{named, "10.1.2.3:8080", false},
		{named, "other.example.org", false},
		{&Access{AnyHost: true}, "anything.example", true},
	} {
		if got := tc.a.hostAllowed(tc.host); got != tc.want {
			t.Errorf("hostAllowed(%q) with %+v = %v, want %v", tc.host, tc.a, got, tc.want)
		}
	}
}

func TestOriginAllowed(t *testing.T) {
	local := &Access{}
	named := &Access{Hosts: []string{"lab.example.org", "10.1.2.3:8443"}}
	anyHost := &Access{AnyHost: true}
	for _, tc := range []struct {
		a            *Access
		origin, host string
		tls          bool
		want         bool
	}{
		{local, "", "127.0.0.1:7777", false, true}, // svclab's own tools
		{local, "http://127.0.0.1:7777", "127.0.0.1:7777", false, true},
		{local, "http://localhost:7777", "127.0.0.1:7777", false, true},
		{local, "http://lab.localhost:7777", "localhost:7777", false, true},
		{local, "http://[::1]:7777", "127.0.0.1:7777", false, true},
		{local, "http://localhost:3000", "127.0.0.1:7777", false, false},
		{local, "http://127.0.0.1", "127.0.0.1:7777", false, false},
		{local, "http://localhost", "localhost", false, true},
		{local, "https://localhost", "localhost", true, true},
		{local, "http://evil.example", "127.0.0.1:7777", false, false},
		{local, "http://evil.example:7777", "evil.example:7777", false, true}, // the Host check refuses the name itself
		{local, "null", "127.0.0.1:7777", false, false},
		{local, "file:///home/learner/x.html", "127.0.0.1:7777", false, false},
		{local, "http://u:p@127.0.0.1:7777", "127.0.0.1:7777", false, false},
		{named, "https://lab.example.org", "127.0.0.1:7777", false, true}, // behind a proxy
		{named, "https://10.1.2.3:8443", "10.1.2.3:8443", true, true},
		{named, "https://10.1.2.3:9000", "10.1.2.3:8443", true, false},
		{named, "https://other.example.org", "lab.example.org", true, false},
		{anyHost, "https://lab.school.example", "lab.school.example", true, true},
		{anyHost, "https://evil.example", "lab.school.example", true, false},
		{anyHost, "http://localhost:7777", "127.0.0.1:7777", false, false},
	} {
		r := httptest.NewRequest("GET", "/terminal", nil)
		r.Host = tc.host
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if !tc.tls {
			r.TLS = nil
		} else if r.TLS == nil {
			r.TLS = &tls.ConnectionState{}
		}
		if got := tc.a.originAllowed(r); got != tc.want {
			t.Errorf("originAllowed(origin %q, host %q, tls %v) with %+v = %v, want %v", tc.origin, tc.host, tc.tls, tc.a, got, tc.want)
		}
	}
}

// accessServer serves a handler and a websocket behind a's guard, as
// Server.Handler does.
func accessServer(t *testing.T, a *Access) *httptest.Server {
	t.Helper()
	s := &Server{Access: a, Log: slog.New(slog.DiscardHandler)}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the lab") })
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("/terminal", func(w http.ResponseWriter, r *http.Request) {
		c, err := s.upgrader().Upgrade(w, r, nil)
		if err != nil {
			return
		}
		c.WriteMessage(websocket.TextMessage, []byte("root shell"))
		c.Close()
	})
	ts := httptest.NewServer(a.Guard(mux))
	t.Cleanup(ts.Close)
	return ts
}

func TestGuardRebinding(t *testing.T) {
	ts := accessServer(t, &Access{})
	get := func(host string) (int, string) {
		req, _ := http.NewRequest("GET", ts.URL+"/", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("rebind.example:8080"); code != http.StatusMisdirectedRequest || strings.Contains(body, "the lab") {
		t.Errorf("a rebound name: %d %q", code, body)
	}
	if code, body := get(strings.TrimPrefix(ts.URL, "http://")); code != 200 || body != "the lab" {
		t.Errorf("the loopback address: %d %q", code, body)
	}
	// The terminal's websocket: refused from another origin, whatever
	// Host the page's name resolves to.
	wsURL := "ws" + strings.TrimPrefix(ts.URL, "http") + "/terminal"
	port := ts.URL[strings.LastIndex(ts.URL, ":")+1:]
	for _, tc := range []struct {
		origin, host string
		ok           bool
	}{
		{"http://rebind.example:8080", "rebind.example:8080", false},
		{"http://rebind.example:8080", strings.TrimPrefix(ts.URL, "http://"), false},
		{"http://evil.example", "", false},
		{"null", "", false},
		{ts.URL, "", true},
		// Another name of this machine: the server's own port only (a
		// page of another local server is another origin, though the
		// browser gives it the same cookies).
		{"http://localhost:" + port, "", true},
		{"http://[::1]:" + port, "", true},
		{"http://localhost:8080", "", false},
		{"http://127.0.0.1:1", "", false},
		{"http://localhost", "", false},
		{"http://user@localhost:" + port, "", false},
		{"http://localhost:" + port, "rebind.example:" + port, false},
	} {
		h := http.Header{"Origin": {tc.origin}}
		if tc.host != "" {
			h.Set("Host", tc.host)
		}
		d := websocket.Dialer{}
		c, resp, err := d.Dial(wsURL, h)
		if (err == nil) != tc.ok {
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			t.Errorf("websocket from origin %q host %q: err %v (status %d), want ok=%v", tc.origin, tc.host, err, status, tc.ok)
		}
		if c != nil {
			c.Close()
		}
	}
}

func TestGuardToken(t *testing.T) {
	a := &Access{Token: NewToken()}
	ts := accessServer(t, a)
	jar := &cookieJar{}
	client := &http.Client{Jar: jar}
	get := func(c *http.Client, path string) (int, string) {
		resp, err := c.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(client, "/"); code != http.StatusUnauthorized || strings.Contains(body, "the lab") {
		t.Errorf("without the token: %d %q", code, body)
	}
	if code, _ := get(client, "/?token=wrong"); code != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d", code)
	}
	if code, body := get(http.DefaultClient, "/healthz"); code != 200 || body != "ok" {
		t.Errorf("/healthz without the token: %d %q", code, body)
	}
	// The printed link: the token becomes a cookie and leaves the URL.
	resp, err := client.Get(ts.URL + "/scenarios?x=1&token=" + a.Token)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.URL.Query().Get("token") != "" || resp.Request.URL.Query().Get("x") != "1" {
		t.Errorf("after the link, the address is %s", resp.Request.URL)
	}
	var cookie *http.Cookie
	for _, c := range jar.cookies {
		if c.Name == tokenCookie {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("the token cookie: %+v", cookie)
	}
	if code, body := get(client, "/"); code != 200 || body != "the lab" {
		t.Errorf("with the cookie: %d %q", code, body)
	}
	// A websocket needs the token too.
	d := websocket.Dialer{}
	if c, _, err := d.Dial("ws"+strings.TrimPrefix(ts.URL, "http")+"/terminal", http.Header{"Origin": {ts.URL}}); err == nil {
		c.Close()
		t.Error("a websocket without the token was accepted")
	}
	if c, _, err := d.Dial("ws"+strings.TrimPrefix(ts.URL, "http")+"/terminal", http.Header{"Origin": {ts.URL}, "Cookie": {tokenCookie + "=" + a.Token}}); err != nil {
		t.Errorf("a websocket with the token: %v", err)
	} else {
		c.Close()
	}
}

// cookieJar is a minimal jar for one host.
type cookieJar struct{ cookies []*http.Cookie }

func (j *cookieJar) SetCookies(_ *url.URL, cs []*http.Cookie) { j.cookies = append(j.cookies, cs...) }
func (j *cookieJar) Cookies(*url.URL) []*http.Cookie          { return j.cookies }

func TestClientAddr(t *testing.T) {
	for _, tc := range []struct {
		trust       bool
		remote, xff string
		want        string
	}{
		{false, "203.0.113.7:5000", "198.51.100.1", "203.0.113.7"},
		{true, "127.0.0.1:5000", "198.51.100.1", "198.51.100.1"},
		{true, "127.0.0.1:5000", "10.0.0.9, 198.51.100.1", "198.51.100.1"},
		{true, "127.0.0.1:5000", "not-an-ip", "127.0.0.1"},
		// Only a proxy on this machine is believed.
		{true, "203.0.113.7:5000", "198.51.100.1", "203.0.113.7"},
		{true, "[::1]:5000", "", "::1"},
	} {
		r := httptest.NewRequest("POST", "/join", nil)
		r.RemoteAddr = tc.remote
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := (&Access{TrustProxy: tc.trust}).clientAddr(r); got != tc.want {
			t.Errorf("%+v: %q", tc, got)
		}
	}
}
