package agnhost

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// harness runs one agnhost invocation in a goroutine, on loopback.
type harness struct {
	t              *testing.T
	sig            chan os.Signal
	stdout, stderr *syncBuffer
	done           chan int
	cancel         context.CancelFunc
	mu             sync.Mutex
	addrs          map[string][]net.Addr
	readyCh        chan struct{}
	code           *int
}

func newEnv(t *testing.T, h *harness) env {
	dir := t.TempDir()
	resolv := filepath.Join(dir, "resolv.conf")
	os.WriteFile(resolv, []byte("nameserver 10.96.0.10\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"), 0o644)
	hosts := filepath.Join(dir, "hosts")
	os.WriteFile(hosts, []byte("127.0.0.1\tlocalhost\n10.244.1.5\tweb-1\n"), 0o644)
	uploads := filepath.Join(dir, "uploads")
	os.Mkdir(uploads, 0o755)
	return env{
		stdout: h.stdout, stderr: h.stderr,
		notify:   func(...os.Signal) <-chan os.Signal { return h.sig },
		hostname: func() (string, error) { return "web-7d4b9c-x2k4p", nil },
		environ:  os.Environ,
		now:      time.Now,
		bindHost: "127.0.0.1",
		ready: func(kind string, a net.Addr) {
			h.mu.Lock()
			h.addrs[kind] = append(h.addrs[kind], a)
			h.mu.Unlock()
			select {
			case h.readyCh <- struct{}{}:
			default:
			}
		},
		resolvConf: resolv, hostsFile: hosts, uploadDir: uploads, webRoot: dir, shell: "/bin/sh",
		awaitDeletion: 50 * time.Millisecond,
	}
}

func start(t *testing.T, mod func(*env), args ...string) *harness {
	t.Helper()
	h := &harness{t: t, sig: make(chan os.Signal, 1), stdout: &syncBuffer{}, stderr: &syncBuffer{},
		done: make(chan int, 1), addrs: map[string][]net.Addr{}, readyCh: make(chan struct{}, 16)}
	e := newEnv(t, h)
	if mod != nil {
		mod(&e)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- run(ctx, e, args) }()
	t.Cleanup(func() {
		cancel()
		if h.code == nil {
			select {
			case <-h.done:
			case <-time.After(5 * time.Second):
				t.Errorf("agnhost %v did not stop", args)
			}
		}
	})
	return h
}

// addr waits for the server of kind to listen and returns its address.
func (h *harness) addr(kind string) string {
	h.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		h.mu.Lock()
		a := h.addrs[kind]
		h.mu.Unlock()
		if len(a) > 0 {
			return a[0].String()
		}
		select {
		case <-h.readyCh:
		case code := <-h.done:
			h.code = &code
			h.t.Fatalf("agnhost exited with %d before listening (%s): %s", code, kind, h.stderr.String())
		case <-deadline:
			h.t.Fatalf("no %s server after 5s; stderr: %s", kind, h.stderr.String())
		}
	}
}

// wait returns the exit code.
func (h *harness) wait(within time.Duration) int {
	h.t.Helper()
	if h.code != nil {
		return *h.code
	}
	select {
	case code := <-h.done:
		h.code = &code
		return code
	case <-time.After(within):
		h.t.Fatalf("agnhost did not exit within %s; stderr: %s", within, h.stderr.String())
	}
	return -1
}

func get(t *testing.T, rawURL string) (int, string, http.Header) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(rawURL)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func udpAsk(t *testing.T, addr, msg string) (string, error) {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	return string(buf[:n]), err
}

