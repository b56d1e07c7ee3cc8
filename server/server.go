package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/web"
)

// Clusters lists and creates clusters; a cluster.Provider is one.
type Clusters interface {
	List(ctx context.Context) ([]cluster.Summary, error)
	Create(ctx context.Context, opts cluster.CreateOptions) (cluster.Cluster, error)
}

// Server serves the web UI.
type Server struct {
	Clusters Clusters
	Log      *slog.Logger
	// Background bounds long operations started from the UI; cancelling
	// it (the server stopping) makes them roll back. Wait waits for them.
	Background context.Context

	ops operations
}

// Wait waits for the operations started from the UI to end.
func (s *Server) Wait() { s.ops.wait() }

// Handler returns the server's routes.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.RealIP, s.logRequests, middleware.Recoverer)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	r.Get("/", s.clusters)
	r.Post("/clusters", s.createCluster)
	r.Get("/operations/{id}", s.operation)
	r.Get("/operations/{id}/events", s.operationEvents)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such page: "+r.URL.Path, http.StatusNotFound)
	})
	return r
}

func (s *Server) clusters(w http.ResponseWriter, r *http.Request) {
	list, err := s.Clusters.List(r.Context())
	if err != nil {
		s.Log.Error("listing clusters", "err", err)
		http.Error(w, "could not list the clusters: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := web.Clusters(list).Render(r.Context(), w); err != nil {
		s.Log.Error("rendering", "err", err)
	}
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

// Listen opens addr, with an error that names the fix when the port is
// taken.
func Listen(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s: %w (is another svclab running? choose another --addr)", addr, err)
	}
	return l, nil
}

// Serve serves h on l until ctx ends, then shuts down gracefully.
func Serve(ctx context.Context, l net.Listener, h http.Handler, log *slog.Logger) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
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
