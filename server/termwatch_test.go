package server

import (
	"bytes"
	"testing"
	"time"
)

func TestTaps(t *testing.T) {
	var tp taps
	key := tapKey("lab", "lab-worker")
	publish, end := tp.session(key)
	publish([]byte("$ kubectl get pods\r\n"))
	// A watcher that arrives late gets the recent output first.
	recent, out, stop := tp.watch(key)
	if string(recent) != "$ kubectl get pods\r\n" {
		t.Fatalf("recent %q", recent)
	}
	publish([]byte("No resources found\r\n"))
	select {
	case b := <-out:
		if string(b) != "No resources found\r\n" {
			t.Errorf("live %q", b)
		}
	case <-time.After(time.Second):
		t.Fatal("the watcher got nothing")
	}
	// Other nodes' and clusters' terminals are not mixed in.
	publish2, end2 := tp.session(tapKey("lab", "lab-worker2"))
	publish2([]byte("secret of worker2"))
	end2()
	select {
	case b := <-out:
		t.Errorf("the watcher of lab-worker got %q", b)
	default:
	}
	// A watcher that never reads does not hold the learner up, and the
	// recent output stays bounded.
	big := bytes.Repeat([]byte("x"), 1024)
	for i := 0; i < 4*recentOutput/len(big); i++ {
		publish(big)
	}
	if r, _, s := tp.watch(key); len(r) != recentOutput {
		t.Errorf("recent output is %d bytes, want %d", len(r), recentOutput)
	} else {
		s()
	}
	stop()
	end()
	if n := len(tp.m); n != 0 {
		t.Errorf("%d taps left after every session and watcher ended", n)
	}
}
