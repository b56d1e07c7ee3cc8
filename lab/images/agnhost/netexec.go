package agnhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

type netexecOptions struct {
	httpPort, udpPort, sctpPort int
	certFile, keyFile           string
	httpOverride                string
	udpListenAddresses          string
	delayShutdown               int
}

func netexecCommand(ctx context.Context, e env, l *log.Logger) *cobra.Command {
	var o netexecOptions
	cmd := &cobra.Command{
		Use:   "netexec",
		Short: "Creates HTTP(S) and UDP servers with various endpoints",
		Long: `Starts an HTTP(S) server on --http-port (8080) with the endpoints /, /clientip,
/serverport, /header, /dial, /echo, /exit, /healthz, /readyz, /hostname, /hostName,
/redirect, /shell, /shutdown and /upload, and a UDP server on --udp-port (8081, -1
to disable) that answers "hostname", "echo <msg>", "envvar <NAME>", "clientip" and
"serverport".
On SIGTERM /readyz starts failing and the process exits after --delay-shutdown
seconds.`,
		Args: cobra.MaximumNArgs(0),
		RunE: func(*cobra.Command, []string) error {
			return (&netexec{env: e, log: l, o: o}).run(ctx)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.httpPort, "http-port", 8080, "HTTP Listen Port")
	f.StringVar(&o.certFile, "tls-cert-file", "", "File containing an x509 certificate for HTTPS. (CA cert, if any, concatenated after server cert)")
	f.StringVar(&o.keyFile, "tls-private-key-file", "", "File containing an x509 private key matching --tls-cert-file")
	f.IntVar(&o.udpPort, "udp-port", 8081, "UDP Listen Port")
	f.IntVar(&o.sctpPort, "sctp-port", -1, "SCTP Listen Port (not supported by svclab's agnhost)")
	f.StringVar(&o.httpOverride, "http-override", "", "Override the HTTP handler to always respond as if it were a GET with this path & params")
	f.StringVar(&o.udpListenAddresses, "udp-listen-addresses", "", "A comma separated list of ip addresses the udp servers listen from")
	f.IntVar(&o.delayShutdown, "delay-shutdown", 0, "Number of seconds to delay shutdown when receiving SIGTERM.")
	return cmd
}

type shutdownRequest struct {
	code    int
	timeout time.Duration
}

type netexec struct {
	env env
	log *log.Logger
	o   netexecOptions

	serverReady atomic.Bool   // a UDP server runs
	sigterm     chan struct{} // closed on SIGTERM
	exitCh      chan shutdownRequest
	exitOnce    sync.Once
	done        chan int // the exit code
}

func (n *netexec) run(ctx context.Context) error {
	n.sigterm = make(chan struct{})
	n.exitCh = make(chan shutdownRequest)
	n.done = make(chan int, 1)
	if n.o.sctpPort != -1 {
		return fatal(n.log, "--sctp-port: SCTP is not supported by svclab's agnhost")
	}
	terms := n.env.notify(syscall.SIGTERM)
	go func() {
		select {
		case <-terms:
		case <-ctx.Done():
			return
		}
		close(n.sigterm)
		if n.o.delayShutdown > 0 {
			n.log.Printf("Sleeping %d seconds before terminating...", n.o.delayShutdown)
			select {
			case <-time.After(time.Duration(n.o.delayShutdown) * time.Second):
			case <-ctx.Done():
			}
		}
		n.exit(0)
	}()

	mux := http.NewServeMux()
	n.addRoutes(mux)
	var handler http.Handler = mux
	if n.o.httpOverride != "" {
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req, err := http.NewRequestWithContext(r.Context(), "GET", n.o.httpOverride, nil)
			if err != nil {
				http.Error(w, fmt.Sprintf("override request failed: %v", err), http.StatusInternalServerError)
				return
			}
			req.RemoteAddr = r.RemoteAddr
			mux.ServeHTTP(w, req)
		})
	}

	if n.o.udpPort != -1 {
		addrs, err := parseAddresses(n.o.udpListenAddresses)
		if err != nil {
			return fatal(n.log, "%v", err)
		}
		for _, a := range addrs {
			conn, err := n.env.listenUDP(a, n.o.udpPort)
			if err != nil {
				return fatal(n.log, "Error occurred: failed to create listener for UDP address %s:%v", net.JoinHostPort(a, strconv.Itoa(n.o.udpPort)), err)
			}
			defer conn.Close()
			// Ready as soon as the socket is open (upstream sets this in
			// the serving goroutine, a moment later).
			n.serverReady.Store(true)
			go n.serveUDP(conn, a)
		}
	}

	ln, err := n.env.listen("http", n.o.httpPort)
	if err != nil {
		return fatal(n.log, "%v", err)
	}
	server := &http.Server{Handler: handler, ErrorLog: log.New(io.Discard, "", 0)}
	n.log.Printf("Started HTTP server on port %d", n.o.httpPort)
	go func() {
		var err error
		if n.o.certFile != "" {
			err = server.ServeTLS(ln, n.o.certFile, n.o.keyFile)
		} else {
			err = server.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Printf("%v", err)
			n.exit(1)
		}
	}()

	for {
		select {
		case <-ctx.Done():
			server.Close()
			return nil
		case req := <-n.exitCh:
			sctx, cancel := context.WithTimeout(context.Background(), req.timeout)
			err := server.Shutdown(sctx)
			cancel()
			n.log.Printf("Graceful shutdown completed with: %v", err)
			return codeOf(req.code)
		case code := <-n.done:
			server.Close()
			return codeOf(code)
		}
	}
}

