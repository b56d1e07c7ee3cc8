package agnhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

func serveHostnameCommand(ctx context.Context, e env, l *log.Logger) *cobra.Command {
	var doTCP, doUDP, doHTTP, doClose bool
	var port int
	cmd := &cobra.Command{
		Use:   "serve-hostname",
		Short: "Serves the hostname",
		Long:  `Serves the hostname through HTTP / TCP / UDP on the given port.`,
		Args:  cobra.MaximumNArgs(0),
		RunE: func(*cobra.Command, []string) error {
			if doHTTP && (doTCP || doUDP) {
				return fatal(l, "Can't server TCP/UDP mode and HTTP mode at the same time")
			}
			hostname, err := e.hostname()
			if err != nil {
				return fatal(l, "Error from os.Hostname(): %s", err)
			}
			terms := e.notify(syscall.SIGTERM)
			var closers []io.Closer
			defer func() {
				for _, c := range closers {
					c.Close()
				}
			}()
			if doTCP {
				ln, err := e.listen("tcp", port)
				if err != nil {
					return fatal(l, "Error from net.Listen(): %s", err)
				}
				closers = append(closers, ln)
				go func() {
					for {
						conn, err := ln.Accept()
						if err != nil {
							return
						}
						l.Printf("TCP request from %s", conn.RemoteAddr().String())
						conn.Write([]byte(hostname))
						conn.Close()
					}
				}()
			}
			if doUDP {
				sock, err := e.listenUDP("", port)
				if err != nil {
					return fatal(l, "Error from ListenUDP(): %s", err)
				}
				closers = append(closers, sock)
				go func() {
					var buf [16]byte
					for {
						_, client, err := sock.ReadFrom(buf[:])
						if err != nil {
							return
						}
						l.Printf("UDP request from %s", client.String())
						sock.WriteTo([]byte(hostname), client)
					}
				}()
			}
			if doHTTP {
				ln, err := e.listen("http", port)
				if err != nil {
					return fatal(l, "listen tcp :%d: %v", port, err)
				}
				srv := &http.Server{ErrorLog: log.New(io.Discard, "", 0), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					l.Printf("HTTP request from %s", r.RemoteAddr)
					if doClose {
						w.Header().Add("Connection", "close")
					}
					fmt.Fprintf(w, "%s", hostname)
				})}
				closers = append(closers, srv)
				go srv.Serve(ln)
			}
			l.Printf("Serving on port %d.\n", port)
			select {
			case <-ctx.Done():
				return nil
			case sig := <-terms:
				l.Printf("Shutting down after receiving signal: %s.\n", sig)
			}
			l.Printf("Awaiting pod deletion.\n")
			select {
			case <-time.After(e.awaitDeletion):
			case <-ctx.Done():
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&doTCP, "tcp", false, "Serve raw over TCP.")
	f.BoolVar(&doUDP, "udp", false, "Serve raw over UDP.")
	f.BoolVar(&doHTTP, "http", true, "Serve HTTP.")
	f.BoolVar(&doClose, "close", false, "Close connection per each HTTP request.")
	f.IntVar(&port, "port", 9376, "Port number.")
	return cmd
}

func pauseCommand(ctx context.Context, e env) *cobra.Command {
	var delay int
	cmd := &cobra.Command{
		Use:   "pause",
		Short: "Pauses the execution",
		Long:  `Pauses the execution. Useful for keeping the containers running, so other commands can be executed.`,
		Args:  cobra.MaximumNArgs(0),
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(e.stdout, "Paused")
			sigs := e.notify(syscall.SIGINT, syscall.SIGTERM)
			var code int
			select {
			case <-ctx.Done():
				return nil
			case sig := <-sigs:
				code = 1
				if sig == syscall.SIGTERM {
					code = 2
				}
			}
			if delay > 0 {
				fmt.Fprintf(e.stdout, "Sleeping %d seconds before exit ...", delay)
				select {
				case <-time.After(time.Duration(delay) * time.Second):
				case <-ctx.Done():
				}
			}
			fmt.Fprintf(e.stdout, "exiting %d\n", code)
			return exitError{code}
		},
	}
	cmd.Flags().IntVar(&delay, "delay-shutdown", 0, "Number of seconds to delay shutdown when receiving SIGTERM/SIGINT.")
	return cmd
}

