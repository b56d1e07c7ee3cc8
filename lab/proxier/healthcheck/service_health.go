package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Listener opens a listening socket; the real one is net.ListenConfig,
// tests use loopback ports.
type Listener func(ctx context.Context, network, addr string) (net.Listener, error)

// ServiceHealthServer serves the healthCheckNodePorts of LoadBalancer
// Services with externalTrafficPolicy Local.
type ServiceHealthServer struct {
	logger  *slog.Logger
	network string
	ips     []net.IP
	listen  Listener
	healthy func() bool

	lock     sync.RWMutex
	services map[types.NamespacedName]*hcInstance
}

type hcInstance struct {
	nsn       types.NamespacedName
	port      uint16
	servers   []*http.Server
	endpoints int
}

// NewServiceHealthServer returns a server listening on each of ips (the
// node-port addresses; nil means the unspecified address of network,
// "tcp4" or "tcp6"). healthy reports the proxy's own health. listen may be
// nil for real sockets.
func NewServiceHealthServer(logger *slog.Logger, network string, ips []net.IP, healthy func() bool, listen Listener) *ServiceHealthServer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if listen == nil {
		listen = func(ctx context.Context, network, addr string) (net.Listener, error) {
			var lc net.ListenConfig
			return lc.Listen(ctx, network, addr)
		}
	}
	if len(ips) == 0 {
		if network == "tcp6" {
			ips = []net.IP{net.IPv6zero}
		} else {
			ips = []net.IP{net.IPv4zero}
		}
	}
	return &ServiceHealthServer{
		logger:   logger.With("component", "service-health"),
		network:  network,
		ips:      ips,
		listen:   listen,
		healthy:  healthy,
		services: map[types.NamespacedName]*hcInstance{},
	}
}

// SyncServices opens listeners for new health check ports and closes those
// of Services that are gone or changed port. A port that cannot be opened
// is logged and retried on the next call; the error lists them.
func (s *ServiceHealthServer) SyncServices(ctx context.Context, newServices map[types.NamespacedName]uint16) error {
	s.lock.Lock()
	defer s.lock.Unlock()
	for nsn, svc := range s.services {
		if port, ok := newServices[nsn]; !ok || port != svc.port {
			s.logger.InfoContext(ctx, "closing healthcheck", "service", nsn.String(), "port", svc.port)
			svc.closeAll()
			delete(s.services, nsn)
		}
	}
	var errs []error
	for nsn, port := range newServices {
		if s.services[nsn] != nil {
			continue
		}
		s.logger.InfoContext(ctx, "opening healthcheck", "service", nsn.String(), "port", port)
		svc := &hcInstance{nsn: nsn, port: port}
		if err := s.listenAndServeAll(ctx, svc); err != nil {
			s.logger.ErrorContext(ctx, "failed to start healthcheck", "service", nsn.String(), "port", port, "err", err)
			errs = append(errs, fmt.Errorf("healthcheck %s port %d: %w", nsn, port, err))
			continue
		}
		s.services[nsn] = svc
	}
	return errors.Join(errs...)
}

func (s *ServiceHealthServer) listenAndServeAll(ctx context.Context, svc *hcInstance) error {
	for _, ip := range s.ips {
		addr := net.JoinHostPort(ip.String(), strconv.Itoa(int(svc.port)))
		ln, err := s.listen(ctx, s.network, addr)
		if err != nil {
			svc.closeAll()
			return err
		}
		srv := &http.Server{Handler: hcHandler{name: svc.nsn, s: s}}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.logger.Error("healthcheck closed", "service", svc.nsn.String(), "err", err)
			}
		}()
		svc.servers = append(svc.servers, srv)
	}
	return nil
}

func (svc *hcInstance) closeAll() {
	for _, srv := range svc.servers {
		_ = srv.Close()
	}
	svc.servers = nil
}

// SyncEndpoints sets the number of local ready endpoints of each Service;
// Services not listed have none.
func (s *ServiceHealthServer) SyncEndpoints(newEndpoints map[types.NamespacedName]int) {
	s.lock.Lock()
	defer s.lock.Unlock()
	for nsn, hci := range s.services {
		hci.endpoints = newEndpoints[nsn]
	}
}

// Ports returns the open health check ports by Service.
func (s *ServiceHealthServer) Ports() map[types.NamespacedName]uint16 {
	s.lock.RLock()
	defer s.lock.RUnlock()
	out := make(map[types.NamespacedName]uint16, len(s.services))
	for nsn, svc := range s.services {
		out[nsn] = svc.port
	}
	return out
}

// Close closes every listener.
func (s *ServiceHealthServer) Close() {
	s.lock.Lock()
	defer s.lock.Unlock()
	for nsn, svc := range s.services {
		svc.closeAll()
		delete(s.services, nsn)
	}
}

type hcHandler struct {
	name types.NamespacedName
	s    *ServiceHealthServer
}

func (h hcHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.s.lock.RLock()
	svc, ok := h.s.services[h.name]
	count := 0
	if ok {
		count = svc.endpoints
	}
	h.s.lock.RUnlock()
	if !ok {
		h.s.logger.Error("received request for closed healthcheck", "service", h.name.String())
		return
	}
	healthy := h.s.healthy == nil || h.s.healthy()

	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(count))
	if count != 0 && healthy {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	// The exact text upstream prints (a dedented, tab-indented literal).
	fmt.Fprintf(w, "{\n\t\"service\": {\n\t\t\"namespace\": %q,\n\t\t\"name\": %q\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": %v\n}",
		h.name.Namespace, h.name.Name, count, healthy)
}
