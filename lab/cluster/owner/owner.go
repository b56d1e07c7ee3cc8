package owner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/flock"
	"github.com/svclab/svclab/lab/store"
)

// DefaultRootDir holds the claims of root's clusters: /run empties at boot,
// when no cluster runs any more.
const DefaultRootDir = "/run/svclab/owners"

// DefaultDir is where claims live: DefaultRootDir for root on Linux, the
// user's cache directory otherwise — one directory for all of a user's
// clusters, whatever state directory made them.
func DefaultDir() (string, error) {
	if runtime.GOOS == "linux" && os.Geteuid() == 0 {
		return DefaultRootDir, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding a directory for the clusters' claims: %w", err)
	}
	return filepath.Join(d, "svclab", "owners"), nil
}

// Claim says who holds a cluster.
type Claim struct {
	Backend string `json:"backend"`
	Cluster string `json:"cluster"`
	// Command is the holder in the words of its command line ("svclab
	// serve", "svclab exercise run"); PID is its process.
	Command string `json:"command"`
	PID     int    `json:"pid"`
	// StateDir is the holder's state directory.
	StateDir string `json:"stateDir,omitempty"`
	// Attempt is the attempt that holds the cluster for as long as it runs,
	// which may be longer than the process that started it. Nil: the
	// process holds the cluster while it runs.
	Attempt *Attempt  `json:"attempt,omitempty"`
	Since   time.Time `json:"since"`
	// ID tells this claim from a later one of the same cluster.
	ID string `json:"id"`
}

// Attempt is an attempt recorded in a database.
type Attempt struct {
	ID int64 `json:"id"`
	// Store is the database's location (a SQLite file or a PostgreSQL
	// URL), which another process opens to ask whether the attempt still
	// holds the cluster.
	Store    string `json:"store"`
	Scenario string `json:"scenario"`
	Learner  string `json:"learner,omitempty"`
}

func (a *Attempt) same(b *Attempt) bool {
	return a != nil && b != nil && a.ID == b.ID && a.Store == b.Store
}

// Same says whether a is attempt b (nil is no attempt).
func (a *Attempt) Same(b Attempt) bool { return a.same(&b) }

// Describe says who holds the cluster, for a person: "scenario
// selector-typo (attempt 5 of learner local), started by svclab serve (pid
// 1234, state directory /var/lib/svclab) at 2026-12-01 10:02:03".
func (c *Claim) Describe() string {
	where := fmt.Sprintf("pid %d", c.PID)
	if c.StateDir != "" {
		where += ", state directory " + c.StateDir
	}
	since := c.Since.Local().Format(time.DateTime)
	if c.Attempt == nil {
		return fmt.Sprintf("%s (%s) since %s", c.Command, where, since)
	}
	who := ""
	if c.Attempt.Learner != "" {
		who = " of learner " + c.Attempt.Learner
	}
	return fmt.Sprintf("scenario %s (attempt %d%s), started by %s (%s) at %s", c.Attempt.Scenario, c.Attempt.ID, who, c.Command, where, since)
}

// InUseError says that somebody else holds a cluster.
type InUseError struct {
	Claim Claim
	// TakenOver is set when the cluster was taken from the one asking
	// (Check): another process forced its way in.
	TakenOver bool
	// Unverified says why svclab could not tell whether the holder still
	// holds the cluster (it is then treated as holding it).
	Unverified error
}

func (e *InUseError) Error() string {
	s := fmt.Sprintf("cluster %s is in use by %s", e.Claim.Cluster, e.Claim.Describe())
	if e.TakenOver {
		s = fmt.Sprintf("cluster %s was taken over by %s", e.Claim.Cluster, e.Claim.Describe())
	}
	if e.Unverified != nil {
		s += fmt.Sprintf(" (svclab could not tell whether it still is: %v)", e.Unverified)
	}
	return s
}

// AttemptHolds says whether an attempt still holds its cluster.
type AttemptHolds func(ctx context.Context, a Attempt) (bool, error)

