package webserver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Flavours of the server.
const (
	FlavorNginx = "nginx"
	FlavorHTTPD = "httpd"
)

// Defaults of the upstream images.
const (
	nginxConf    = "/etc/nginx/nginx.conf"
	nginxRoot    = "/usr/share/nginx/html"
	nginxPidFile = "/var/run/nginx.pid"
	httpdRoot    = "/usr/local/apache2/htdocs"
)

// env is what a run needs from its process, so tests can run servers in
// goroutines.
type env struct {
	stdout, stderr io.Writer
	signals        <-chan os.Signal
	now            func() time.Time
	pid            int
	// pidFile is where nginx writes its pid ("" to skip).
	pidFile string
	// ready is called with the bound addresses once the server listens.
	ready func([]net.Addr)
	// kill sends a signal to a pid (nginx -s).
	kill func(pid int, sig syscall.Signal) error
}

// Main runs the server as the nginx or httpd image's main process would:
// it serves the document root on port 80 (or what /etc/nginx's listen
// directives say), logs each request to stdout in the flavour's access-log
// format, stops at once on SIGTERM or SIGINT, finishes open requests first
// on SIGQUIT (nginx) or SIGWINCH (httpd), and reloads its configuration on
// SIGHUP. It returns the exit code.
//
// nginx accepts -g, -c, -p, -e, -q, -t, -T, -v, -V and -s reload|quit|stop|reopen;
// httpd accepts -D, -k, -f, -d, -t, -v and -V. Both also accept
// -listen ADDR and -root DIR, which replace the configured address and
// document root (for tests).
func Main(flavor string, args []string) int {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGWINCH, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	return run(context.Background(), env{
		stdout: os.Stdout, stderr: os.Stderr, signals: sigs, now: time.Now, pid: os.Getpid(),
		pidFile: nginxPidFile, kill: syscall.Kill,
	}, flavor, args)
}

type options struct {
	flavor  string
	conf    string
	listen  string
	root    string
	test    bool
	dump    bool
	version bool
	signal  string
}

func parseFlags(e env, flavor string, args []string) (options, int, bool) {
	o := options{flavor: flavor}
	fs := flag.NewFlagSet(flavor, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.StringVar(&o.listen, "listen", "", "listen on this address instead of the configured one (svclab)")
	fs.StringVar(&o.root, "root", "", "serve this directory instead of the configured document root (svclab)")
	switch flavor {
	case FlavorNginx:
		fs.StringVar(&o.conf, "c", nginxConf, "configuration file")
		fs.String("g", "", "global directives (accepted and ignored: the server always runs in the foreground)")
		fs.String("p", "", "prefix path (ignored)")
		fs.String("e", "", "error log file (ignored: errors go to stderr)")
		fs.Bool("q", false, "suppress non-error messages during configuration testing")
		fs.BoolVar(&o.test, "t", false, "test the configuration and exit")
		fs.BoolVar(&o.dump, "T", false, "test the configuration, dump it and exit")
		fs.BoolVar(&o.version, "v", false, "show the version and exit")
		fs.BoolVar(&o.version, "V", false, "show the version and exit")
		fs.StringVar(&o.signal, "s", "", "send a signal to the master process: stop, quit, reopen, reload")
	case FlavorHTTPD:
		fs.Func("D", "define a parameter (accepted and ignored)", func(string) error { return nil })
		fs.String("k", "", "start|restart|graceful|stop (accepted; the server runs in the foreground)")
		fs.String("f", "", "configuration file (ignored)")
		fs.String("d", "", "server root (ignored)")
		fs.BoolVar(&o.test, "t", false, "test the configuration and exit")
		fs.BoolVar(&o.version, "v", false, "show the version and exit")
		fs.BoolVar(&o.version, "V", false, "show the version and exit")
	default:
		fmt.Fprintf(e.stderr, "webserver: unknown flavour %q (want nginx or httpd)\n", flavor)
		return o, 2, true
	}
	if flavor == FlavorHTTPD {
		args = splitAttached(args)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, 0, true
		}
		return o, 2, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "%s: invalid option: %q\n", flavor, fs.Arg(0))
		return o, 2, true
	}
	return o, 0, false
}

