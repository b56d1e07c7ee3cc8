package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/svclab/svclab/lab/class"
	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/owner"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/views"
	"github.com/svclab/svclab/server/ratelimit"
	"github.com/svclab/svclab/web"
)

// Clusters lists, finds and creates clusters; a cluster.Provider is one.
type Clusters interface {
	List(ctx context.Context) ([]cluster.Summary, error)
	Get(ctx context.Context, name string) (cluster.Cluster, error)
	Create(ctx context.Context, opts cluster.CreateOptions) (cluster.Cluster, error)
	Delete(ctx context.Context, name string) error
}

// Server serves the web UI.
type Server struct {
	Clusters Clusters
	Log      *slog.Logger
	// Background bounds long operations started from the UI; cancelling
	// it (the server stopping) makes them roll back. Wait waits for them.
	Background context.Context

	// Catalog holds the scenarios the catalog lists.
	Catalog *scenario.Catalog
	// Attempts runs and remembers learners' attempts (nil: the scenario
	// pages can show scenarios but not start them).
	Attempts Attempts
	// Learner is the learner of this single-learner lab (default
	// DefaultLearner).
	Learner string
	// DefaultCluster is the cluster name the start form proposes (default
	// "lab").
	DefaultCluster string
	// KubeBin finds svclab-kube, whose kubectl the control-plane terminal
	// gets (nil: no kubectl in the terminal).
	KubeBin func(ctx context.Context) (string, error)
	// PodExec makes the executor of the probes from client Pods (nil: the
	// traffic panel probes from the nodes only).
	PodExec func(c cluster.Cluster) (views.PodExecutor, error)

	// Timeline keeps attempts' timelines for replay and audit (nil: not
	// kept).
	Timeline Timeline
	// Classes are the classrooms served (nil: no class routes; the local
	// lab alone).
	Classes *class.Hub
	// ClassesOnly turns the local lab's pages off (the catalog, clusters,
	// /scenarios): a server for classes must not let learners reach any
	// cluster but their own.
	ClassesOnly bool
	// Owners are the machine's claims on clusters (nil: not checked):
	// Delete refuses a cluster another process or attempt holds.
	Owners *owner.Registry
	// Backend is the backend of Clusters as the claims name it (default
	// "embedded").
	Backend string
	// Access says which names the server answers to and whether a token
	// is needed (nil: loopback names only, no token).
	Access *Access

	ops   operations
	feeds feeds
	terms terminalCounts
	// lifecycle limits each learner's scenario starts and resets.
	lifecycleOnce sync.Once
	lifecycle     *ratelimit.Limiter
	taps          taps
	rec           recorder
}

// nav sets the top bar of a server without a local lab: it leads to
// joining a class (a class's pages set their own).
func (s *Server) nav(next http.Handler) http.Handler {
	if !s.ClassesOnly {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(web.WithNav(r.Context(), web.Nav{Links: []web.NavLink{{Label: "Join a class", URL: "/"}}})))
	})
}

// Wait waits for the operations started from the UI to end, and stops the
// live views.
func (s *Server) Wait() {
	s.ops.wait()
	s.stopFeeds()
	s.flushTimeline()
}

// Handler returns the server's routes.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	// CSRF: state-changing requests (POST) must come from our own pages;
	// browsers say where a request comes from (Sec-Fetch-Site, Origin),
	// and cross-origin ones are refused. Websockets check Origin.
	csrf := http.NewCrossOriginProtection()
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "refused: this request came from another site (cross-site request forgery protection). Use the svclab page itself.", http.StatusForbidden)
	}))
	r.Use(middleware.RequestID, s.logRequests, middleware.Recoverer, s.access().hsts, s.access().Guard, limitRequests, csrf.Handler, s.nav)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	if s.ClassesOnly {
		r.Get("/", s.joinPage)
	} else {
		r.Get("/", s.home)
		r.Post("/clusters", s.createCluster)
		r.Get("/clusters", s.clustersPage)
		r.Post("/clusters/{name}/delete", s.deleteCluster)
		r.Get("/operations/{id}", s.operation)
		r.Get("/operations/{id}/events", s.operationEvents)
		r.Route("/scenarios/{id}", s.scenarioRoutes())
	}
	if s.Classes != nil {
		s.classRoutes(r)
	}
	static := http.FileServerFS(web.Assets())
	r.Handle("/static/*", cacheFor(time.Hour, static))
	r.Handle("/assets/*", cacheFor(time.Hour, http.StripPrefix("/assets/", http.FileServerFS(mustSub(web.Assets(), "assets/dist")))))
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such page: "+r.URL.Path, http.StatusNotFound)
	})
	return r
}

func cacheFor(d time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(d.Seconds())))
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

func mustSub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	return sub
}

func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		start := time.Now()
		next.ServeHTTP(ww, r)
		s.Log.Info("request", "method", r.Method, "path", r.URL.Path, "status", ww.Status(),
			"bytes", ww.BytesWritten(), "duration", time.Since(start), "id", middleware.GetReqID(r.Context()))
	})
}

// MaxRequestBody bounds a request's body (forms, JSON): nothing svclab
// takes is larger.
const MaxRequestBody = 1 << 20

// requestWriteTimeout bounds writing a response; websockets, which the
// upgrade hands their own deadlines, are not bound by it.
const requestWriteTimeout = time.Minute

// limitRequests bounds every request's body and the time its response may
// take to write: a client that sends without end or reads at a trickle
// holds nothing for long.
func limitRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBody)
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(requestWriteTimeout))
		next.ServeHTTP(w, r)
	})
}

// Listen opens addr, with an error that names the fix when the port is
// taken.
func Listen(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s: %w (is another svclab running? choose another --addr)", addr, err)
	}
	return l, nil
}

// Serve serves h on l until ctx ends, then shuts down gracefully; over TLS
// when tlsConfig is set.
func Serve(ctx context.Context, l net.Listener, h http.Handler, log *slog.Logger, tlsConfig ...*tls.Config) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	if len(tlsConfig) > 0 && tlsConfig[0] != nil {
		srv.TLSConfig = tlsConfig[0]
		l = tls.NewListener(l, tlsConfig[0])
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
}