func codeOf(code int) error {
	if code == 0 {
		return nil
	}
	return exitError{code}
}

// exit ends the process with code at once (upstream calls os.Exit).
func (n *netexec) exit(code int) {
	n.exitOnce.Do(func() { n.done <- code })
}

func (n *netexec) addRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/", n.root)
	mux.HandleFunc("/clientip", n.clientIP)
	mux.HandleFunc("/serverport", n.serverPort)
	mux.HandleFunc("/header", n.header)
	mux.HandleFunc("/dial", n.dial)
	mux.HandleFunc("/echo", n.echo)
	mux.HandleFunc("/exit", n.exitHandler)
	mux.HandleFunc("/healthz", n.healthz)
	mux.HandleFunc("/readyz", n.readyz)
	mux.HandleFunc("/hostname", n.hostnameHandler("/hostname"))
	mux.HandleFunc("/redirect", n.redirect)
	mux.HandleFunc("/shell", n.shellHandler)
	mux.HandleFunc("/upload", n.upload)
	mux.HandleFunc("/hostName", n.hostnameHandler("/hostName"))
	mux.HandleFunc("/shutdown", n.shutdown)
}

func (n *netexec) hostName() string {
	h, err := n.env.hostname()
	if err != nil {
		n.log.Printf("Error occurred: failed to get hostname:%v", err)
	}
	return h
}

func (n *netexec) root(w http.ResponseWriter, r *http.Request) {
	n.log.Printf("GET /")
	fmt.Fprintf(w, "NOW: %v", n.env.now())
}

func (n *netexec) echo(w http.ResponseWriter, r *http.Request) {
	msg := r.FormValue("msg")
	codeString := r.FormValue("code")
	n.log.Printf("GET /echo?msg=%s&code=%s", msg, codeString)
	if codeString != "" {
		code, err := strconv.Atoi(codeString)
		if err != nil {
			fmt.Fprintf(w, "argument 'code' must be an integer or empty, got %q\n", codeString)
			return
		}
		w.WriteHeader(code)
	}
	fmt.Fprintf(w, "%s", msg)
}

func (n *netexec) clientIP(w http.ResponseWriter, r *http.Request) {
	n.log.Printf("GET /clientip")
	fmt.Fprint(w, r.RemoteAddr)
}

// serverPort answers the --http-port given, as upstream.
func (n *netexec) serverPort(w http.ResponseWriter, r *http.Request) {
	n.log.Printf("GET /serverport")
	fmt.Fprint(w, n.o.httpPort)
}

// getenv is the value of the variable name in environ ("" when unset).
func getenv(environ []string, name string) string {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

func (n *netexec) header(w http.ResponseWriter, r *http.Request) {
	key := r.FormValue("key")
	if key != "" {
		n.log.Printf("GET /header?key=%s", key)
		fmt.Fprintf(w, "%s", r.Header.Get(key))
		return
	}
	n.log.Printf("GET /header")
	data, err := json.Marshal(r.Header)
	if err != nil {
		fmt.Fprintf(w, "error marshalling header, err: %v", err)
		return
	}
	w.Write(data)
}

func (n *netexec) exitHandler(w http.ResponseWriter, r *http.Request) {
	waitString := r.FormValue("wait")
	timeoutString := r.FormValue("timeout")
	codeString := r.FormValue("code")
	n.log.Printf("GET /exit?code=%s&timeout=%s&wait=%s", codeString, timeoutString, waitString)
	timeout, err := time.ParseDuration(timeoutString)
	if err != nil && timeoutString != "" {
		fmt.Fprintf(w, "argument 'timeout' must be a valid golang duration or empty, got %q\n", timeoutString)
		return
	}
	wait, err := time.ParseDuration(waitString)
	if err != nil && waitString != "" {
		fmt.Fprintf(w, "argument 'wait' must be a valid golang duration or empty, got %q\n", waitString)
		return
	}
	code, err := strconv.Atoi(codeString)
	if err != nil && codeString != "" {
		fmt.Fprintf(w, "argument 'code' must be an integer [0-127] or empty, got %q\n", codeString)
		return
	}
	n.log.Printf("Will begin shutdown in %s, allowing %s for connections to close, then will exit with %d", wait, timeout, code)
	time.Sleep(wait)
	if timeout == 0 {
		n.exit(code)
		return
	}
	// The shutdown waits for this handler: hand over and return.
	go func() { n.exitCh <- shutdownRequest{code: code, timeout: timeout} }()
}

func (n *netexec) hostnameHandler(path string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n.log.Printf("GET %s", path)
		fmt.Fprint(w, n.hostName())
	}
}

