package labs

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/clustertest"
)

func TestNewRejectsBadConfig(t *testing.T) {
	p, l := clustertest.NewProvider(), newFakeLedger()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no provider", Config{Ledger: l, Prefix: "c", Capacity: 1}, "Provider"},
		{"no prefix", Config{Provider: p, Ledger: l, Capacity: 1}, "prefix"},
		{"long prefix", Config{Provider: p, Ledger: l, Prefix: strings.Repeat("c", MaxPrefixLength+1), Capacity: 1}, "prefix"},
		{"bad prefix", Config{Provider: p, Ledger: l, Prefix: "Class_1", Capacity: 1}, "prefix"},
		{"no capacity", Config{Provider: p, Ledger: l, Prefix: "c"}, "at least one lab"},
		{"negative pool", Config{Provider: p, Ledger: l, Prefix: "c", Capacity: 1, PoolSize: -1}, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestWarmPool(t *testing.T) {
	for _, tc := range []struct {
		name               string
		capacity, pool     int
		learners           int
		wantWarmAfterStart int
		wantReadyAtOnce    int // learners whose Request returned Ready
		wantWarmAfter      int
		wantCreated        int
	}{
		{"pool fills to its size", 5, 2, 0, 2, 0, 2, 2},
		{"pool never exceeds capacity", 2, 5, 0, 2, 0, 2, 2},
		{"learners take warm clusters and the pool refills", 5, 2, 2, 2, 2, 2, 4},
		{"no refill at capacity", 2, 2, 2, 2, 2, 0, 2},
		{"no pool: every start creates", 3, 0, 2, 0, 0, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{Capacity: tc.capacity, PoolSize: tc.pool, Shape: Shape{Workers: 2}})
			r.start()
			if got := r.m.Stats().Warm; got != tc.wantWarmAfterStart {
				t.Errorf("warm after start = %d, want %d", got, tc.wantWarmAfterStart)
			}
			readyAtOnce := 0
			for i := range tc.learners {
				l, err := r.m.Request(string(rune('a' + i)))
				if err != nil {
					t.Fatal(err)
				}
				if l.State == Ready {
					readyAtOnce++
					if l.Cluster == "" || l.ExpiresAt.IsZero() != true {
						t.Errorf("ready lab %+v", l)
					}
				}
			}
			r.m.settle()
			if readyAtOnce != tc.wantReadyAtOnce {
				t.Errorf("%d learners ready at once, want %d", readyAtOnce, tc.wantReadyAtOnce)
			}
			s := r.m.Stats()
			if s.Warm != tc.wantWarmAfter || s.Ready != tc.learners {
				t.Errorf("stats %+v: want %d warm, %d ready", s, tc.wantWarmAfter, tc.learners)
			}
			if len(r.p.Created) != tc.wantCreated {
				t.Errorf("created %d clusters, want %d", len(r.p.Created), tc.wantCreated)
			}
			for _, n := range r.p.Names() {
				if o := r.p.Options(n); o.Workers != 2 || !strings.HasPrefix(n, "cls1-") {
					t.Errorf("cluster %s made with %+v", n, o)
				}
			}
		})
	}
}

func TestLearnerTakesOverAPoolClusterBeingCreated(t *testing.T) {
	r := newRig(t, Config{Capacity: 2, PoolSize: 1})
	gate := r.p.SetGate()
	if err := r.m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.m.mu.Lock()
	var pool string
	for name := range r.m.creating {
		pool = name
	}
	r.m.mu.Unlock()
	l, err := r.m.Request("ann")
	if err != nil || l.State != Starting {
		t.Fatalf("Request = %+v, %v", l, err)
	}
	if l.Cluster != pool {
		t.Errorf("ann's cluster is %s: want the pool's %s, being created", l.Cluster, pool)
	}
	close(gate)
	r.m.settle()
	if l, _ := r.m.Lab("ann"); l.State != Ready {
		t.Errorf("ann's lab is %s", l.State)
	}
	// The pool refills behind her (capacity 2, one lab).
	if s := r.m.Stats(); s.Warm != 1 || len(r.p.Created) != 2 {
		t.Errorf("stats %+v, created %v", s, r.p.Created)
	}
}

