package labs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/class/stream"
)

func TestStartLimit(t *testing.T) {
	s := NewStartLimit(2)
	r1, err1 := s.Acquire(context.Background(), nil)
	r2, err2 := s.Acquire(context.Background(), nil)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	// Two more wait, first come first served; the fourth gives up.
	got := make(chan int, 2)
	aheads := make(chan int, 2)
	ctx4, cancel4 := context.WithCancel(context.Background())
	go func() {
		r, err := s.Acquire(context.Background(), func(n int) { aheads <- n })
		if err == nil {
			r()
			got <- 3
		}
	}()
	if n := <-aheads; n != 2 {
		t.Errorf("the third waits behind %d, want 2", n)
	}
	errs := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx4, func(n int) { aheads <- n })
		errs <- err
	}()
	if n := <-aheads; n != 3 {
		t.Errorf("the fourth waits behind %d, want 3", n)
	}
	cancel4()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Errorf("the fourth, given up: %v", err)
	}
	select {
	case <-got:
		t.Fatal("the third started while two ran")
	case <-time.After(20 * time.Millisecond):
	}
	r1()
	if n := <-got; n != 3 {
		t.Fatal(n)
	}
	r2()
	// Both slots are free again: two more start without waiting.
	for range 2 {
		r, err := s.Acquire(context.Background(), func(n int) { t.Errorf("waited behind %d after every release", n) })
		if err != nil {
			t.Fatal(err)
		}
		defer r()
	}
}

// Labs start StartLimit's number at a time, across managers sharing it;
// a learner whose cluster waits is told so.
func TestStartsAreLimited(t *testing.T) {
	starts := NewStartLimit(1)
	r := newRig(t, Config{Capacity: 3, Starts: starts})
	other := newRig(t, Config{Capacity: 1, Starts: starts, Prefix: "cls2"})
	gate := r.p.SetGate()
	other.p.SetGate()
	r.start()
	other.start()
	for _, learner := range []string{"ann", "bob"} {
		if l, err := r.m.Request(learner); err != nil || l.State != Starting {
			t.Fatalf("%s: %+v, %v", learner, l, err)
		}
	}
	// Ann's or Bob's cluster, whichever asked second, waits.
	waitMessage(t, "ann or bob", r.all, "this machine creates 1 clusters at once, and 1 are starting before yours")
	if _, err := other.m.Request("cid"); err != nil {
		t.Fatal(err)
	}
	waitMessage(t, "cid", other.all, "this machine creates 1 clusters at once, and 2 are starting before yours")
	time.Sleep(20 * time.Millisecond)
	if created := append(r.p.Names(), other.p.Names()...); len(created) != 1 {
		t.Fatalf("clusters being created at once: %v, want 1", created)
	}
	close(gate)
	r.m.settle()
	if r.state("ann") != Ready || r.state("bob") != Ready {
		t.Errorf("ann %s, bob %s", r.state("ann"), r.state("bob"))
	}
	if other.state("cid") != Starting {
		t.Errorf("cid %s, want starting (held by his provider's gate)", other.state("cid"))
	}
}

// waitMessage waits for a message on sub that contains want.
func waitMessage(t *testing.T, who string, sub *stream.Subscription[Event], want string) {
	t.Helper()
	var msgs []string
	for {
		select {
		case e := <-sub.C:
			if strings.Contains(e.Message, want) {
				return
			}
			msgs = append(msgs, e.Message)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s was not told %q: %q", who, want, msgs)
		}
	}
}