func porterCommand(ctx context.Context, e env, l *log.Logger) *cobra.Command {
	var jsonResponse bool
	cmd := &cobra.Command{
		Use:   "porter",
		Short: "Serves requested data on ports specified in ENV variables",
		Long: `Serves requested data on ports specified in environment variables of the form
SERVE_{PORT,TCP_PORT,UDP_PORT,TLS_PORT}_[NNNN], e.g. SERVE_PORT_9001=foo serves "foo"
over HTTP on port 9001. TLS uses CERT_FILE and KEY_FILE (default localhost.crt and
localhost.key in the working directory).`,
		Args: cobra.MaximumNArgs(0),
		RunE: func(*cobra.Command, []string) error {
			errs := make(chan error, 1)
			var closers []io.Closer
			defer func() {
				for _, c := range closers {
					c.Close()
				}
			}()
			vars := map[string]string{}
			for _, kv := range e.environ() {
				k, v, _ := strings.Cut(kv, "=")
				vars[k] = v
			}
			for _, kv := range e.environ() {
				key, value, _ := strings.Cut(kv, "=")
				var kind, port string
				for _, p := range []struct{ prefix, kind string }{
					{"SERVE_PORT_", "tcp"}, {"SERVE_TCP_PORT_", "tcp"}, {"SERVE_UDP_PORT_", "udp"},
					{"SERVE_TLS_PORT_", "tls"}, {"SERVE_SCTP_PORT_", "sctp"},
				} {
					if rest, ok := strings.CutPrefix(key, p.prefix); ok {
						kind, port = p.kind, rest
						break
					}
				}
				if kind == "" {
					continue
				}
				n, err := strconv.Atoi(port)
				if err != nil {
					l.Printf("server on port %q failed: invalid port", port)
					continue
				}
				switch kind {
				case "sctp":
					l.Printf("SCTP on port %s is not supported by svclab's agnhost", port)
				case "udp":
					sock, err := e.listenUDP("", n)
					if err != nil {
						return fatal(l, "UDP: failed to listen on port %s: %v", port, err)
					}
					closers = append(closers, sock)
					l.Printf("Started UDP server on port %s", port)
					go func() {
						buf := make([]byte, 16)
						for {
							_, client, err := sock.ReadFrom(buf)
							if err != nil {
								return
							}
							sock.WriteTo([]byte(value), client)
						}
					}()
				default:
					handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						body := value
						if jsonResponse {
							j, _ := json.Marshal(struct{ Method, Body string }{r.Method, value})
							w.Header().Set("Content-Type", "application/json")
							body = string(j)
						}
						fmt.Fprint(w, body)
					})
					ln, err := e.listen(kind, n)
					if err != nil {
						l.Printf("server on port %q failed: %v", port, err)
						continue
					}
					srv := &http.Server{Handler: handler, ErrorLog: log.New(io.Discard, "", 0)}
					closers = append(closers, srv)
					if kind == "tls" {
						cert, key := vars["CERT_FILE"], vars["KEY_FILE"]
						if cert == "" {
							cert = "localhost.crt"
						}
						if key == "" {
							key = "localhost.key"
						}
						go func() {
							err := srv.ServeTLS(ln, cert, key)
							l.Printf("tls server on port %q with certFile=%q, keyFile=%q failed: %v", port, cert, key, err)
						}()
					} else {
						go func() {
							if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
								l.Printf("server on port %q failed: %v", port, err)
							}
						}()
					}
				}
			}
			select {
			case <-ctx.Done():
				return nil
			case err := <-errs:
				return err
			}
		},
	}
	cmd.Flags().BoolVar(&jsonResponse, "json-response", false, "Responds to requests with a json response that includes the default value with the http.Request Method")
	return cmd
}

func livenessCommand(ctx context.Context, e env, l *log.Logger) *cobra.Command {
	return &cobra.Command{
		Use:   "liveness",
		Short: "Starts a server that is alive for 10 seconds",
		Long:  "A simple server on port 8080 whose /healthz answers 200 for 10 seconds and 500 after that.",
		Args:  cobra.MaximumNArgs(0),
		RunE: func(*cobra.Command, []string) error {
			started := e.now()
			mux := http.NewServeMux()
			mux.HandleFunc("/started", func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte(e.now().Sub(started).String()))
			})
			mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
				d := e.now().Sub(started)
				if d.Seconds() > 10 {
					w.WriteHeader(500)
					w.Write([]byte(fmt.Sprintf("error: %v", d.Seconds())))
					return
				}
				w.Write([]byte("ok"))
			})
			mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
				loc, err := url.QueryUnescape(r.URL.Query().Get("loc"))
				if err != nil {
					http.Error(w, fmt.Sprintf("invalid redirect: %q", r.URL.Query().Get("loc")), http.StatusBadRequest)
					return
				}
				http.Redirect(w, r, loc, http.StatusFound)
			})
			return serveUntilDone(ctx, e, l, "http", e.livenessPort, mux)
		},
	}
}

func testWebserverCommand(ctx context.Context, e env, l *log.Logger) *cobra.Command {
	var port int
	cmd := &cobra.Command{
		Use:   "test-webserver",
		Short: "Starts a simple HTTP fileserver",
		Long:  "Starts a simple HTTP fileserver on the given --port, which serves any file specified in the URL path, if it exists.",
		Args:  cobra.MaximumNArgs(0),
		RunE: func(*cobra.Command, []string) error {
			fs := http.StripPrefix("/", http.FileServer(http.Dir(e.webRoot)))
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Cache-Control", "private")
				w.Header().Set("Access-Control-Allow-Origin", "*")
				w.Header().Set("Access-Control-Allow-Credentials", "true")
				w.Header().Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
				w.Header().Set("Access-Control-Allow-Headers", "DNT,X-Mx-ReqToken,Keep-Alive,User-Agent,X-Requested-With,Cache-Control,Content-Type")
				r.Header.Del("If-Modified-Since")
				fs.ServeHTTP(w, r)
			})
			return serveUntilDone(ctx, e, l, "http", port, h)
		},
	}
	cmd.Flags().IntVar(&port, "port", 80, "Port number.")
	return cmd
}

// serveUntilDone serves h on port until ctx ends (in a pod: until the
// process is killed) or the server fails.
func serveUntilDone(ctx context.Context, e env, l *log.Logger, kind string, port int, h http.Handler) error {
	ln, err := e.listen(kind, port)
	if err != nil {
		return fatal(l, "%v", err)
	}
	srv := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0)}
	errs := make(chan error, 1)
	go func() { errs <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		srv.Close()
		return nil
	case err := <-errs:
		return fatal(l, "%v", err)
	}
}