// splitAttached turns httpd's getopt-style "-DFOREGROUND" into "-D",
// "FOREGROUND".
func splitAttached(args []string) []string {
	var out []string
	for _, a := range args {
		if len(a) > 2 && a[0] == '-' && strings.ContainsRune("Dkfd", rune(a[1])) && a[2] != '=' {
			out = append(out, a[:2], a[2:])
			continue
		}
		out = append(out, a)
	}
	return out
}

func run(ctx context.Context, e env, flavor string, args []string) int {
	o, code, exit := parseFlags(e, flavor, args)
	if exit {
		return code
	}
	if o.version {
		if flavor == FlavorNginx {
			fmt.Fprintf(e.stderr, "nginx version: nginx/%s\n", NginxVersion)
		} else {
			fmt.Fprintf(e.stdout, "Server version: Apache/%s (Unix)\n", HTTPDVersion)
		}
		return 0
	}
	if o.signal != "" {
		return sendSignal(e, o.signal)
	}
	cfg, err := o.load()
	if err != nil {
		logError(e, flavor, "emerg", err.Error())
		if o.test {
			fmt.Fprintf(e.stderr, "nginx: configuration file %s test failed\n", o.conf)
		}
		return 1
	}
	if o.test || o.dump {
		if flavor == FlavorNginx {
			fmt.Fprintf(e.stderr, "nginx: the configuration file %s syntax is ok\nnginx: configuration file %s test is successful\n", o.conf, o.conf)
		} else {
			fmt.Fprintln(e.stderr, "Syntax OK")
		}
		return 0
	}
	s := &server{flavor: flavor, env: e}
	s.cfg.Store(&cfg)
	if err := s.start(cfg); err != nil {
		logError(e, flavor, "emerg", err.Error())
		return 1
	}
	if e.pidFile != "" && flavor == FlavorNginx {
		os.WriteFile(e.pidFile, []byte(strconv.Itoa(e.pid)+"\n"), 0o644)
		defer os.Remove(e.pidFile)
	}
	if flavor == FlavorNginx {
		logError(e, flavor, "notice", fmt.Sprintf("nginx/%s (svclab)", NginxVersion))
		logError(e, flavor, "notice", "start worker processes")
	} else {
		logError(e, flavor, "notice", fmt.Sprintf("Apache/%s (Unix) (svclab) configured -- resuming normal operations", HTTPDVersion))
	}
	for {
		select {
		case <-ctx.Done():
			s.stop(false)
			return 0
		case sig := <-e.signals:
			switch sig {
			case syscall.SIGTERM, syscall.SIGINT:
				if flavor == FlavorNginx {
					logError(e, flavor, "notice", fmt.Sprintf("signal %d (%s) received, exiting", sig.(syscall.Signal), signalName(sig)))
				} else {
					logError(e, flavor, "notice", "caught SIGTERM, shutting down")
				}
				s.stop(false)
				return 0
			case syscall.SIGQUIT, syscall.SIGWINCH:
				if flavor == FlavorNginx {
					logError(e, flavor, "notice", fmt.Sprintf("signal %d (%s) received, shutting down", sig.(syscall.Signal), signalName(sig)))
					logError(e, flavor, "notice", "gracefully shutting down")
				} else {
					logError(e, flavor, "notice", "caught SIGWINCH, shutting down gracefully")
				}
				s.stop(true)
				if flavor == FlavorNginx {
					logError(e, flavor, "notice", "exit")
				}
				return 0
			case syscall.SIGHUP, syscall.SIGUSR1:
				logError(e, flavor, "notice", fmt.Sprintf("signal %d (%s) received, reconfiguring", sig.(syscall.Signal), signalName(sig)))
				if err := s.reload(o); err != nil {
					logError(e, flavor, "emerg", err.Error())
				}
			}
		}
	}
}

func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGWINCH:
		return "SIGWINCH"
	case syscall.SIGUSR1:
		return "SIGUSR1"
	}
	return sig.String()
}