// Options configure a Registry.
type Options struct {
	// Dir holds the claims (default DefaultDir()).
	Dir string
	// Command and StateDir describe this process in its claims.
	Command, StateDir string
	// AttemptHolds asks whether an attempt still holds its cluster
	// (default: its database is asked, with lab/store).
	AttemptHolds AttemptHolds
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Registry is one process's view of the claims. One per process: it
// remembers the leases the process holds.
type Registry struct {
	opts Options
	mu   sync.Mutex
	// held are this process's lock files, by claim ID.
	held map[string]*os.File
}

// New returns the registry of the claims in o.Dir, which it creates.
func New(o Options) (*Registry, error) {
	if o.Dir == "" {
		d, err := DefaultDir()
		if err != nil {
			return nil, err
		}
		o.Dir = d
	}
	if o.Command == "" {
		o.Command = "svclab"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.AttemptHolds == nil {
		o.AttemptHolds = askStore
	}
	if o.StateDir != "" {
		if abs, err := filepath.Abs(o.StateDir); err == nil {
			o.StateDir = abs
		}
	}
	// Claims may name a database URL with its password: keep them to
	// their owner.
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("the clusters' claims %s: %w", o.Dir, err)
	}
	return &Registry{opts: o, held: map[string]*os.File{}}, nil
}

// Dir is where the claims are.
func (r *Registry) Dir() string { return r.opts.Dir }

// lockAll serialises the changes of claims, between processes.
func (r *Registry) lockAll() (func(), error) {
	return flock.Lock(filepath.Join(r.opts.Dir, ".lock"), 0o600)
}

func (r *Registry) recordPath(backend, name string) string {
	return filepath.Join(r.opts.Dir, backend, name+".json")
}

func (r *Registry) lockPath(c *Claim) string {
	return filepath.Join(r.opts.Dir, c.Backend, c.Cluster+"."+c.ID+".lock")
}

func validKey(backend, name string) error {
	for _, s := range []string{backend, name} {
		if s == "" || strings.ContainsAny(s, `/\.`) {
			return fmt.Errorf("claims: bad cluster key %q/%q", backend, name)
		}
	}
	return nil
}

// read returns the claim of the cluster, nil when there is none. A claim
// that cannot be read is no claim: nothing could ever free it otherwise.
func (r *Registry) read(backend, name string) *Claim {
	b, err := os.ReadFile(r.recordPath(backend, name))
	if err != nil {
		return nil
	}
	var c Claim
	if json.Unmarshal(b, &c) != nil || c.ID == "" || c.Cluster != name || c.Backend != backend {
		return nil
	}
	return &c
}

func (r *Registry) write(c *Claim) error {
	dir := filepath.Join(r.opts.Dir, c.Backend)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".claim-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), r.recordPath(c.Backend, c.Cluster))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("recording who uses cluster %s: %w", c.Cluster, err)
	}
	return nil
}

// live says whether c is still held.
func (r *Registry) live(ctx context.Context, c *Claim) (bool, error) {
	if c.Attempt != nil {
		return r.opts.AttemptHolds(ctx, *c.Attempt)
	}
	r.mu.Lock()
	_, mine := r.held[c.ID]
	r.mu.Unlock()
	return mine || flock.Held(r.lockPath(c)), nil
}

// askStore asks the attempt's database, briefly: a database that stays
// locked is reported, not waited for.
func askStore(ctx context.Context, a Attempt) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return store.AttemptHoldsCluster(ctx, a.Store, a.ID, store.Options{BusyTimeout: 2 * time.Second, RetryFor: -1})
}

// forget removes a stale claim and its lock file.
func (r *Registry) forget(c *Claim) {
	os.Remove(r.recordPath(c.Backend, c.Cluster))
	os.Remove(r.lockPath(c))
}