// healthz answers 200 while a UDP server runs, as upstream.
func (n *netexec) healthz(w http.ResponseWriter, r *http.Request) {
	n.log.Printf("GET /healthz")
	if n.serverReady.Load() {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.WriteHeader(http.StatusPreconditionFailed)
}

// readyz answers 503 after SIGTERM, so the pod leaves the Service's ready
// endpoints while it drains.
func (n *netexec) readyz(w http.ResponseWriter, r *http.Request) {
	n.log.Printf("GET /readyz")
	select {
	case <-n.sigterm:
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("shutting down"))
	default:
		if n.serverReady.Load() {
			w.Write([]byte("ok"))
			return
		}
		w.WriteHeader(http.StatusPreconditionFailed)
	}
}

func (n *netexec) shutdown(w http.ResponseWriter, r *http.Request) {
	n.log.Printf("GET /shutdown")
	n.exit(0)
}

func (n *netexec) redirect(w http.ResponseWriter, r *http.Request) {
	location := r.FormValue("location")
	codeString := r.FormValue("code")
	n.log.Printf("%s /redirect?msg=%s&code=%s", r.Method, location, codeString)
	code := http.StatusFound
	if codeString != "" {
		var err error
		if code, err = strconv.Atoi(codeString); err != nil {
			fmt.Fprintf(w, "argument 'code' must be an integer or empty, got %q\n", codeString)
			return
		}
	}
	http.Redirect(w, r, location, code)
}

func (n *netexec) shellHandler(w http.ResponseWriter, r *http.Request) {
	cmd := r.FormValue("shellCommand")
	if cmd == "" {
		cmd = r.FormValue("cmd")
	}
	n.log.Printf("GET /shell?cmd=%s", cmd)
	out, err := exec.CommandContext(r.Context(), n.env.shell, "-c", cmd).CombinedOutput()
	output := map[string]string{}
	if len(out) > 0 {
		output["output"] = string(out)
	}
	if err != nil {
		output["error"] = fmt.Sprintf("%v", err)
	}
	n.log.Printf("Output: %s", output)
	writeJSON(w, output)
}

func writeJSON(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, fmt.Sprintf("response could not be serialized. %v", err), http.StatusExpectationFailed)
		return
	}
	w.Write(data)
}

func (n *netexec) upload(w http.ResponseWriter, r *http.Request) {
	n.log.Printf("GET /upload")
	result := map[string]string{}
	file, _, err := r.FormFile("file")
	if err != nil {
		result["error"] = "Unable to upload file."
		writeJSON(w, result)
		n.log.Printf("Unable to upload file: %s", err)
		return
	}
	defer file.Close()
	f, err := os.CreateTemp(n.env.uploadDir, "upload")
	if err != nil {
		result["error"] = "Unable to open file for write"
		writeJSON(w, result)
		n.log.Printf("Unable to open file for write: %s", err)
		return
	}
	defer f.Close()
	if _, err := io.Copy(f, file); err != nil {
		result["error"] = "Unable to write file."
		writeJSON(w, result)
		n.log.Printf("Unable to write file: %s", err)
		return
	}
	if err := os.Chmod(f.Name(), 0o700); err != nil {
		result["error"] = "Unable to chmod file."
		writeJSON(w, result)
		return
	}
	n.log.Printf("Wrote upload to %s", f.Name())
	result["output"] = f.Name()
	w.WriteHeader(http.StatusCreated)
	writeJSON(w, result)
}

