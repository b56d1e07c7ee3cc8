package server

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/views"
)

// labs runs one views.Lab per attempt and life of its cluster while
// someone watches it, and stops it a while after the last viewer has gone
// — at once when the cluster is rebuilt or another attempt starts on it:
// a Lab of an old generation would show a cluster that is not there.
type labs struct {
	mu      sync.Mutex
	running map[labKey]*labEntry
	linger  time.Duration
	closed  bool // the server stopped: no more Labs
}

// labKey names what a Lab watches: an attempt at a scenario on one
// generation of a cluster (cluster.Generation).
type labKey struct {
	cluster, generation, scenario string
	attempt                       int64
}

type labEntry struct {
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

// acquireLab returns the running Lab of the attempt on generation gen
// of cluster c, starting it when nobody watches it yet; release gives it
// back. Labs of other generations or attempts on the same cluster stop.
func (s *Server) acquireLab(ctx context.Context, c cluster.Cluster, gen string, sc *scenario.Scenario, a *Attempt) (*views.Lab, func(), error) {
	attemptID := a.ID
	key := labKey{cluster: c.Name(), generation: gen, scenario: sc.ID, attempt: attemptID}
	s.labs.mu.Lock()
	if s.labs.closed {
		s.labs.mu.Unlock()
		return nil, nil, errors.New("the server is stopping")
	}
	if s.labs.running == nil {
		s.labs.running = map[labKey]*labEntry{}
	}
	e, ok := s.labs.running[key]
	if !ok {
		stale := s.labs.takeStale(key)
		e = &labEntry{ready: make(chan struct{})}
		s.labs.running[key] = e
		go func() {
			defer close(e.ready)
			stopEntries(stale)
			services, clients := scenarioServices(sc)
			cfg := views.Config{Cluster: c, Services: services, Clients: clients, Log: s.Log, Pace: s.labs.pace,
				Disturbed: scenario.Disturbed(sc.Faults), Since: a.Started,
				Observe: func(ev views.TimelineEvent) { s.record(attemptID, ev) }}
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
			stopEntries([]*labEntry{e})
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

// takeStale removes the entries of key's cluster that are not key's (an
// older generation, another attempt) and returns them, to be stopped
// outside the lock. The caller holds ls.mu.
func (ls *labs) takeStale(key labKey) []*labEntry {
	var stale []*labEntry
	for k, e := range ls.running {
		if k.cluster == key.cluster && k != key {
			if e.stop != nil {
				e.stop.Stop()
			}
			delete(ls.running, k)
			stale = append(stale, e)
		}
	}
	return stale
}

// forget stops every Lab of cluster name: it is being rebuilt or set up
// again, and nothing they show holds any more.
func (s *Server) forgetLabs(name string) {
	s.labs.mu.Lock()
	stale := s.labs.takeStale(labKey{cluster: name, attempt: -1})
	s.labs.mu.Unlock()
	go stopEntries(stale)
}

// stopEntries stops the entries' Labs once they have started; their
// subscribers' sockets end with them.
func stopEntries(es []*labEntry) {
	for _, e := range es {
		<-e.ready
		if e.lab != nil {
			e.lab.Stop()
		}
	}
}

// runningLab returns the Lab of the attempt on cluster clusterName if one
// runs.
func (s *Server) runningLab(clusterName string, attemptID int64) *views.Lab {
	s.labs.mu.Lock()
	var e *labEntry
	for k, x := range s.labs.running {
		if k.cluster == clusterName && k.attempt == attemptID {
			e = x
		}
	}
	s.labs.mu.Unlock()
	if e == nil {
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
	all := make([]*labEntry, 0, len(s.labs.running))
	for _, e := range s.labs.running {
		if e.stop != nil {
			e.stop.Stop()
		}
		all = append(all, e)
	}
	s.labs.running = nil
	s.labs.closed = true
	s.labs.mu.Unlock()
	stopEntries(all)
}