func TestNetexecHTTP(t *testing.T) {
	h := start(t, nil, "netexec", "--http-port=0", "--udp-port", "0")
	base := "http://" + h.addr("http")
	udp := h.addr("udp")
	_, udpPort, _ := net.SplitHostPort(udp)
	_, httpPort, _ := net.SplitHostPort(h.addr("http"))
	closed := closedPort(t)

	tests := []struct {
		path       string
		status     int
		body       string // exact, unless prefix is set
		prefix     bool
		headerName string
		header     string
	}{
		{path: "/hostname", status: 200, body: "web-7d4b9c-x2k4p"},
		{path: "/hostName", status: 200, body: "web-7d4b9c-x2k4p"},
		{path: "/echo?msg=hello%20world", status: 200, body: "hello world"},
		{path: "/echo?msg=gone&code=404", status: 404, body: "gone"},
		{path: "/echo?msg=x&code=abc", status: 200, body: "argument 'code' must be an integer or empty, got \"abc\"\n"},
		{path: "/clientip", status: 200, body: "127.0.0.1:", prefix: true},
		{path: "/serverport", status: 200, body: "0"}, // the --http-port given, as upstream
		{path: "/", status: 200, body: "NOW: ", prefix: true},
		{path: "/healthz", status: 200, body: ""},
		{path: "/readyz", status: 200, body: "ok"},
		{path: "/header?key=User-Agent", status: 200, body: "Go-http-client/1.1"},
		{path: "/shell?cmd=" + url.QueryEscape("echo hi; echo there"), status: 200, body: `{"output":"hi\nthere\n"}`},
		{path: "/shell?shellCommand=" + url.QueryEscape("echo out; exit 3"), status: 200, body: `{"error":"exit status 3","output":"out\n"}`},
		{path: "/redirect?location=/echo%3Fmsg%3Dmoved&code=307", status: 307, body: "", prefix: true, headerName: "Location", header: "/echo?msg=moved"},
		{path: "/dial?host=127.0.0.1&port=" + httpPort + "&request=hostname", status: 200, body: `{"responses":["web-7d4b9c-x2k4p"]}`},
		{path: "/dial?host=127.0.0.1&port=" + httpPort + "&request=echo%3Fmsg%3Dhi&protocol=http&tries=2", status: 200, body: `{"responses":["hi","hi"]}`},
		{path: "/dial?host=127.0.0.1&port=" + udpPort + "&request=hostname&protocol=udp", status: 200, body: `{"responses":["web-7d4b9c-x2k4p"]}`},
		{path: "/dial?host=127.0.0.1&port=" + closed + "&request=hostname&tries=2", status: 200, body: `{"errors":["Get \"http://127.0.0.1:` + closed + `/hostname\": dial tcp 127.0.0.1:` + closed + `: connect: connection refused",`, prefix: true},
		{path: "/dial?host=127.0.0.1&port=" + httpPort, status: 400, body: "request parameter not specified. <nil>\n"},
		{path: "/dial?host=127.0.0.1&port=1&request=x&tries=many", status: 400, body: "tries parameter is invalid.", prefix: true},
		{path: "/dial?host=127.0.0.1&port=1&request=x&protocol=sctp", status: 400, body: "unsupported protocol. sctp\n"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			status, body, hdr := get(t, base+tt.path)
			if status != tt.status {
				t.Errorf("status %d, want %d (body %q)", status, tt.status, body)
			}
			if tt.prefix && !strings.HasPrefix(body, tt.body) || !tt.prefix && body != tt.body {
				t.Errorf("body %q, want %q (prefix %v)", body, tt.body, tt.prefix)
			}
			if tt.headerName != "" && hdr.Get(tt.headerName) != tt.header {
				t.Errorf("%s: %q, want %q", tt.headerName, hdr.Get(tt.headerName), tt.header)
			}
		})
	}
	if !strings.Contains(h.stderr.String(), "GET /echo?msg=hello world&code=") || !strings.Contains(h.stderr.String(), "Started HTTP server on port 0") {
		t.Errorf("the log lacks upstream's lines: %s", h.stderr.String())
	}
}

// closedPort returns a loopback port nobody listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return port
}