func TestQueue(t *testing.T) {
	r := newRig(t, Config{Capacity: 1})
	r.start()
	for _, learner := range []string{"ann", "bob", "cid"} {
		if _, err := r.m.Request(learner); err != nil {
			t.Fatal(err)
		}
		r.m.settle()
	}
	r.m.settle()
	if l, _ := r.m.Lab("cid"); l.State != Queued || l.Position != 2 {
		t.Errorf("cid: %+v", l)
	}
	if _, err := r.m.Cluster("bob"); !errors.Is(err, ErrNoLab) || !strings.Contains(err.Error(), "number 1 in the queue") {
		t.Errorf("Cluster(bob) = %v", err)
	}
	// Asking again keeps the place.
	if l, _ := r.m.Request("bob"); l.Position != 1 {
		t.Errorf("bob asked again: %+v", l)
	}
	r.wantEvents("starting ann", "progress ann", "ready ann", "queued bob #1", "queued cid #2")

	if err := r.m.Release("ann"); err != nil {
		t.Fatal(err)
	}
	r.m.settle()
	r.wantEvents("ended ann", "starting bob", "position cid #1", "progress bob", "ready bob")
	if l, _ := r.m.Lab("cid"); l.State != Queued || l.Position != 1 {
		t.Errorf("cid: %+v", l)
	}
	// Leaving the queue moves the others up; nothing starts.
	if err := r.m.Release("cid"); err != nil {
		t.Fatal(err)
	}
	r.m.settle()
	r.wantEvents("ended cid")
	if got := r.p.Names(); len(got) != 1 {
		t.Errorf("clusters %v: want bob's only (ann's deleted)", got)
	}
	if err := r.m.Release("cid"); !errors.Is(err, ErrNoLab) {
		t.Errorf("released twice: %v", err)
	}
}

func TestExpiry(t *testing.T) {
	type step struct {
		at     time.Duration // since the lab became ready
		touch  bool
		extend time.Duration
		want   []string // events at this step: "warning 5m0s", "ended idle"...
	}
	for _, tc := range []struct {
		name            string
		timeLimit, idle time.Duration
		steps           []step
		wantEndState    State
	}{
		{"idle warnings then reclaim", time.Hour, 10 * time.Minute, []step{
			{at: 4 * time.Minute},
			{at: 5 * time.Minute, want: []string{"warning 5m0s"}},
			{at: 6 * time.Minute},
			{at: 9 * time.Minute, want: []string{"warning 1m0s"}},
			{at: 10 * time.Minute, want: []string{"ended idle"}},
		}, Ended},
		{"activity restarts the idle timeout and its warnings", time.Hour, 10 * time.Minute, []step{
			{at: 5 * time.Minute, want: []string{"warning 5m0s"}},
			{at: 6 * time.Minute, touch: true},
			{at: 11 * time.Minute, want: []string{"warning 5m0s"}},
			{at: 15*time.Minute + 30*time.Second, want: []string{"warning 30s"}},
			{at: 16 * time.Minute, want: []string{"ended idle"}},
		}, Ended},
		{"time limit despite activity", 20 * time.Minute, 10 * time.Minute, []step{
			{at: 8 * time.Minute, touch: true},
			{at: 15 * time.Minute, touch: true, want: []string{"warning 5m0s"}},
			{at: 19 * time.Minute, touch: true, want: []string{"warning 1m0s"}},
			{at: 20 * time.Minute, want: []string{"ended time limit"}},
		}, Ended},
		{"the instructor extends", 20 * time.Minute, 0, []step{
			{at: 15 * time.Minute, want: []string{"warning 5m0s"}},
			{at: 16 * time.Minute, extend: 30 * time.Minute, want: []string{"extended"}},
			{at: 20 * time.Minute},
			{at: 45 * time.Minute, want: []string{"warning 5m0s"}},
		}, Ready},
		{"no limits", 0, 0, []step{{at: 100 * time.Hour}}, Ready},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{Capacity: 1, PoolSize: 1, TimeLimit: tc.timeLimit, IdleTimeout: tc.idle})
			r.start()
			start := r.clock.Now()
			if l, err := r.m.Request("ann"); err != nil || l.State != Ready {
				t.Fatalf("Request = %+v, %v", l, err)
			}
			r.events()
			for _, s := range tc.steps {
				now := start.Add(s.at)
				r.clock.Advance(now.Sub(r.clock.Now()))
				if s.touch {
					r.m.Touch("ann")
				}
				var got []string
				if s.extend > 0 {
					if _, err := r.m.Extend("ann", s.extend); err != nil {
						t.Fatal(err)
					}
				}
				sub := r.m.Subscribe("ann", 10)
				r.m.Tick(now)
				r.m.settle()
				sub.Cancel()
				for e := range sub.C {
					switch e.Kind {
					case EventWarning:
						got = append(got, "warning "+e.In.String())
					case EventEnded:
						got = append(got, "ended "+e.Lab.Reason)
					default:
						got = append(got, string(e.Kind))
					}
				}
				if s.extend > 0 {
					got = append([]string{"extended"}, got...)
				}
				if !slices.Equal(got, s.want) {
					t.Errorf("at %s: events %q, want %q", s.at, got, s.want)
				}
				r.events()
			}
			if st := r.state("ann"); st != tc.wantEndState {
				t.Errorf("ann's lab is %s, want %s", st, tc.wantEndState)
			}
			if tc.wantEndState == Ended {
				if _, err := r.m.Cluster("ann"); err == nil || !strings.Contains(err.Error(), "start a new one") {
					t.Errorf("Cluster after reclaim: %v", err)
				}
				// The reclaimed cluster is gone; the pool refilled.
				if s := r.m.Stats(); s.Warm != 1 || len(r.p.Names()) != 1 || len(r.p.Deleted) != 1 {
					t.Errorf("after reclaim: %+v, clusters %v, deleted %v", s, r.p.Names(), r.p.Deleted)
				}
			}
		})
	}
}