// load reads the configuration and applies the overrides.
func (o options) load() (config, error) {
	var cfg config
	switch o.flavor {
	case FlavorNginx:
		if _, err := os.Stat(o.conf); err == nil || o.conf != nginxConf {
			c, err := parseNginx(o.conf)
			if err != nil {
				return config{}, err
			}
			cfg = c
		}
		if len(cfg.listen) == 0 {
			cfg.listen = []string{":80"}
		}
		if cfg.root == "" {
			cfg.root = nginxRoot
		}
	case FlavorHTTPD:
		cfg = config{listen: []string{":80"}, root: httpdRoot}
	}
	if len(cfg.index) == 0 {
		cfg.index = []string{"index.html"}
	}
	if o.listen != "" {
		cfg.listen = []string{o.listen}
	}
	if o.root != "" {
		cfg.root = o.root
	}
	return cfg, nil
}

// sendSignal implements nginx -s: it signals the process in the pid file.
func sendSignal(e env, name string) int {
	sigs := map[string]syscall.Signal{"stop": syscall.SIGTERM, "quit": syscall.SIGQUIT, "reload": syscall.SIGHUP, "reopen": syscall.SIGUSR1}
	sig, ok := sigs[name]
	if !ok {
		fmt.Fprintf(e.stderr, "nginx: invalid option: \"-s %s\"\n", name)
		return 1
	}
	data, err := os.ReadFile(e.pidFile)
	if err != nil {
		logError(e, FlavorNginx, "error", fmt.Sprintf("open() \"%s\" failed (%v)", e.pidFile, err))
		return 1
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		logError(e, FlavorNginx, "error", fmt.Sprintf("invalid PID number \"%s\" in \"%s\"", strings.TrimSpace(string(data)), e.pidFile))
		return 1
	}
	if err := e.kill(pid, sig); err != nil {
		logError(e, FlavorNginx, "error", fmt.Sprintf("kill(%d, %d) failed (%v)", pid, sig, err))
		return 1
	}
	return 0
}

// logError writes a line to the error log (stderr) in the flavour's format.
func logError(e env, flavor, level, msg string) {
	now := e.now()
	if flavor == FlavorNginx {
		fmt.Fprintf(e.stderr, "%s [%s] %d#%d: %s\n", now.Format("2006/01/02 15:04:05"), level, e.pid, e.pid, msg)
		return
	}
	fmt.Fprintf(e.stderr, "[%s] [core:%s] [pid %d] %s\n", now.Format("Mon Jan 02 15:04:05.000000 2006"), level, e.pid, msg)
}

// server runs one http.Server per listen address.
type server struct {
	flavor  string
	env     env
	cfg     atomic.Pointer[config]
	mu      sync.Mutex
	servers []*http.Server
	wg      sync.WaitGroup
}

func (s *server) start(cfg config) error {
	var lns []net.Listener
	for _, addr := range cfg.listen {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return fmt.Errorf("bind() to %s failed (%v)", addr, err)
		}
		lns = append(lns, ln)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var addrs []net.Addr
	for _, ln := range lns {
		srv := &http.Server{Handler: s, ReadHeaderTimeout: 60 * time.Second, IdleTimeout: 65 * time.Second, ErrorLog: nil}
		s.servers = append(s.servers, srv)
		addrs = append(addrs, ln.Addr())
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			srv.Serve(ln)
		}()
	}
	if s.env.ready != nil {
		s.env.ready(addrs)
	}
	return nil
}

// stop closes the servers: at once, or after open requests finish
// (waiting at most 30 seconds, like a pod's default grace period).
func (s *server) stop(graceful bool) {
	s.mu.Lock()
	servers := s.servers
	s.servers = nil
	s.mu.Unlock()
	for _, srv := range servers {
		if graceful {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			srv.Shutdown(ctx)
			cancel()
		} else {
			srv.Close()
		}
	}
	s.wg.Wait()
}

// reload rereads the configuration; the listeners are replaced when the
// addresses changed, the document root takes effect at once.
func (s *server) reload(o options) error {
	cfg, err := o.load()
	if err != nil {
		return err
	}
	old := s.cfg.Load()
	s.cfg.Store(&cfg)
	if strings.Join(old.listen, ",") == strings.Join(cfg.listen, ",") {
		return nil
	}
	s.stop(true)
	if err := s.start(cfg); err != nil {
		// Keep serving on the old addresses.
		s.cfg.Store(old)
		if err2 := s.start(*old); err2 != nil {
			return fmt.Errorf("%v; and the old addresses failed too: %v", err, err2)
		}
		return err
	}
	return nil
}

