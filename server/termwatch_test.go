package server

import (
	"bytes"
	"testing"
	"time"
)

func TestTaps(t *testing.T) {
	var tp taps
	key := tapKey("lab", "lab-worker")
	publish, resize, end := tp.session(key)
	resize([2]uint16{30, 120})
	publish([]byte("$ kubectl get pods\r\n"))
	// A watcher that arrives late gets the recent output and the
	// learner's size first.
	recent, size, out, stop := tp.watch(key)
	if string(recent) != "$ kubectl get pods\r\n" || size != [2]uint16{30, 120} {
		t.Fatalf("recent %q at %v", recent, size)
	}
	publish([]byte("No resources found\r\n"))
	resize([2]uint16{30, 120}) // unchanged: nothing to tell
	resize([2]uint16{40, 100})
	for _, want := range []tapMsg{{data: []byte("No resources found\r\n")}, {size: [2]uint16{40, 100}}} {
		select {
		case m := <-out:
			if string(m.data) != string(want.data) || m.size != want.size {
				t.Errorf("live %q %v, want %q %v", m.data, m.size, want.data, want.size)
			}
		case <-time.After(time.Second):
			t.Fatal("the watcher got nothing")
		}
	}
	// Other nodes' and clusters' terminals are not mixed in.
	publish2, resize2, end2 := tp.session(tapKey("lab", "lab-worker2"))
	publish2([]byte("secret of worker2"))
	resize2([2]uint16{10, 10})
	end2()
	select {
	case m := <-out:
		t.Errorf("the watcher of lab-worker got %q %v", m.data, m.size)
	default:
	}
	// A watcher that never reads does not hold the learner up, and the
	// recent output stays bounded.
	big := bytes.Repeat([]byte("x"), 1024)
	for i := 0; i < 4*recentOutput/len(big); i++ {
		publish(big)
	}
	if r, _, _, s := tp.watch(key); len(r) != recentOutput {
		t.Errorf("recent output is %d bytes, want %d", len(r), recentOutput)
	} else {
		s()
	}
	stop()
	end()
	// The learner's page reloads: their next terminal on the node comes
	// after what the last one showed, marked; a watcher gets both.
	publish, _, end = tp.session(key)
	publish([]byte("$ "))
	r, _, _, stop := tp.watch(key)
	if !bytes.HasSuffix(r, []byte("x"+newTerminalMark+"$ ")) {
		t.Errorf("recent output after a new terminal ends %q", r[len(r)-80:])
	}
	stop()
	end()
	// Kept for tapKeep, then forgotten; a tap that never had output at
	// once.
	_, _, end3 := tp.session(tapKey("lab", "lab-worker3"))
	end3()
	if _, ok := tp.m[tapKey("lab", "lab-worker3")]; ok {
		t.Error("a tap without output is kept")
	}
	tp.mu.Lock()
	tp.sweep(time.Now().Add(tapKeep - time.Minute))
	kept := len(tp.m)
	tp.sweep(time.Now().Add(tapKeep + time.Minute))
	left := len(tp.m)
	tp.mu.Unlock()
	if kept != 2 || left != 0 {
		t.Errorf("%d taps kept within tapKeep (want 2: lab-worker and lab-worker2), %d after it", kept, left)
	}
}