func TestReclaimHandsTheLabToTheQueue(t *testing.T) {
	r := newRig(t, Config{Capacity: 1, PoolSize: 1, IdleTimeout: 10 * time.Minute})
	r.start()
	r.m.Request("ann")
	if l, _ := r.m.Request("bob"); l.State != Queued || l.Position != 1 {
		t.Fatalf("bob: %+v", l)
	}
	r.m.Tick(r.clock.Advance(5 * time.Minute))
	r.m.Touch("bob") // a queued learner's activity changes nothing
	r.m.Tick(r.clock.Advance(5 * time.Minute))
	r.m.settle()
	if r.state("ann") != Ended || r.state("bob") != Ready {
		t.Errorf("ann %s, bob %s", r.state("ann"), r.state("bob"))
	}
	// bob's lab has its own, full idle timeout.
	r.m.Tick(r.clock.Advance(9 * time.Minute))
	if r.state("bob") != Ready {
		t.Errorf("bob's lab was reclaimed early")
	}
	// ann starts again: she queues behind nobody but capacity is full.
	if l, _ := r.m.Request("ann"); l.State != Queued || l.Position != 1 {
		t.Errorf("ann again: %+v", l)
	}
}

func TestReset(t *testing.T) {
	r := newRig(t, Config{Capacity: 2, PoolSize: 1, TimeLimit: time.Hour})
	r.start()
	before, _ := r.m.Request("ann")
	r.m.settle()
	r.clock.Advance(10 * time.Minute)
	after, err := r.m.Reset("ann")
	if err != nil {
		t.Fatal(err)
	}
	r.m.settle()
	after, _ = r.m.Lab("ann")
	if after.State != Ready || after.Cluster == before.Cluster || !after.ExpiresAt.Equal(before.ExpiresAt) {
		t.Errorf("after reset %+v (before %+v): want a new cluster and the same deadline", after, before)
	}
	if !slices.Contains(r.p.Deleted, before.Cluster) {
		t.Errorf("old cluster %s not deleted: %v", before.Cluster, r.p.Deleted)
	}
	if _, err := r.m.Reset("bob"); !errors.Is(err, ErrNoLab) {
		t.Errorf("reset without a lab: %v", err)
	}
	if _, err := r.m.Extend("bob", time.Minute); !errors.Is(err, ErrNoLab) {
		t.Errorf("extend without a lab: %v", err)
	}
	if _, err := r.m.Extend("ann", -time.Minute); err == nil {
		t.Error("extend by a negative duration")
	}
}

func TestAdmission(t *testing.T) {
	need := uint64(DefaultLabMemory + DefaultReserveMemory)
	for _, tc := range []struct {
		name      string
		pool      int
		avail     uint64
		wantState State
		wantErr   string
	}{
		{"enough memory", 0, need, Starting, ""},
		{"short of memory", 0, need - 1, "", "short of memory right now (1111 MiB free, a new lab needs about 1112 MiB)"},
		{"short of memory but a warm cluster waits", 1, 0, Ready, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{Capacity: 3, PoolSize: tc.pool})
			r.start()
			r.mem.set(tc.avail)
			l, err := r.m.Request("ann")
			if tc.wantErr != "" {
				var me *MemoryError
				if !errors.As(err, &me) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if _, ok := r.m.Lab("ann"); ok {
					t.Error("a refused learner has a lab")
				}
				return
			}
			if err != nil || l.State != tc.wantState {
				t.Fatalf("Request = %+v, %v; want %s", l, err, tc.wantState)
			}
		})
	}
}