func newID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Acquire claims the cluster of c (its Backend and Cluster; Attempt when
// an attempt will hold it) for this process. When somebody else holds it
// Acquire returns an *InUseError, unless force: then the claim is taken
// over (its holder learns it at its next Check). The lease holds the
// cluster until it is released, closed after Bind, or this process ends.
func (r *Registry) Acquire(ctx context.Context, c Claim, force bool) (*Lease, error) {
	if err := validKey(c.Backend, c.Cluster); err != nil {
		return nil, err
	}
	unlock, err := r.lockAll()
	if err != nil {
		return nil, err
	}
	defer unlock()
	cur := r.read(c.Backend, c.Cluster)
	curLive := false
	if cur != nil && !cur.Attempt.same(c.Attempt) {
		live, cerr := r.live(ctx, cur)
		curLive = live || cerr != nil
		if curLive && !force {
			return nil, &InUseError{Claim: *cur, Unverified: cerr}
		}
	}
	c.PID, c.Since, c.ID = os.Getpid(), r.opts.Now(), newID()
	if c.Command == "" {
		c.Command = r.opts.Command
	}
	if c.StateDir == "" {
		c.StateDir = r.opts.StateDir
	}
	if err := os.MkdirAll(filepath.Join(r.opts.Dir, c.Backend), 0o700); err != nil {
		return nil, err
	}
	f, err := flock.TryLock(r.lockPath(&c), 0o600)
	if err != nil {
		return nil, fmt.Errorf("claiming cluster %s: %w", c.Cluster, err)
	}
	if err := r.write(&c); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	if cur != nil && !curLive {
		os.Remove(r.lockPath(cur))
	}
	r.mu.Lock()
	r.held[c.ID] = f
	r.mu.Unlock()
	return &Lease{r: r, claim: c}, nil
}

// Holder returns the claim that holds the cluster, nil when none does (a
// stale claim is removed on the way). When svclab cannot tell whether the
// holder still holds it, Holder returns the claim and the reason.
func (r *Registry) Holder(ctx context.Context, backend, name string) (*Claim, error) {
	if err := validKey(backend, name); err != nil {
		return nil, err
	}
	unlock, err := r.lockAll()
	if err != nil {
		return nil, err
	}
	defer unlock()
	return r.holder(ctx, backend, name)
}

func (r *Registry) holder(ctx context.Context, backend, name string) (*Claim, error) {
	cur := r.read(backend, name)
	if cur == nil {
		return nil, nil
	}
	live, err := r.live(ctx, cur)
	if err != nil {
		return cur, err
	}
	if !live {
		r.forget(cur)
		return nil, nil
	}
	return cur, nil
}

// Busy returns an *InUseError when somebody holds the cluster, nil when it
// is free or held by a lease of this registry (this process).
func (r *Registry) Busy(ctx context.Context, backend, name string) error {
	c, err := r.Holder(ctx, backend, name)
	if c == nil {
		return err
	}
	r.mu.Lock()
	_, mine := r.held[c.ID]
	r.mu.Unlock()
	if mine {
		return nil
	}
	return &InUseError{Claim: *c, Unverified: err}
}

// Check is for an attempt that holds its cluster: nil while its claim
// stands. A claim that vanished or went stale (the claims directory
// emptied at boot) is made again for a; one somebody took over is an
// *InUseError with TakenOver set.
func (r *Registry) Check(ctx context.Context, backend, name string, a Attempt) error {
	if err := validKey(backend, name); err != nil {
		return err
	}
	unlock, err := r.lockAll()
	if err != nil {
		return err
	}
	defer unlock()
	cur := r.read(backend, name)
	if cur != nil && cur.Attempt.same(&a) {
		return nil
	}
	if cur != nil {
		if live, err := r.live(ctx, cur); live || err != nil {
			return &InUseError{Claim: *cur, TakenOver: true, Unverified: err}
		}
		r.forget(cur)
	}
	c := Claim{Backend: backend, Cluster: name, Command: r.opts.Command, PID: os.Getpid(), StateDir: r.opts.StateDir,
		Attempt: &a, Since: r.opts.Now(), ID: newID()}
	return r.write(&c)
}

// ReleaseAttempt removes the claim of attempt a on the cluster, if it
// still stands: the attempt ended.
func (r *Registry) ReleaseAttempt(ctx context.Context, backend, name string, a Attempt) error {
	if err := validKey(backend, name); err != nil {
		return err
	}
	unlock, err := r.lockAll()
	if err != nil {
		return err
	}
	defer unlock()
	if cur := r.read(backend, name); cur != nil && cur.Attempt.same(&a) {
		r.forget(cur)
	}
	return nil
}

// List returns the claims that are held, by backend and cluster, removing
// stale ones. A claim whose holder svclab cannot ask is listed.
func (r *Registry) List(ctx context.Context) ([]Claim, error) {
	unlock, err := r.lockAll()
	if err != nil {
		return nil, err
	}
	defer unlock()
	backends, err := os.ReadDir(r.opts.Dir)
	if err != nil {
		return nil, err
	}
	var out []Claim
	for _, b := range backends {
		if !b.IsDir() {
			continue
		}
		files, _ := os.ReadDir(filepath.Join(r.opts.Dir, b.Name()))
		for _, f := range files {
			name, ok := strings.CutSuffix(f.Name(), ".json")
			if !ok || strings.HasPrefix(name, ".") {
				continue
			}
			if c, _ := r.holder(ctx, b.Name(), name); c != nil {
				out = append(out, *c)
			}
		}
		r.sweepLocks(b.Name())
	}
	slices.SortFunc(out, func(a, b Claim) int {
		return strings.Compare(a.Backend+"/"+a.Cluster, b.Backend+"/"+b.Cluster)
	})
	return out, nil
}

// sweepLocks removes the lock files of backend that no claim names and
// nobody holds (a process that was forced out and then died).
func (r *Registry) sweepLocks(backend string) {
	files, _ := os.ReadDir(filepath.Join(r.opts.Dir, backend))
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".lock") {
			continue
		}
		path := filepath.Join(r.opts.Dir, backend, f.Name())
		name, _, _ := strings.Cut(f.Name(), ".")
		if cur := r.read(backend, name); cur != nil && r.lockPath(cur) == path {
			continue
		}
		if !flock.Held(path) {
			os.Remove(path)
		}
	}
}

