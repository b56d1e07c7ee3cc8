package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Fault names, as used in logs, metrics labels and events.
const (
	SkipConntrackCleanup = "skip-conntrack-cleanup"
	StopSyncing          = "stop-syncing"
	SyncEvery            = "sync-every"
	OmitService          = "omit-service"
)

// State is the set of fault switches. The zero State has every fault off.
type State struct {
	SkipConntrackCleanup bool `json:"skipConntrackCleanup"`
	StopSyncing          bool `json:"stopSyncing"`
	// SyncEverySeconds > 0 limits syncs to one every N seconds.
	SyncEverySeconds int `json:"syncEverySeconds"`
	// OmitService is "namespace/name" of a Service left out of the rules.
	OmitService string `json:"omitService"`
}

// Active lists the names of the faults that are on.
func (s State) Active() []string {
	var out []string
	if s.SkipConntrackCleanup {
		out = append(out, SkipConntrackCleanup)
	}
	if s.StopSyncing {
		out = append(out, StopSyncing)
	}
	if s.SyncEverySeconds > 0 {
		out = append(out, SyncEvery)
	}
	if s.OmitService != "" {
		out = append(out, OmitService)
	}
	return out
}

// SyncInterval is SyncEverySeconds as a duration.
func (s State) SyncInterval() time.Duration {
	return time.Duration(s.SyncEverySeconds) * time.Second
}

// OmittedService returns the omitted Service's name, if any.
func (s State) OmittedService() (types.NamespacedName, bool) {
	if s.OmitService == "" {
		return types.NamespacedName{}, false
	}
	ns, name, _ := strings.Cut(s.OmitService, "/")
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

// Patch changes some switches; nil fields are left alone.
type Patch struct {
	SkipConntrackCleanup *bool   `json:"skipConntrackCleanup,omitempty"`
	StopSyncing          *bool   `json:"stopSyncing,omitempty"`
	SyncEverySeconds     *int    `json:"syncEverySeconds,omitempty"`
	OmitService          *string `json:"omitService,omitempty"`
}

func (p Patch) apply(s State) (State, error) {
	if p.SkipConntrackCleanup != nil {
		s.SkipConntrackCleanup = *p.SkipConntrackCleanup
	}
	if p.StopSyncing != nil {
		s.StopSyncing = *p.StopSyncing
	}
	if p.SyncEverySeconds != nil {
		if *p.SyncEverySeconds < 0 || *p.SyncEverySeconds > 3600 {
			return s, fmt.Errorf("syncEverySeconds %d out of range 0..3600", *p.SyncEverySeconds)
		}
		s.SyncEverySeconds = *p.SyncEverySeconds
	}
	if p.OmitService != nil {
		v := strings.TrimSpace(*p.OmitService)
		if v != "" {
			ns, name, ok := strings.Cut(v, "/")
			if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
				return s, fmt.Errorf("omitService %q: want namespace/name", v)
			}
		}
		s.OmitService = v
	}
	return s, nil
}

// Gauges receives the fault state for export as metrics.
type Gauges interface {
	SetFault(name string, on bool)
	SetSyncInterval(seconds int)
}

// Switches are the fault switches of one proxier. They are safe for
// concurrent use.
type Switches struct {
	mu        sync.Mutex
	state     State
	logger    *slog.Logger
	gauges    Gauges
	listeners []func(old, cur State)
}

// New returns switches with every fault off. gauges may be nil.
func New(logger *slog.Logger, gauges Gauges) *Switches {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Switches{logger: logger.With("component", "faults"), gauges: gauges}
	s.export(State{})
	return s
}

// State returns the current switches.
func (s *Switches) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// OnChange registers fn to be called (outside the lock) after every
// change, with the old and new state.
func (s *Switches) OnChange(fn func(old, cur State)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listeners = append(s.listeners, fn)
}

// Set applies p and returns the new state.
func (s *Switches) Set(ctx context.Context, p Patch) (State, error) {
	s.mu.Lock()
	old := s.state
	cur, err := p.apply(old)
	if err != nil {
		s.mu.Unlock()
		return old, err
	}
	s.state = cur
	listeners := append([]func(old, cur State){}, s.listeners...)
	s.mu.Unlock()

	if old != cur {
		s.logChange(ctx, old, cur)
		s.export(cur)
		for _, fn := range listeners {
			fn(old, cur)
		}
	}
	return cur, nil
}

// Reset turns every fault off.
func (s *Switches) Reset(ctx context.Context) State {
	f, zero, empty := false, 0, ""
	st, _ := s.Set(ctx, Patch{SkipConntrackCleanup: &f, StopSyncing: &f, SyncEverySeconds: &zero, OmitService: &empty})
	return st
}

func (s *Switches) logChange(ctx context.Context, old, cur State) {
	on := func(name string, was, is bool, detail ...any) {
		switch {
		case is && !was:
			s.logger.WarnContext(ctx, "FAULT ENABLED: "+name, detail...)
		case was && !is:
			s.logger.InfoContext(ctx, "fault disabled: "+name)
		}
	}
	on(SkipConntrackCleanup, old.SkipConntrackCleanup, cur.SkipConntrackCleanup, "effect", "stale UDP conntrack entries are no longer deleted")
	on(StopSyncing, old.StopSyncing, cur.StopSyncing, "effect", "rules are frozen; changes are not programmed")
	if old.SyncEverySeconds != cur.SyncEverySeconds {
		if cur.SyncEverySeconds > 0 {
			s.logger.WarnContext(ctx, "FAULT ENABLED: "+SyncEvery, "seconds", cur.SyncEverySeconds, "effect", "syncs are delayed")
		} else {
			s.logger.InfoContext(ctx, "fault disabled: "+SyncEvery)
		}
	}
	if old.OmitService != cur.OmitService {
		if cur.OmitService != "" {
			s.logger.WarnContext(ctx, "FAULT ENABLED: "+OmitService, "service", cur.OmitService, "effect", "the Service's rules are left out")
		} else {
			s.logger.InfoContext(ctx, "fault disabled: "+OmitService, "service", old.OmitService)
		}
	}
}

func (s *Switches) export(st State) {
	if s.gauges == nil {
		return
	}
	s.gauges.SetFault(SkipConntrackCleanup, st.SkipConntrackCleanup)
	s.gauges.SetFault(StopSyncing, st.StopSyncing)
	s.gauges.SetFault(SyncEvery, st.SyncEverySeconds > 0)
	s.gauges.SetFault(OmitService, st.OmitService != "")
	s.gauges.SetSyncInterval(st.SyncEverySeconds)
}

// Handler serves the switches: GET returns the state as JSON; POST (or
// PATCH) takes a JSON Patch, e.g. {"stopSyncing":true}, and returns the
// new state; DELETE turns every fault off.
func (s *Switches) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var st State
		switch r.Method {
		case http.MethodGet:
			st = s.State()
		case http.MethodPost, http.MethodPatch:
			var p Patch
			dec := json.NewDecoder(io.LimitReader(r.Body, 64*1024))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&p); err != nil && !errors.Is(err, io.EOF) {
				http.Error(w, fmt.Sprintf("bad fault patch: %v", err), http.StatusBadRequest)
				return
			}
			var err error
			if st, err = s.Set(r.Context(), p); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		case http.MethodDelete:
			st = s.Reset(r.Context())
		default:
			w.Header().Set("Allow", "GET, POST, PATCH, DELETE")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	})
}