func TestNetexecUDP(t *testing.T) {
	h := start(t, func(e *env) { e.environ = func() []string { return []string{"POD_NAME=web-1", "EMPTY="} } },
		"netexec", "--http-port=0", "--udp-port=0")
	addr := h.addr("udp")
	tests := []struct{ send, want string }{
		{"hostname", "web-7d4b9c-x2k4p"},
		{"HOSTNAME\n", "web-7d4b9c-x2k4p"},
		{"echo Hello World", "hello world"}, // lower-cased, as upstream
		{"clientip", "127.0.0.1:"},
		{"serverport", "0"}, // the --udp-port given, as upstream
		{"envvar POD_NAME", "web-1"},
	}
	for _, tt := range tests {
		got, err := udpAsk(t, addr, tt.send)
		if err != nil || !strings.HasPrefix(got, tt.want) {
			t.Errorf("UDP %q: %q, %v; want %q", tt.send, got, err, tt.want)
		}
	}
	if got, err := udpAsk(t, addr, "bogus"); err == nil {
		t.Errorf("UDP bogus got an answer %q; upstream stays silent", got)
	}
	if !strings.Contains(h.stderr.String(), "Unknown UDP command received from 127.0.0.1:") {
		t.Errorf("unknown command not logged: %s", h.stderr.String())
	}
}

func TestNetexecWithoutUDPIsNotHealthy(t *testing.T) {
	h := start(t, nil, "netexec", "--http-port=0", "--udp-port=-1")
	base := "http://" + h.addr("http")
	if status, _, _ := get(t, base+"/healthz"); status != http.StatusPreconditionFailed {
		t.Errorf("/healthz without a UDP server: %d, want 412 as upstream", status)
	}
	if status, body, _ := get(t, base+"/hostname"); status != 200 || body != "web-7d4b9c-x2k4p" {
		t.Errorf("/hostname: %d %q", status, body)
	}
}

func TestNetexecSigtermDelaysShutdown(t *testing.T) {
	h := start(t, nil, "netexec", "--http-port=0", "--udp-port=0", "--delay-shutdown=1")
	base := "http://" + h.addr("http")
	h.sig <- syscall.SIGTERM
	sent := time.Now()
	deadline := time.Now().Add(500 * time.Millisecond)
	for {
		status, body, _ := get(t, base+"/readyz")
		if status == http.StatusServiceUnavailable {
			if body != "shutting down" {
				t.Errorf("/readyz body %q", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d after SIGTERM", status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if status, _, _ := get(t, base+"/healthz"); status != 200 {
		t.Errorf("/healthz during the shutdown delay: %d, want 200", status)
	}
	if code := h.wait(5 * time.Second); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if d := time.Since(sent); d < 900*time.Millisecond {
		t.Errorf("exited %s after SIGTERM, before --delay-shutdown=1", d)
	}
	if !strings.Contains(h.stderr.String(), "Sleeping 1 seconds before terminating...") {
		t.Errorf("log: %s", h.stderr.String())
	}
}

func TestNetexecExits(t *testing.T) {
	tests := []struct {
		path string
		code int
	}{
		{"/shutdown", 0},
		{"/exit?code=3", 3},
		{"/exit?code=4&timeout=1s", 4},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			h := start(t, nil, "netexec", "--http-port=0", "--udp-port=-1")
			c := &http.Client{Timeout: 2 * time.Second}
			if resp, err := c.Get("http://" + h.addr("http") + tt.path); err == nil {
				resp.Body.Close()
			}
			if code := h.wait(5 * time.Second); code != tt.code {
				t.Errorf("exit code %d, want %d", code, tt.code)
			}
		})
	}
}

func TestNetexecPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	h := start(t, nil, "netexec", "--http-port="+port, "--udp-port=-1")
	if code := h.wait(5 * time.Second); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if !strings.Contains(h.stderr.String(), "address already in use") {
		t.Errorf("stderr: %s", h.stderr.String())
	}
}

