package server

import (
	"context"
	"net/http"
	"time"

	"github.com/svclab/svclab/lab/cluster"
)

// scope is whose lab a request works on. Without classes it is the one
// learner of a local lab, on any cluster; under /class/{class}/ it is one
// learner of a class, on that learner's lab cluster only — reached by the
// learner themselves, or read-only by the class's instructor.
type scope struct {
	learner  string
	attempts Attempts
	clusters clusterGetter
	// base prefixes the scenario routes ("" or "/class/ID"): pages link
	// and sockets connect under it.
	base string
	// owner marks the operations the scope starts, so that only it can
	// follow them ("" for the local lab).
	owner string
	// readOnly: the instructor watching a learner: no terminal input, no
	// checks, hints or resets.
	readOnly bool
	// classScenarios, when set, are the only scenarios the scope reaches
	// (a class's).
	classScenarios []string
	// activity records that the learner did something in their lab (typed
	// into its terminal), which keeps an idle lab alive.
	activity func()
	// writable, when set, tells whether the learner may still change their
	// lab (false once their exam is over); open terminals close when it
	// turns false.
	writable func(ctx context.Context) bool
	// deadline, when set, is when the learner's lab or exam ends (zero:
	// no limit); the strip counts down to it.
	deadline func() time.Time
}

type clusterGetter interface {
	Get(ctx context.Context, name string) (cluster.Cluster, error)
}

type scopeKey struct{}

func withScope(r *http.Request, sc *scope) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), scopeKey{}, sc))
}

// scopeOf is the request's scope: the class learner's set by the class
// routes, else the local lab's.
func (s *Server) scopeOf(r *http.Request) *scope {
	if sc, ok := r.Context().Value(scopeKey{}).(*scope); ok {
		return sc
	}
	return &scope{learner: s.learner(r), attempts: s.Attempts, clusters: s.Clusters}
}

// scenarioURL is the scenario's page in the scope.
func (sc *scope) scenarioURL(id string) string { return sc.base + "/scenarios/" + id }

// operationURL is an operation's page in the scope.
func (sc *scope) operationURL(id string) string { return sc.base + "/operations/" + id }
