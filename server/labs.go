package server

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/views"
)

// labs runs one views.Lab per cluster and scenario while someone watches
// it, and stops it a while after the last viewer has gone.
type labs struct {
	mu      sync.Mutex
	running map[string]*labEntry
	linger  time.Duration
	closed  bool // the server stopped: no more Labs
}

type labEntry struct {
	// attempt is the attempt whose timeline the lab's events go to (the
	// latest one watched: a reset starts a new attempt on the cluster).
	attempt atomic.Int64
	lab     *views.Lab
	err     error
	ready   chan struct{}
	viewers int
	stop    *time.Timer
}

// scenarioServices are the Services and the client Pods ("ns/name") that
// the scenario's setup manifests create.
func scenarioServices(sc *scenario.Scenario) (services, clients []string) {
	for _, m := range sc.Manifests {
		for _, o := range m.Objects {
			switch o.GVK.Kind {
			case "Service":
				services = append(services, o.Namespace+"/"+o.Name)
			case "Pod":
				clients = append(clients, o.Namespace+"/"+o.Name)
			}
		}
	}
	return services, clients
}

// pace is how much every running Lab stretches its probe and rule
// intervals: 1 while there are at most two Labs per CPU, then in
// proportion (30 labs on 2 CPUs probe every 8 s instead of every second),
// so that the labs together leave the machine room to answer learners.
func (ls *labs) pace() int {
	ls.mu.Lock()
	n := len(ls.running)
	ls.mu.Unlock()
	per := 2 * runtime.NumCPU()
	return max(1, (n+per-1)/per)
}

// acquire returns the running Lab for the cluster and scenario, starting it
// when nobody watches it yet; release gives it back.
func (s *Server) acquireLab(ctx context.Context, c cluster.Cluster, sc *scenario.Scenario, attemptID int64) (*views.Lab, func(), error) {
	key := c.Name() + "\x00" + sc.ID
	s.labs.mu.Lock()
	if s.labs.closed {
		s.labs.mu.Unlock()
		return nil, nil, errors.New("the server is stopping")
	}
	if s.labs.running == nil {
		s.labs.running = map[string]*labEntry{}
	}
	e, ok := s.labs.running[key]
	if !ok {
		e = &labEntry{ready: make(chan struct{})}
		s.labs.running[key] = e
		go func() {
			defer close(e.ready)
			services, clients := scenarioServices(sc)
			cfg := views.Config{Cluster: c, Services: services, Clients: clients, Log: s.Log, Pace: s.labs.pace,
				Observe: func(ev views.TimelineEvent) { s.record(e.attempt.Load(), ev) }}
			if s.PodExec != nil {
				pe, err := s.PodExec(c)
				if err != nil {
					s.Log.Warn("no probes from Pods", "cluster", c.Name(), "err", err)
				} else {
					cfg.Pods = pe
				}
			}
			e.lab, e.err = views.Start(s.base(), cfg)
		}()
	}
	e.attempt.Store(attemptID)
	e.viewers++
	if e.stop != nil {
		e.stop.Stop()
		e.stop = nil
	}
	s.labs.mu.Unlock()
	release := func() {
		s.labs.mu.Lock()
		defer s.labs.mu.Unlock()
		e.viewers--
		if e.viewers > 0 || s.labs.closed {
			return
		}
		linger := s.labs.linger
		if linger == 0 {
			linger = 30 * time.Second
		}
		e.stop = time.AfterFunc(linger, func() {
			s.labs.mu.Lock()
			if e.viewers > 0 || s.labs.running[key] != e {
				s.labs.mu.Unlock()
				return
			}
			delete(s.labs.running, key)
			s.labs.mu.Unlock()
			<-e.ready
			if e.lab != nil {
				e.lab.Stop()
			}
		})
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		release()
		return nil, nil, ctx.Err()
	}
	if e.err != nil {
		release()
		s.labs.mu.Lock()
		if s.labs.running[key] == e {
			delete(s.labs.running, key) // the next viewer tries again
		}
		s.labs.mu.Unlock()
		return nil, nil, fmt.Errorf("watching cluster %s: %w", c.Name(), e.err)
	}
	return e.lab, release, nil
}

// runningLab returns the Lab for the cluster and scenario if one runs.
func (s *Server) runningLab(clusterName, scenarioID string) *views.Lab {
	s.labs.mu.Lock()
	e, ok := s.labs.running[clusterName+"\x00"+scenarioID]
	s.labs.mu.Unlock()
	if !ok {
		return nil
	}
	select {
	case <-e.ready:
		return e.lab
	default:
		return nil
	}
}

// stopLabs stops every Lab (the server is stopping).
func (s *Server) stopLabs() {
	s.labs.mu.Lock()
	all := s.labs.running
	s.labs.running = nil
	s.labs.closed = true
	for _, e := range all {
		if e.stop != nil {
			e.stop.Stop()
		}
	}
	s.labs.mu.Unlock()
	for _, e := range all {
		<-e.ready
		if e.lab != nil {
			e.lab.Stop()
		}
	}
}
