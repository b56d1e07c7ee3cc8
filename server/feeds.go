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

// feeds runs one views.Feed per attempt and life of its cluster while
// someone watches it, and stops it a while after the last viewer has gone
// — at once when the cluster is rebuilt or another attempt starts on it:
// a Feed of an old generation would show a cluster that is not there.
type feeds struct {
	mu      sync.Mutex
	running map[feedKey]*feedEntry
	linger  time.Duration
	closed  bool // the server stopped: no more Feeds
}

// feedKey names what a Feed watches: an attempt at a scenario on one
// generation of a cluster (cluster.Generation).
type feedKey struct {
	cluster, generation, scenario string
	attempt                       int64
}

type feedEntry struct {
	feed    *views.Feed
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

// pace is how much every running Feed stretches its probe and rule
// intervals: 1 while there are at most two Feeds per CPU, then in
// proportion (30 labs on 2 CPUs probe every 8 s instead of every second),
// so that the labs together leave the machine room to answer learners.
func (ls *feeds) pace() int {
	ls.mu.Lock()
	n := len(ls.running)
	ls.mu.Unlock()
	per := 2 * runtime.NumCPU()
	return max(1, (n+per-1)/per)
}

// acquireLab returns the running Feed of the attempt on generation gen
// of cluster c, starting it when nobody watches it yet; release gives it
// back. Feeds of other generations or attempts on the same cluster stop.
func (s *Server) acquireFeed(ctx context.Context, c cluster.Cluster, gen string, sc *scenario.Scenario, a *Attempt) (*views.Feed, func(), error) {
	attemptID := a.ID
	key := feedKey{cluster: c.Name(), generation: gen, scenario: sc.ID, attempt: attemptID}
	s.feeds.mu.Lock()
	if s.feeds.closed {
		s.feeds.mu.Unlock()
		return nil, nil, errors.New("the server is stopping")
	}
	if s.feeds.running == nil {
		s.feeds.running = map[feedKey]*feedEntry{}
	}
	e, ok := s.feeds.running[key]
	if !ok {
		stale := s.feeds.takeStale(key)
		e = &feedEntry{ready: make(chan struct{})}
		s.feeds.running[key] = e
		go func() {
			defer close(e.ready)
			stopEntries(stale)
			services, clients := scenarioServices(sc)
			cfg := views.Config{Cluster: c, Services: services, Clients: clients, Log: s.Log, Pace: s.feeds.pace,
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
			e.feed, e.err = views.Start(s.base(), cfg)
		}()
	}
	e.viewers++
	if e.stop != nil {
		e.stop.Stop()
		e.stop = nil
	}
	s.feeds.mu.Unlock()
	release := func() {
		s.feeds.mu.Lock()
		defer s.feeds.mu.Unlock()
		e.viewers--
		if e.viewers > 0 || s.feeds.closed {
			return
		}
		linger := s.feeds.linger
		if linger == 0 {
			linger = 30 * time.Second
		}
		e.stop = time.AfterFunc(linger, func() {
			s.feeds.mu.Lock()
			if e.viewers > 0 || s.feeds.running[key] != e {
				s.feeds.mu.Unlock()
				return
			}
			delete(s.feeds.running, key)
			s.feeds.mu.Unlock()
			stopEntries([]*feedEntry{e})
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
		s.feeds.mu.Lock()
		if s.feeds.running[key] == e {
			delete(s.feeds.running, key) // the next viewer tries again
		}
		s.feeds.mu.Unlock()
		return nil, nil, fmt.Errorf("watching cluster %s: %w", c.Name(), e.err)
	}
	return e.feed, release, nil
}

// takeStale removes the entries of key's cluster that are not key's (an
// older generation, another attempt) and returns them, to be stopped
// outside the lock. The caller holds ls.mu.
func (ls *feeds) takeStale(key feedKey) []*feedEntry {
	var stale []*feedEntry
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

// forget stops every Feed of cluster name: it is being rebuilt or set up
// again, and nothing they show holds any more.
func (s *Server) forgetLabs(name string) {
	s.feeds.mu.Lock()
	stale := s.feeds.takeStale(feedKey{cluster: name, attempt: -1})
	s.feeds.mu.Unlock()
	go stopEntries(stale)
}

// stopEntries stops the entries' Feeds once they have started; their
// subscribers' sockets end with them.
func stopEntries(es []*feedEntry) {
	for _, e := range es {
		<-e.ready
		if e.feed != nil {
			e.feed.Stop()
		}
	}
}

// runningLab returns the Feed of the attempt on cluster clusterName if one
// runs.
func (s *Server) runningFeed(clusterName string, attemptID int64) *views.Feed {
	s.feeds.mu.Lock()
	var e *feedEntry
	for k, x := range s.feeds.running {
		if k.cluster == clusterName && k.attempt == attemptID {
			e = x
		}
	}
	s.feeds.mu.Unlock()
	if e == nil {
		return nil
	}
	select {
	case <-e.ready:
		return e.feed
	default:
		return nil
	}
}

// stopLabs stops every Feed (the server is stopping).
func (s *Server) stopFeeds() {
	s.feeds.mu.Lock()
	all := make([]*feedEntry, 0, len(s.feeds.running))
	for _, e := range s.feeds.running {
		if e.stop != nil {
			e.stop.Stop()
		}
		all = append(all, e)
	}
	s.feeds.running = nil
	s.feeds.closed = true
	s.feeds.mu.Unlock()
	stopEntries(all)
}