// ServeHTTP serves static files from the document root, as nginx's and
// httpd's default configurations do.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &recorder{ResponseWriter: w}
	start := s.env.now()
	defer func() { s.accessLog(r, rec, start) }()
	if s.flavor == FlavorNginx {
		rec.Header().Set("Server", "nginx/"+NginxVersion)
	} else {
		rec.Header().Set("Server", "Apache/"+HTTPDVersion+" (Unix)")
	}
	cfg := s.cfg.Load()
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.errorPage(rec, r, http.StatusMethodNotAllowed)
		return
	}
	upath := path.Clean("/" + r.URL.Path)
	full := filepath.Join(cfg.root, filepath.FromSlash(upath))
	fi, err := os.Stat(full)
	if err != nil {
		s.errorPage(rec, r, statusFor(err))
		return
	}
	if fi.IsDir() {
		if !strings.HasSuffix(r.URL.Path, "/") {
			loc := r.URL.Path + "/"
			if r.URL.RawQuery != "" {
				loc += "?" + r.URL.RawQuery
			}
			rec.Header().Set("Location", loc)
			s.errorPage(rec, r, http.StatusMovedPermanently)
			return
		}
		found := false
		for _, idx := range cfg.index {
			p := filepath.Join(full, idx)
			if ifi, err := os.Stat(p); err == nil && !ifi.IsDir() {
				full, fi, found = p, ifi, true
				break
			}
		}
		if !found {
			// Neither server lists directories by default.
			s.errorPage(rec, r, http.StatusForbidden)
			return
		}
	}
	f, err := os.Open(full)
	if err != nil {
		s.errorPage(rec, r, statusFor(err))
		return
	}
	defer f.Close()
	http.ServeContent(rec, r, fi.Name(), fi.ModTime(), f)
}

func statusFor(err error) int {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound
	case errors.Is(err, fs.ErrPermission):
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}

// errorPage writes the flavour's built-in error page.
func (s *server) errorPage(w http.ResponseWriter, r *http.Request, code int) {
	text := http.StatusText(code)
	var body string
	if s.flavor == FlavorNginx {
		body = fmt.Sprintf("<html>\r\n<head><title>%d %s</title></head>\r\n<body>\r\n<center><h1>%d %s</h1></center>\r\n<hr><center>nginx/%s</center>\r\n</body>\r\n</html>\r\n",
			code, text, code, text, NginxVersion)
	} else {
		detail := map[int]string{
			http.StatusNotFound:            "The requested URL was not found on this server.",
			http.StatusForbidden:           "You don't have permission to access this resource.",
			http.StatusMethodNotAllowed:    "The requested method " + r.Method + " is not allowed for this URL.",
			http.StatusMovedPermanently:    "The document has moved <a href=\"" + w.Header().Get("Location") + "\">here</a>.",
			http.StatusInternalServerError: "The server encountered an internal error or misconfiguration and was unable to complete your request.",
		}[code]
		body = fmt.Sprintf("<!DOCTYPE HTML PUBLIC \"-//IETF//DTD HTML 2.0//EN\">\n<html><head>\n<title>%d %s</title>\n</head><body>\n<h1>%s</h1>\n<p>%s</p>\n</body></html>\n",
			code, text, text, detail)
	}
	w.Header().Set("Content-Type", "text/html")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		io.WriteString(w, body)
	}
}

// accessLog writes one line per request to stdout: nginx's "main" format
// (the nginx image's default) or httpd's common log format.
func (s *server) accessLog(r *http.Request, rec *recorder, start time.Time) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	request := fmt.Sprintf("%s %s %s", r.Method, r.RequestURI, r.Proto)
	when := start.Format("02/Jan/2006:15:04:05 -0700")
	if s.flavor == FlavorNginx {
		fmt.Fprintf(s.env.stdout, "%s - - [%s] %q %d %d %q %q %q\n", host, when, request, status, rec.bytes,
			orDash(r.Referer()), orDash(r.UserAgent()), orDash(r.Header.Get("X-Forwarded-For")))
		return
	}
	size := "-"
	if rec.bytes > 0 {
		size = strconv.FormatInt(rec.bytes, 10)
	}
	fmt.Fprintf(s.env.stdout, "%s - - [%s] %q %d %s\n", host, when, request, status, size)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// recorder notes the status and the body bytes written.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}