func TestAdmissionCountsClustersBeingCreated(t *testing.T) {
	r := newRig(t, Config{Capacity: 5})
	r.start()
	gate := r.p.SetGate()
	r.mem.set(DefaultLabMemory + DefaultReserveMemory + DefaultLabMemory/2)
	if l, err := r.m.Request("ann"); err != nil || l.State != Starting {
		t.Fatalf("ann: %+v, %v", l, err)
	}
	// ann's cluster will still take its 600 MiB.
	if _, err := r.m.Request("bob"); err == nil {
		t.Fatal("bob admitted while ann's cluster is still being created")
	}
	close(gate)
}

func TestQueueWaitsForMemory(t *testing.T) {
	r := newRig(t, Config{Capacity: 1})
	r.start()
	r.m.Request("ann")
	r.m.Request("bob")
	r.m.settle()
	r.events()
	r.mem.set(0)
	r.m.Release("ann")
	r.m.settle()
	if l, _ := r.m.Lab("bob"); l.State != Queued || l.Position != 1 || !strings.Contains(l.Reason, "short of memory") {
		t.Errorf("bob: %+v", l)
	}
	r.wantEvents("ended ann", "waiting bob")
	r.m.Tick(r.clock.Advance(time.Second))
	r.wantEvents() // said once
	r.mem.set(8 << 30)
	r.m.Tick(r.clock.Advance(time.Second))
	r.m.settle()
	if r.state("bob") != Ready {
		t.Errorf("bob's lab is %s once memory freed up", r.state("bob"))
	}
}

func TestCreateFailure(t *testing.T) {
	r := newRig(t, Config{Capacity: 2, PoolSize: 0})
	r.start()
	r.p.FailWith(errors.New("etcd did not start"))
	r.m.Request("ann")
	r.m.settle()
	l, _ := r.m.Lab("ann")
	if l.State != Failed || !strings.Contains(l.Reason, "etcd did not start") {
		t.Errorf("ann: %+v", l)
	}
	if owned, _ := r.ledger.Owned(context.Background()); len(owned) != 0 {
		t.Errorf("the ledger keeps %v", owned)
	}
	// Trying again works.
	if l, _ := r.m.Request("ann"); l.State != Starting {
		t.Errorf("again: %+v", l)
	}
	r.m.settle()
	if r.state("ann") != Ready {
		t.Errorf("ann's lab is %s", r.state("ann"))
	}
}

func TestPoolFailureBacksOff(t *testing.T) {
	r := newRig(t, Config{Capacity: 2, PoolSize: 1, RetryAfter: time.Minute})
	r.p.FailWith(errors.New("no images"))
	r.start()
	r.wantEvents("pool-error")
	r.m.Tick(r.clock.Advance(30 * time.Second))
	r.m.settle()
	if len(r.p.Created) != 1 {
		t.Errorf("retried before the back-off: %v", r.p.Created)
	}
	r.m.Tick(r.clock.Advance(30 * time.Second))
	r.m.settle()
	if s := r.m.Stats(); s.Warm != 1 {
		t.Errorf("after the back-off: %+v", s)
	}
}

func TestSweepAndClose(t *testing.T) {
	// A crashed run left cls1-aaaa (recorded) and cls1-bbbb (created, not
	// yet recorded... or its record lost); other-cccc and cls10-dddd are
	// not the class's.
	r := newRig(t, Config{Capacity: 3, PoolSize: 1}, "cls1-aaaa", "cls1-bbbb", "other-cccc", "cls10-dddd")
	r.ledger.Record(context.Background(), "cls1-aaaa")
	r.ledger.Record(context.Background(), "cls1-gone") // deleted by hand
	r.start()
	if got := r.p.Names(); len(got) != 3 || !slices.Contains(got, "other-cccc") || !slices.Contains(got, "cls10-dddd") {
		t.Errorf("after the sweep: %v", got)
	}
	r.m.Request("ann")
	r.m.Request("bob")
	r.p.SetGate() // cid's cluster hangs in creation
	if l, _ := r.m.Request("cid"); l.State != Starting {
		t.Fatalf("cid: %+v", l)
	}
	if err := r.m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := r.p.Names(); !slices.Equal(got, []string{"cls10-dddd", "other-cccc"}) {
		t.Errorf("after close: %v", got)
	}
	if owned, _ := r.ledger.Owned(context.Background()); len(owned) != 0 {
		t.Errorf("the ledger keeps %v", owned)
	}
	if _, err := r.m.Request("dan"); !errors.Is(err, ErrClosed) {
		t.Errorf("Request after close: %v", err)
	}
	if l, _ := r.m.Lab("ann"); l.State != Ended || l.Reason != ReasonClosed {
		t.Errorf("ann: %+v", l)
	}
}