func TestServeHostname(t *testing.T) {
	t.Run("http", func(t *testing.T) {
		h := start(t, nil, "serve-hostname", "--port=0")
		status, body, _ := get(t, "http://"+h.addr("http")+"/anything")
		if status != 200 || body != "web-7d4b9c-x2k4p" {
			t.Errorf("GET: %d %q", status, body)
		}
		h.sig <- syscall.SIGTERM
		if code := h.wait(5 * time.Second); code != 0 {
			t.Errorf("exit code %d", code)
		}
		if !strings.Contains(h.stderr.String(), "Awaiting pod deletion.") {
			t.Errorf("log: %s", h.stderr.String())
		}
	})
	t.Run("udp", func(t *testing.T) {
		h := start(t, nil, "serve-hostname", "--udp", "--http=false", "--port", "0")
		if got, err := udpAsk(t, h.addr("udp"), "anything"); err != nil || got != "web-7d4b9c-x2k4p" {
			t.Errorf("UDP: %q %v", got, err)
		}
	})
	t.Run("tcp", func(t *testing.T) {
		h := start(t, nil, "serve-hostname", "--tcp", "--http=false", "--port=0")
		c, err := net.Dial("tcp", h.addr("tcp"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(2 * time.Second))
		b, err := io.ReadAll(c)
		if err != nil || string(b) != "web-7d4b9c-x2k4p" {
			t.Errorf("TCP: %q %v", b, err)
		}
	})
	t.Run("http with udp", func(t *testing.T) {
		h := start(t, nil, "serve-hostname", "--udp", "--port=0")
		if code := h.wait(5 * time.Second); code != 1 {
			t.Errorf("exit code %d, want 1", code)
		}
		if !strings.Contains(h.stderr.String(), "Can't server TCP/UDP mode and HTTP mode at the same time") {
			t.Errorf("stderr: %s", h.stderr.String())
		}
	})
}

func TestPause(t *testing.T) {
	for _, tt := range []struct {
		sig  os.Signal
		code int
	}{{syscall.SIGTERM, 2}, {syscall.SIGINT, 1}} {
		t.Run(tt.sig.String(), func(t *testing.T) {
			h := start(t, nil, "pause")
			h.sig <- tt.sig
			if code := h.wait(5 * time.Second); code != tt.code {
				t.Errorf("exit code %d, want %d", code, tt.code)
			}
			if got, want := h.stdout.String(), fmt.Sprintf("Paused\nexiting %d\n", tt.code); got != want {
				t.Errorf("stdout %q, want %q", got, want)
			}
		})
	}
}

func TestPorter(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir)
	environ := []string{"PATH=/bin", "SERVE_PORT_0=foo", "SERVE_UDP_PORT_0=bar", "SERVE_TLS_PORT_0=secret",
		"CERT_FILE=" + filepath.Join(dir, "localhost.crt"), "KEY_FILE=" + filepath.Join(dir, "localhost.key")}
	h := start(t, func(e *env) { e.environ = func() []string { return environ } }, "porter")
	if status, body, _ := get(t, "http://"+h.addr("tcp")+"/x"); status != 200 || body != "foo" {
		t.Errorf("TCP: %d %q", status, body)
	}
	if got, err := udpAsk(t, h.addr("udp"), "x"); err != nil || got != "bar" {
		t.Errorf("UDP: %q %v", got, err)
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Get("https://" + h.addr("tls") + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "secret" {
		t.Errorf("TLS: %q", b)
	}

	j := start(t, func(e *env) { e.environ = func() []string { return []string{"SERVE_PORT_0=foo"} } }, "porter", "--json-response")
	if _, body, _ := get(t, "http://"+j.addr("tcp")+"/"); body != `{"Method":"GET","Body":"foo"}` {
		t.Errorf("--json-response: %q", body)
	}
}

func writeCert(t *testing.T, dir string) {
	t.Helper()
	// A self-signed pair from crypto/tls's test data would do; generate one.
	cert, key := testCertificate(t)
	os.WriteFile(filepath.Join(dir, "localhost.crt"), cert, 0o644)
	os.WriteFile(filepath.Join(dir, "localhost.key"), key, 0o600)
}

func TestLiveness(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	h := start(t, func(e *env) { e.now = clock; e.livenessPort = 0 }, "liveness")
	base := "http://" + h.addr("http")
	if status, body, _ := get(t, base+"/healthz"); status != 200 || body != "ok" {
		t.Errorf("young /healthz: %d %q", status, body)
	}
	mu.Lock()
	now = now.Add(11 * time.Second)
	mu.Unlock()
	if status, body, _ := get(t, base+"/healthz"); status != 500 || body != "error: 11" {
		t.Errorf("old /healthz: %d %q", status, body)
	}
	if status, body, _ := get(t, base+"/started"); status != 200 || body != "11s" {
		t.Errorf("/started: %d %q", status, body)
	}
	if status, _, hdr := get(t, base+"/redirect?loc="+url.QueryEscape("/healthz")); status != 302 || hdr.Get("Location") != "/healthz" {
		t.Errorf("/redirect: %d %q", status, hdr.Get("Location"))
	}
}

func TestTestWebserver(t *testing.T) {
	var root string
	h := start(t, func(e *env) {
		root = e.webRoot
		os.WriteFile(filepath.Join(root, "index.txt"), []byte("served"), 0o644)
	}, "test-webserver", "--port=0")
	status, body, hdr := get(t, "http://"+h.addr("http")+"/index.txt")
	if status != 200 || body != "served" || hdr.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("GET: %d %q %v", status, body, hdr)
	}
	if status, _, _ := get(t, "http://"+h.addr("http")+"/missing"); status != 404 {
		t.Errorf("missing file: %d", status)
	}
}

func TestOneShotCommands(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	echo, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		buf := make([]byte, 64)
		for {
			n, a, err := echo.ReadFromUDP(buf)
			if err != nil {
				return
			}
			echo.WriteToUDP(buf[:n], a)
		}
	}()
	closed := "127.0.0.1:" + closedPort(t)

	tests := []struct {
		args           []string
		code           int
		stdout, stderr string // substrings ("" checks emptiness of stdout)
	}{
		{args: []string{"dns-suffix"}, stdout: "default.svc.cluster.local,svc.cluster.local,cluster.local\n"},
		{args: []string{"dns-server-list"}, stdout: "10.96.0.10\n"},
		{args: []string{"etc-hosts"}, stdout: "10.244.1.5\tweb-1\n"},
		{args: []string{"connect", ln.Addr().String()}},
		{args: []string{"connect", "--timeout=2s", closed}, code: 1, stderr: "REFUSED\n"},
		{args: []string{"connect", "no-port-here"}, code: 1, stderr: "UNKNOWN: "},
		{args: []string{"connect", "--protocol=udp", "--timeout=2s", echo.LocalAddr().String()}},
		{args: []string{"connect", "--protocol=udp", "--timeout=2s", closed}, code: 1, stderr: "REFUSED: "},
		{args: []string{"connect", "--protocol=sctp", closed}, code: 1, stderr: "Unsupported protocol sctp"},
		{args: []string{"webhook", "--port=443"}, code: 1, stderr: "not implemented in svclab's agnhost; it has: connect, dns-server-list"},
		{args: []string{"no-such-thing"}, code: 1, stderr: `unknown command "no-such-thing"`},
		{args: []string{"netexec", "--no-such-flag"}, code: 1, stderr: "unknown flag: --no-such-flag"},
		{args: []string{"--version"}, stdout: "2.53 (svclab)"},
		{args: []string{"pause", "--v=2", "extra"}, code: 1, stderr: "accepts at most 0 arg(s)"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			h := &harness{sig: make(chan os.Signal, 1), stdout: &syncBuffer{}, stderr: &syncBuffer{}, addrs: map[string][]net.Addr{}, readyCh: make(chan struct{}, 4)}
			code := run(context.Background(), newEnv(t, h), tt.args)
			if code != tt.code {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tt.code, h.stderr.String())
			}
			if tt.stdout != "" && !strings.Contains(h.stdout.String(), tt.stdout) {
				t.Errorf("stdout %q, want %q", h.stdout.String(), tt.stdout)
			}
			if tt.stderr != "" && !strings.Contains(h.stderr.String(), tt.stderr) {
				t.Errorf("stderr %q, want %q", h.stderr.String(), tt.stderr)
			}
		})
	}

	// No search line: upstream panics, exit code 2.
	h := &harness{stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	e := newEnv(t, h)
	os.WriteFile(e.resolvConf, []byte("nameserver 10.96.0.10\n"), 0o644)
	if code := run(context.Background(), e, []string{"dns-suffix"}); code != 2 || !strings.Contains(h.stderr.String(), "Could not find DNS search list!") {
		t.Errorf("dns-suffix without search: %d %q", code, h.stderr.String())
	}
}