// dial makes requests to another server and reports the answers, as the
// e2e tests use it to check connectivity from a pod.
func (n *netexec) dial(w http.ResponseWriter, r *http.Request) {
	values, err := url.Parse(r.URL.RequestURI())
	if err != nil {
		http.Error(w, fmt.Sprintf("%v", err), http.StatusBadRequest)
		return
	}
	q := values.Query()
	host, port, request, protocol, tryParam := q.Get("host"), q.Get("port"), q.Get("request"), q.Get("protocol"), q.Get("tries")
	n.log.Printf("GET /dial?host=%s&protocol=%s&port=%s&request=%s&tries=%s", host, protocol, port, request, tryParam)
	tries := 1
	if len(tryParam) > 0 {
		tries, err = strconv.Atoi(tryParam)
	}
	if err != nil {
		http.Error(w, fmt.Sprintf("tries parameter is invalid. %v", err), http.StatusBadRequest)
		return
	}
	if len(request) == 0 {
		http.Error(w, fmt.Sprintf("request parameter not specified. %v", err), http.StatusBadRequest)
		return
	}
	hostPort := net.JoinHostPort(host, port)
	var addr net.Addr
	var dialer func(string, net.Addr) (string, error)
	switch strings.ToLower(protocol) {
	case "", "http":
		dialer = dialHTTP
		addr, err = net.ResolveTCPAddr("tcp", hostPort)
	case "udp":
		dialer = dialUDP
		addr, err = net.ResolveUDPAddr("udp", hostPort)
	default:
		http.Error(w, fmt.Sprintf("unsupported protocol. %s", protocol), http.StatusBadRequest)
		return
	}
	if err != nil {
		http.Error(w, fmt.Sprintf("host and/or port param are invalid. %v", err), http.StatusBadRequest)
		return
	}
	errs := make([]string, 0)
	responses := make([]string, 0)
	var response string
	for i := 0; i < tries; i++ {
		response, err = dialer(request, addr)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%v", err))
		} else {
			responses = append(responses, response)
		}
	}
	output := map[string][]string{}
	if len(response) > 0 {
		output["responses"] = responses
	}
	if len(errs) > 0 {
		output["errors"] = errs
	}
	writeJSON(w, output)
}

func dialHTTP(request string, addr net.Addr) (string, error) {
	transport := &http.Transport{Proxy: nil}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://%s/%s", addr.String(), request))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	return string(body), nil
}

func dialUDP(request string, addr net.Addr) (string, error) {
	conn, err := net.DialUDP("udp", nil, addr.(*net.UDPAddr))
	if err != nil {
		return "", fmt.Errorf("udp dial failed. err:%v", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(request)); err != nil {
		return "", fmt.Errorf("udp connection write failed. err:%v", err)
	}
	buf := make([]byte, 2048)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	count, err := conn.Read(buf)
	if err != nil || count == 0 {
		return "", fmt.Errorf("reading from udp connection failed. err:'%v'", err)
	}
	return string(buf[:count]), nil
}

// serveUDP answers "hostname", "echo <msg>", "envvar <NAME>", "clientip"
// and "serverport" (matched case-insensitively; the echo is lower-cased,
// the variable's name is not, as upstream).
func (n *netexec) serveUDP(conn *net.UDPConn, address string) {
	n.log.Printf("Started UDP server on port %s %d", address, n.o.udpPort)
	defer func() {
		n.log.Printf("UDP server exited")
		n.serverReady.Store(false)
	}()
	buf := make([]byte, 2048)
	for {
		count, client, err := conn.ReadFromUDP(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				n.log.Printf("Error occurred: failed accepting UDP connections:%v", err)
				n.exit(1)
			}
			return
		}
		raw := strings.TrimSpace(string(buf[:count]))
		text := strings.ToLower(raw)
		var reply string
		switch {
		case text == "hostname":
			n.log.Println("Sending udp hostName response")
			reply = n.hostName()
		case strings.HasPrefix(text, "envvar "):
			name := strings.TrimSpace(strings.SplitN(raw, " ", 2)[1])
			n.log.Printf("Sending UDP envvar response for %s", name)
			reply = getenv(n.env.environ(), name)
		case strings.HasPrefix(text, "echo "):
			reply = strings.SplitN(text, " ", 2)[1]
			n.log.Printf("Echoing %v to UDP client %s\n", reply, client)
		case text == "clientip":
			n.log.Printf("Sending clientip back to UDP client %s\n", client)
			reply = client.String()
		case text == "serverport":
			// The --udp-port given, as upstream (0 for an ephemeral port).
			n.log.Printf("Sending server port to UDP client %s\n", strconv.Itoa(n.o.udpPort))
			reply = strconv.Itoa(n.o.udpPort)
		default:
			if len(text) > 0 {
				n.log.Printf("Unknown UDP command received from %s: %v\n", client, text)
			}
			continue
		}
		if _, err := conn.WriteToUDP([]byte(reply), client); err != nil {
			n.log.Printf("failed to write to UDP client %s: %v", client, err)
		}
	}
}

func parseAddresses(addresses string) ([]string, error) {
	if addresses == "" {
		return []string{""}, nil
	}
	seen := map[string]bool{}
	var res []string
	for _, a := range strings.Split(addresses, ",") {
		if net.ParseIP(a) == nil {
			return nil, fmt.Errorf("parseAddress: invalid address %s", a)
		}
		if !seen[a] {
			seen[a] = true
			res = append(res, a)
		}
	}
	return res, nil
}
