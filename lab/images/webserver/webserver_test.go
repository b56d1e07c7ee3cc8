package webserver

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestDefaultPages(t *testing.T) {
	if len(NginxIndex) != 615 {
		t.Errorf("nginx's welcome page is %d bytes, upstream's is 615", len(NginxIndex))
	}
	if len(HTTPDIndex) != 45 {
		t.Errorf("httpd's page is %d bytes, upstream's is 45", len(HTTPDIndex))
	}
}

func TestParseNginx(t *testing.T) {
	tests := []struct {
		name   string
		conf   string
		listen []string
		root   string
		index  []string
		err    string
	}{
		{name: "the image's default", conf: NginxDefaultConf, listen: []string{":80"}, root: "/usr/share/nginx/html", index: []string{"index.html", "index.htm"}},
		{name: "moved port", conf: "server {\n  listen 8080 default_server; # moved\n  root /data;\n}\n", listen: []string{":8080"}, root: "/data"},
		{name: "address", conf: "server { listen 127.0.0.1:9000; listen [::]:9000; location / { root '/srv/www'; index home.html; } }", listen: []string{"127.0.0.1:9000", ":9000"}, root: "/srv/www", index: []string{"home.html"}},
		{name: "second server ignored", conf: "server { listen 81; } server { listen 82; root /other; }", listen: []string{":81"}},
		{name: "no server", conf: "events {}\n", listen: nil},
		{name: "unbalanced", conf: "server { listen 80;", err: "unexpected end of file"},
		{name: "extra brace", conf: "server { listen 80; } }", err: `unexpected "}"`},
		{name: "bad port", conf: "server { listen eighty; }", err: `invalid port in "eighty"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755)
			os.WriteFile(filepath.Join(dir, "conf.d", "default.conf"), []byte(tt.conf), 0o644)
			main := filepath.Join(dir, "nginx.conf")
			os.WriteFile(main, []byte(strings.ReplaceAll(NginxConf, "/etc/nginx/", dir+"/")), 0o644)
			cfg, err := parseNginx(main)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.listen, tt.listen) || cfg.root != tt.root || !slices.Equal(cfg.index, tt.index) {
				t.Errorf("got listen %q root %q index %q; want %q %q %q", cfg.listen, cfg.root, cfg.index, tt.listen, tt.root, tt.index)
			}
		})
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type harness struct {
	t              *testing.T
	sig            chan os.Signal
	stdout, stderr *syncBuffer
	addrs          chan []net.Addr
	done           chan int
	killed         []string
	code           *int
}

func startServer(t *testing.T, flavor string, mod func(*env), args ...string) *harness {
	t.Helper()
	h := &harness{t: t, sig: make(chan os.Signal, 1), stdout: &syncBuffer{}, stderr: &syncBuffer{}, addrs: make(chan []net.Addr, 4), done: make(chan int, 1)}
	e := env{stdout: h.stdout, stderr: h.stderr, signals: h.sig, now: time.Now, pid: 1,
		ready: func(a []net.Addr) { h.addrs <- a }}
	if mod != nil {
		mod(&e)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { h.done <- run(ctx, e, flavor, args) }()
	t.Cleanup(func() {
		cancel()
		if h.code == nil {
			select {
			case <-h.done:
			case <-time.After(5 * time.Second):
				t.Error("server did not stop")
			}
		}
	})
	return h
}

func (h *harness) addr() string {
	h.t.Helper()
	select {
	case a := <-h.addrs:
		return a[0].String()
	case code := <-h.done:
		h.code = &code
		h.t.Fatalf("server exited with %d: %s", code, h.stderr.String())
	case <-time.After(5 * time.Second):
		h.t.Fatal("server did not listen")
	}
	return ""
}

func (h *harness) wait(within time.Duration) int {
	h.t.Helper()
	select {
	case code := <-h.done:
		h.code = &code
		return code
	case <-time.After(within):
		h.t.Fatalf("server did not exit within %s", within)
	}
	return -1
}

func request(t *testing.T, method, url string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	c := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// docroot makes a document root like a configMap mount: files are links
// into a ..data directory.
func docroot(t *testing.T, files map[string]string) string {
	dir := t.TempDir()
	data := filepath.Join(dir, "..2025_01_01")
	os.Mkdir(data, 0o755)
	os.Symlink("..2025_01_01", filepath.Join(dir, "..data"))
	for name, content := range files {
		p := filepath.Join(data, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(content), 0o644)
		if !strings.Contains(name, "/") {
			os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name))
		}
	}
	return dir
}

func TestServeNginx(t *testing.T) {
	root := docroot(t, map[string]string{"index.html": NginxIndex, "style.css": "body{}", "sub/page.html": "<p>sub</p>"})
	os.Symlink(filepath.Join("..data", "sub"), filepath.Join(root, "sub"))
	os.Mkdir(filepath.Join(root, "empty"), 0o755)
	h := startServer(t, FlavorNginx, nil, "-g", "daemon off;", "-c", filepath.Join(t.TempDir(), "missing.conf"), "-listen", "127.0.0.1:0", "-root", root)
	// A -c that does not exist is an error, as in nginx.
	if code := h.wait(5 * time.Second); code != 1 || !strings.Contains(h.stderr.String(), "[emerg]") {
		t.Fatalf("missing -c file: exit %d, stderr %q", code, h.stderr.String())
	}

	h = startServer(t, FlavorNginx, nil, "-g", "daemon off;", "-listen", "127.0.0.1:0", "-root", root)
	base := "http://" + h.addr()
	tests := []struct {
		method, path string
		status       int
		body         string
		header       [2]string
	}{
		{"GET", "/", 200, NginxIndex, [2]string{"Server", "nginx/" + NginxVersion}},
		{"GET", "/index.html", 200, NginxIndex, [2]string{"Content-Type", "text/html; charset=utf-8"}},
		{"GET", "/style.css", 200, "body{}", [2]string{"Content-Type", "text/css; charset=utf-8"}},
		{"GET", "/sub/page.html", 200, "<p>sub</p>", [2]string{}},
		{"GET", "/sub", 301, "<html>\r\n<head><title>301 Moved Permanently</title></head>", [2]string{"Location", "/sub/"}},
		{"GET", "/empty/", 403, "<html>\r\n<head><title>403 Forbidden</title></head>", [2]string{}},
		{"GET", "/missing", 404, "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx/" + NginxVersion + "</center>", [2]string{}},
		{"GET", "/../../etc/passwd", 404, "", [2]string{}},
		{"POST", "/", 405, "<html>\r\n<head><title>405 Method Not Allowed</title></head>", [2]string{}},
		{"HEAD", "/", 200, "", [2]string{"Content-Length", "615"}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			status, body, hdr := request(t, tt.method, base+tt.path)
			if status != tt.status || !strings.HasPrefix(body, tt.body) {
				t.Errorf("%d %q, want %d %q", status, body, tt.status, tt.body)
			}
			if tt.header[0] != "" && hdr.Get(tt.header[0]) != tt.header[1] {
				t.Errorf("%s: %q, want %q", tt.header[0], hdr.Get(tt.header[0]), tt.header[1])
			}
		})
	}
	line := regexp.MustCompile(`(?m)^127\.0\.0\.1 - - \[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\] "GET / HTTP/1\.1" 200 615 "-" "Go-http-client/1\.1" "-"$`)
	if !line.MatchString(h.stdout.String()) {
		t.Errorf("no nginx access-log line for GET /:\n%s", h.stdout.String())
	}
	if !strings.Contains(h.stdout.String(), `"GET /missing HTTP/1.1" 404 `) {
		t.Errorf("404 not logged:\n%s", h.stdout.String())
	}
	if !strings.Contains(h.stderr.String(), "[notice] 1#1: start worker processes") {
		t.Errorf("error log: %q", h.stderr.String())
	}
}

func TestServeHTTPD(t *testing.T) {
	root := docroot(t, map[string]string{"index.html": HTTPDIndex})
	h := startServer(t, FlavorHTTPD, nil, "-DFOREGROUND", "-listen", "127.0.0.1:0", "-root", root)
	base := "http://" + h.addr()
	status, body, hdr := request(t, "GET", base+"/")
	if status != 200 || body != "<html><body><h1>It works!</h1></body></html>\n" || hdr.Get("Server") != "Apache/"+HTTPDVersion+" (Unix)" {
		t.Errorf("GET /: %d %q %v", status, body, hdr)
	}
	status, body, _ = request(t, "GET", base+"/nope")
	if status != 404 || !strings.Contains(body, "<p>The requested URL was not found on this server.</p>") {
		t.Errorf("GET /nope: %d %q", status, body)
	}
	line := regexp.MustCompile(`(?m)^127\.0\.0\.1 - - \[[^]]+\] "GET / HTTP/1\.1" 200 45$`)
	if !line.MatchString(h.stdout.String()) {
		t.Errorf("no common-log line:\n%s", h.stdout.String())
	}
}

func TestConfigMapMovesThePort(t *testing.T) {
	dir := t.TempDir()
	root := docroot(t, map[string]string{"index.html": "from a configMap"})
	os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755)
	conf := filepath.Join(dir, "conf.d", "default.conf")
	os.WriteFile(conf, []byte("server {\n listen 127.0.0.1:0;\n location / { root "+root+"; }\n}\n"), 0o644)
	main := filepath.Join(dir, "nginx.conf")
	os.WriteFile(main, []byte(strings.ReplaceAll(NginxConf, "/etc/nginx/", dir+"/")), 0o644)

	h := startServer(t, FlavorNginx, nil, "-c", main)
	first := h.addr()
	if _, body, _ := request(t, "GET", "http://"+first+"/"); body != "from a configMap" {
		t.Errorf("body %q", body)
	}

	// nginx -s reload (SIGHUP) with a new root and address.
	root2 := docroot(t, map[string]string{"index.html": "reloaded"})
	os.WriteFile(conf, []byte("server {\n listen 127.0.0.2:0;\n root "+root2+";\n}\n"), 0o644)
	h.sig <- syscall.SIGHUP
	second := h.addr()
	if second == first {
		t.Fatalf("the address did not change on reload: %s", second)
	}
	if _, body, _ := request(t, "GET", "http://"+second+"/"); body != "reloaded" {
		t.Errorf("after reload: %q", body)
	}
	if c, err := net.DialTimeout("tcp", first, time.Second); err == nil {
		c.Close()
		t.Errorf("the old address %s still accepts connections", first)
	}

	// A broken configuration keeps the server as it was.
	os.WriteFile(conf, []byte("server { listen 80;"), 0o644)
	h.sig <- syscall.SIGHUP
	deadline := time.Now().Add(2 * time.Second)
	for !strings.Contains(h.stderr.String(), "unexpected end of file") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if _, body, _ := request(t, "GET", "http://"+second+"/"); body != "reloaded" {
		t.Errorf("after a bad reload: %q (stderr %s)", body, h.stderr.String())
	}
}

// blockedDownload starts a download of big that the client does not read:
// the server's handler is busy writing it.
func blockedDownload(t *testing.T, addr string) net.Conn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: web\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	return c
}

// readBody reads the response on c and returns the body's length.
func readBody(t *testing.T, c net.Conn) (int, error) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	return int(n), err
}

const bigSize = 48 << 20 // more than loopback's socket buffers hold

func TestSignals(t *testing.T) {
	root := docroot(t, map[string]string{"index.html": "hi"})
	if err := os.WriteFile(filepath.Join(root, "big"), bytes.Repeat([]byte("x"), bigSize), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("SIGTERM stops at once", func(t *testing.T) {
		h := startServer(t, FlavorNginx, nil, "-listen", "127.0.0.1:0", "-root", root)
		c := blockedDownload(t, h.addr())
		defer c.Close()
		h.sig <- syscall.SIGTERM
		if code := h.wait(2 * time.Second); code != 0 {
			t.Errorf("exit %d", code)
		}
		if n, _ := readBody(t, c); n == bigSize {
			t.Errorf("the download completed although SIGTERM stops at once")
		}
		if !strings.Contains(h.stderr.String(), "signal 15 (SIGTERM) received, exiting") {
			t.Errorf("stderr %q", h.stderr.String())
		}
	})
	for _, tt := range []struct {
		flavor string
		sig    syscall.Signal
	}{{FlavorNginx, syscall.SIGQUIT}, {FlavorHTTPD, syscall.SIGWINCH}} {
		t.Run(tt.flavor+" "+tt.sig.String()+" drains", func(t *testing.T) {
			h := startServer(t, tt.flavor, nil, "-listen", "127.0.0.1:0", "-root", root)
			addr := h.addr()
			c := blockedDownload(t, addr)
			defer c.Close()
			h.sig <- tt.sig
			select {
			case code := <-h.done:
				h.code = &code
				t.Fatalf("exited (%d) with a download in flight", code)
			case <-time.After(200 * time.Millisecond):
			}
			// New connections are refused while draining.
			if nc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				nc.Close()
				t.Errorf("a new connection was accepted while draining")
			}
			if n, err := readBody(t, c); n != bigSize {
				t.Errorf("the in-flight download got %d of %d bytes (%v)", n, bigSize, err)
			}
			c.Close()
			if code := h.wait(5 * time.Second); code != 0 {
				t.Errorf("exit %d", code)
			}
		})
	}
}

func TestCommandLine(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "nginx.pid")
	os.WriteFile(pidFile, []byte("4242\n"), 0o644)
	var killed []string
	tests := []struct {
		flavor string
		args   []string
		code   int
		out    string // in stdout or stderr
	}{
		{FlavorNginx, []string{"-v"}, 0, "nginx version: nginx/" + NginxVersion},
		{FlavorHTTPD, []string{"-v"}, 0, "Server version: Apache/" + HTTPDVersion},
		{FlavorNginx, []string{"-t", "-c", filepath.Join(dir, "none.conf")}, 1, "test failed"},
		{FlavorNginx, []string{"-s", "reload"}, 0, ""},
		{FlavorNginx, []string{"-s", "bounce"}, 1, `invalid option: "-s bounce"`},
		{FlavorNginx, []string{"-x"}, 2, "flag provided but not defined: -x"},
		{FlavorNginx, []string{"stray"}, 2, `invalid option: "stray"`},
		{"caddy", nil, 2, "unknown flavour"},
	}
	for _, tt := range tests {
		t.Run(tt.flavor+" "+strings.Join(tt.args, " "), func(t *testing.T) {
			var out syncBuffer
			e := env{stdout: &out, stderr: &out, now: time.Now, pid: 1, pidFile: pidFile,
				kill: func(pid int, sig syscall.Signal) error {
					killed = append(killed, strconv.Itoa(pid)+" "+sig.String())
					return nil
				}}
			if code := run(context.Background(), e, tt.flavor, tt.args); code != tt.code {
				t.Errorf("exit %d, want %d: %s", code, tt.code, out.String())
			}
			if !strings.Contains(out.String(), tt.out) {
				t.Errorf("output %q lacks %q", out.String(), tt.out)
			}
		})
	}
	if !slices.Equal(killed, []string{"4242 hangup"}) {
		t.Errorf("nginx -s reload sent %q, want SIGHUP to 4242", killed)
	}

	// A port in use.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var out syncBuffer
	code := run(context.Background(), env{stdout: &out, stderr: &out, now: time.Now, pid: 7}, FlavorNginx, []string{"-listen", ln.Addr().String()})
	if code != 1 || !strings.Contains(out.String(), "[emerg] 7#7: bind() to "+ln.Addr().String()+" failed") {
		t.Errorf("port in use: %d %q", code, out.String())
	}
}