// Lease is a claim this process made.
type Lease struct {
	r     *Registry
	claim Claim
	once  sync.Once
}

// Claim is the lease's claim.
func (l *Lease) Claim() Claim { return l.claim }

// Bind makes attempt a the holder of the lease's claim: it holds the
// cluster from now on, beyond this process. It fails with an *InUseError
// when the claim was taken over meanwhile.
func (l *Lease) Bind(ctx context.Context, a Attempt) error {
	unlock, err := l.r.lockAll()
	if err != nil {
		return err
	}
	defer unlock()
	cur := l.r.read(l.claim.Backend, l.claim.Cluster)
	if cur == nil || cur.ID != l.claim.ID {
		if cur == nil {
			return fmt.Errorf("the claim on cluster %s vanished", l.claim.Cluster)
		}
		return &InUseError{Claim: *cur, TakenOver: true}
	}
	c := l.claim
	c.Attempt = &a
	if err := l.r.write(&c); err != nil {
		return err
	}
	l.claim = c
	return nil
}

// Release gives the cluster up: its claim is removed unless somebody took
// it over. Release and Close of a nil lease do nothing.
func (l *Lease) Release() error {
	if l == nil {
		return nil
	}
	unlock, err := l.r.lockAll()
	if err != nil {
		return err
	}
	defer unlock()
	if cur := l.r.read(l.claim.Backend, l.claim.Cluster); cur != nil && cur.ID == l.claim.ID {
		os.Remove(l.r.recordPath(l.claim.Backend, l.claim.Cluster))
	}
	l.close()
	return nil
}

// Close lets go of the process's lock and keeps the claim: after Bind,
// the attempt holds the cluster.
func (l *Lease) Close() error {
	if l == nil {
		return nil
	}
	l.close()
	return nil
}

func (l *Lease) close() {
	l.once.Do(func() {
		l.r.mu.Lock()
		f := l.r.held[l.claim.ID]
		delete(l.r.held, l.claim.ID)
		l.r.mu.Unlock()
		if f != nil {
			os.Remove(f.Name())
			f.Close()
		}
	})
}

// IsInUse reports whether err says a cluster is held by somebody else.
func IsInUse(err error) bool {
	var e *InUseError
	return errors.As(err, &e)
}
