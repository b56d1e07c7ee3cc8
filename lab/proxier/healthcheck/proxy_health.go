package healthcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// ToBeDeletedTaint is the cluster autoscaler's taint on nodes it is about
// to delete; such a node fails /healthz so load balancers drain it.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// ProxierHealth is the health of one IP family's proxier.
type ProxierHealth struct {
	LastUpdated time.Time `json:"lastUpdated"`
	Healthy     bool      `json:"healthy"`
}

// ProxyHealth is the JSON body of /healthz and /livez.
type ProxyHealth struct {
	LastUpdated  time.Time                     `json:"lastUpdated"`
	CurrentTime  time.Time                     `json:"currentTime"`
	NodeEligible *bool                         `json:"nodeEligible,omitempty"`
	Healthy      bool                          `json:"healthy"`
	Status       map[v1.IPFamily]ProxierHealth `json:"status,omitempty"`
}

// Counters receive the HTTP status codes served (kubeproxy_proxy_*_total).
type Counters struct {
	Healthz *prometheus.CounterVec
	Livez   *prometheus.CounterVec
}

// ProxyHealthServer tracks whether the proxier keeps up with its queued
// updates and serves /healthz and /livez.
type ProxyHealthServer struct {
	clock         clock.Clock
	healthTimeout time.Duration
	node          func() *v1.Node
	counters      Counters

	lock                   sync.RWMutex
	lastUpdatedMap         map[v1.IPFamily]time.Time
	oldestPendingQueuedMap map[v1.IPFamily]time.Time
}

// NewProxyHealthServer returns a server that is unhealthy when an update
// has been queued for longer than healthTimeout without a later Updated.
// node returns this node's Node object (nil if unknown). c may be nil.
func NewProxyHealthServer(healthTimeout time.Duration, node func() *v1.Node, counters Counters, c clock.Clock) *ProxyHealthServer {
	if c == nil {
		c = clock.RealClock{}
	}
	return &ProxyHealthServer{
		clock:                  c,
		healthTimeout:          healthTimeout,
		node:                   node,
		counters:               counters,
		lastUpdatedMap:         map[v1.IPFamily]time.Time{},
		oldestPendingQueuedMap: map[v1.IPFamily]time.Time{},
	}
}

// Updated records a successful sync (or the start of the sync loop).
func (hs *ProxyHealthServer) Updated(family v1.IPFamily) {
	hs.lock.Lock()
	defer hs.lock.Unlock()
	delete(hs.oldestPendingQueuedMap, family)
	hs.lastUpdatedMap[family] = hs.clock.Now()
}

// QueuedUpdate records that a sync was requested; only the oldest pending
// request counts.
func (hs *ProxyHealthServer) QueuedUpdate(family v1.IPFamily) {
	hs.lock.Lock()
	defer hs.lock.Unlock()
	if _, set := hs.oldestPendingQueuedMap[family]; !set {
		hs.oldestPendingQueuedMap[family] = hs.clock.Now()
	}
}

// Health computes the current health (without node eligibility).
func (hs *ProxyHealthServer) Health() ProxyHealth {
	health := ProxyHealth{Healthy: true, Status: map[v1.IPFamily]ProxierHealth{}}
	hs.lock.RLock()
	defer hs.lock.RUnlock()

	var lastUpdated time.Time
	for family, updated := range hs.lastUpdatedMap {
		if updated.After(lastUpdated) {
			lastUpdated = updated
		}
		health.Status[family] = ProxierHealth{LastUpdated: updated, Healthy: true}
	}
	now := hs.clock.Now()
	health.CurrentTime = now
	for family, updated := range hs.lastUpdatedMap {
		queued, set := hs.oldestPendingQueuedMap[family]
		if !set || now.Sub(queued) < hs.healthTimeout {
			continue
		}
		health.Healthy = false
		health.Status[family] = ProxierHealth{LastUpdated: updated, Healthy: false}
	}
	health.LastUpdated = lastUpdated
	return health
}

// NodeEligible reports whether this node should receive load-balancer
// traffic: its Node exists, is not being deleted and is not tainted for
// deletion by the cluster autoscaler.
func (hs *ProxyHealthServer) NodeEligible() bool {
	var node *v1.Node
	if hs.node != nil {
		node = hs.node()
	}
	if node == nil {
		return false
	}
	if !node.DeletionTimestamp.IsZero() {
		return false
	}
	for _, taint := range node.Spec.Taints {
		if taint.Key == ToBeDeletedTaint {
			return false
		}
	}
	return true
}

// Handler serves /healthz and /livez.
func (hs *ProxyHealthServer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		health := hs.Health()
		eligible := hs.NodeEligible()
		health.NodeEligible = &eligible
		hs.write(w, health, health.Healthy && eligible, hs.counters.Healthz)
	})
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) {
		health := hs.Health()
		hs.write(w, health, health.Healthy, hs.counters.Livez)
	})
	return mux
}

func (hs *ProxyHealthServer) write(w http.ResponseWriter, health ProxyHealth, healthy bool, counter *prometheus.CounterVec) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	code := http.StatusOK
	if !healthy {
		code = http.StatusServiceUnavailable
	} else {
		// Upstream reports "now" as lastUpdated when healthy.
		health.LastUpdated = hs.clock.Now()
	}
	if counter != nil {
		counter.WithLabelValues(fmt.Sprint(code)).Inc()
	}
	w.WriteHeader(code)
	out, _ := json.Marshal(health)
	_, _ = w.Write(out)
}

// Serve serves the handler on addr until ctx is done.
func (hs *ProxyHealthServer) Serve(ctx context.Context, logger *slog.Logger, addr string) error {
	return ServeHTTP(ctx, logger, "healthz", addr, hs.Handler())
}

// ServeHTTP listens on addr and serves h until ctx is done. It returns
// listen errors at once.
func ServeHTTP(ctx context.Context, logger *slog.Logger, name, addr string, h http.Handler) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("failed to start %s server on %s: %w", name, addr, err)
	}
	return ServeListener(ctx, logger, name, ln, h)
}

// ServeListener serves h on ln until ctx is done.
func ServeListener(ctx context.Context, logger *slog.Logger, name string, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	if logger != nil {
		logger.InfoContext(ctx, "starting "+name+" server", "address", ln.Addr().String())
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s server: %w", name, err)
	}
	return nil
}