func TestStreamsAreEachLearnersOwn(t *testing.T) {
	r := newRig(t, Config{Capacity: 1})
	r.start()
	ann := r.m.Subscribe("ann", 100)
	bob := r.m.Subscribe("bob", 100)
	r.m.Request("ann")
	r.m.Request("bob")
	r.m.settle()
	for name, s := range map[string]<-chan Event{"ann": ann.C, "bob": bob.C} {
		n := 0
		for len(s) > 0 {
			e := <-s
			n++
			if e.Learner != name || e.Lab.Learner != name {
				t.Errorf("%s's stream carries %+v", name, e)
			}
		}
		if n == 0 {
			t.Errorf("%s's stream is empty", name)
		}
	}
}

func TestProgressReachesTheLearner(t *testing.T) {
	r := newRig(t, Config{Capacity: 1})
	r.start()
	s := r.m.Subscribe("ann", 10)
	r.m.Request("ann")
	r.m.settle()
	var msgs []string
	for len(s.C) > 0 {
		e := <-s.C
		msgs = append(msgs, e.Message)
	}
	if !slices.Contains(msgs, "Starting etcd ...") {
		t.Errorf("messages %q", msgs)
	}
}

func TestShapeOptions(t *testing.T) {
	s := Shape{Workers: 2, ProxyMode: "iptables", NodeLabels: map[string]map[string]string{"worker": {"topology.kubernetes.io/zone": "a"}}}
	o := s.options("cls1-abcd", nil)
	if o.Name != "cls1-abcd" || o.Workers != 2 || o.ProxyMode != "iptables" || o.NodeLabels["cls1-abcd-worker"]["topology.kubernetes.io/zone"] != "a" {
		t.Errorf("options %+v", o)
	}
	if err := cluster.ValidateName("cls1-" + suffix()); err != nil {
		t.Error(err)
	}
}

func TestParseMemAvailable(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		err  string
	}{
		{"MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20480000 kB\n", 20480000 * 1024, ""},
		{"MemTotal: 1 kB\n", 0, "no MemAvailable"},
		{"MemAvailable: lots\n", 0, "unexpected"},
	} {
		got, err := parseMemAvailable([]byte(tc.in))
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("parse(%q) = %d, %v; want %d, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
	if v, err := ProcMeminfo("/proc/meminfo")(); err != nil || v == 0 {
		t.Errorf("/proc/meminfo: %d, %v", v, err)
	}
}

// TestStartServesDespiteAStuckLeftover: a leftover that cannot be deleted
// is reported and tried again in the background; the class is served
// meanwhile.
func TestStartServesDespiteAStuckLeftover(t *testing.T) {
	r := newRig(t, Config{Capacity: 2, SweepRetry: 10 * time.Millisecond}, "cls1-aaaa")
	r.ledger.Record(context.Background(), "cls1-aaaa")
	r.p.FailDelete("cls1-aaaa", errors.New("the cluster's network namespace is busy"))
	r.start()
	if l, err := r.m.Request("ann"); err != nil || l.State == Ended {
		t.Fatalf("a learner's lab while a leftover is stuck: %+v %v", l, err)
	}
	if !slices.Contains(r.p.Names(), "cls1-aaaa") {
		t.Fatal("the stuck leftover went although it cannot be deleted")
	}
	r.p.FailDelete("cls1-aaaa", nil)
	deadline := time.Now().Add(5 * time.Second)
	for slices.Contains(r.p.Names(), "cls1-aaaa") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if slices.Contains(r.p.Names(), "cls1-aaaa") {
		t.Error("the leftover was not swept once it could be")
	}
}
