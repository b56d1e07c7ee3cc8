package ratelimit

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Limit is a token bucket's shape: Burst tokens at most, refilled at one
// token per Every.
type Limit struct {
	Every time.Duration
	Burst int
}

// Presets for the classroom's endpoints.
var (
	// Join allows a client address 5 join attempts at once and one more
	// every 12 s (5 a minute), which stops guessing join codes without
	// bothering a classroom that shares one NAT address for long.
	Join = Limit{Every: 12 * time.Second, Burst: 5}
	// Check allows a learner 3 checks at once and one more every 5 s: a
	// check runs probes on the learner's cluster and takes seconds.
	Check = Limit{Every: 5 * time.Second, Burst: 3}
)

type bucket struct {
	tokens float64
	last   time.Time
}

// Limiter keeps one token bucket per key. It is safe for concurrent use.
type Limiter struct {
	limit Limit
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
	calls   int
}

// New returns a Limiter; now is the clock (time.Now when nil).
func New(l Limit, now func() time.Time) *Limiter {
	if l.Burst < 1 {
		l.Burst = 1
	}
	if l.Every <= 0 {
		l.Every = time.Second
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{limit: l, now: now, buckets: map[string]*bucket{}}
}

// pruneEvery is how many calls pass between sweeps of full buckets, which
// bounds the memory that many distinct keys take.
const pruneEvery = 1024

// Allow takes a token from key's bucket. When the bucket is empty it
// returns false and how long until the next token.
func (l *Limiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.calls%pruneEvery == 0 {
		l.prune(now)
	}
	b := l.buckets[key]
	if b == nil {
		b = &bucket{tokens: float64(l.limit.Burst), last: now}
		l.buckets[key] = b
	}
	b.refill(now, l.limit)
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration(math.Ceil((1 - b.tokens) * float64(l.limit.Every)))
	return false, wait
}

// Wait is how long until key's bucket has a token, without taking one (0:
// it has one now).
func (l *Limiter) Wait(key string) time.Duration {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		return 0
	}
	b.refill(now, l.limit)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration(math.Ceil((1 - b.tokens) * float64(l.limit.Every)))
}

func (b *bucket) refill(now time.Time, l Limit) {
	if el := now.Sub(b.last); el > 0 {
		b.tokens = math.Min(float64(l.Burst), b.tokens+float64(el)/float64(l.Every))
		b.last = now
	}
}

// prune forgets buckets that have refilled completely: a new bucket for
// the key would be the same.
func (l *Limiter) prune(now time.Time) {
	for k, b := range l.buckets {
		b.refill(now, l.limit)
		if b.tokens >= float64(l.limit.Burst) {
			delete(l.buckets, k)
		}
	}
}

// Keys is the number of buckets held.
func (l *Limiter) Keys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// ClientIP keys a request by its remote address without the port.
func ClientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func tooMany(w http.ResponseWriter, wait time.Duration, what string) {
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	http.Error(w, fmt.Sprintf("Too many %s: try again in %d seconds.", what, secs), http.StatusTooManyRequests)
}

// FailuresMiddleware limits failed attempts only: a request whose answer
// is 400 Bad Request or 401 Unauthorized (a wrong join code, a wrong
// token) costs a token of its key's bucket, and a key with none left is
// refused with 429 before it is tried. The token is taken before the
// request is handled and given back when it succeeds, so N guesses sent
// at once cost N (a limiter that charged after the answer let them all
// through); attempts that succeed cost nothing, so a classroom joining at
// once from one address is not held up, while guessing codes is.
func FailuresMiddleware(l *Limiter, key func(*http.Request) string, what string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k := key(r)
			if k == "" {
				next.ServeHTTP(w, r)
				return
			}
			if ok, wait := l.Allow(k); !ok {
				tooMany(w, wait, what)
				return
			}
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			next.ServeHTTP(sw, r)
			if sw.status != http.StatusBadRequest && sw.status != http.StatusUnauthorized {
				l.Refund(k)
			}
		})
	}
}

// Refund gives back a token Allow took for key.
func (l *Limiter) Refund(key string) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.buckets[key]; b != nil {
		b.refill(now, l.limit)
		b.tokens = math.Min(float64(l.limit.Burst), b.tokens+1)
	}
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Middleware refuses requests whose key (from key; "" is never limited)
// has no token left with 429 Too Many Requests, a Retry-After header and
// what reports what was refused ("join attempts", "checks").
func Middleware(l *Limiter, key func(*http.Request) string, what string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k := key(r)
			if k != "" {
				if ok, wait := l.Allow(k); !ok {
					tooMany(w, wait, what)
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}
