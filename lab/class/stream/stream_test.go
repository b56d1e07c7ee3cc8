package stream

import (
	"testing"
)

func TestBroker(t *testing.T) {
	for _, tc := range []struct {
		name        string
		buffer      int
		filter      func(int) bool
		publish     []int
		wantGot     []int
		wantDropped int64
	}{
		{"all fit", 4, nil, []int{1, 2, 3}, []int{1, 2, 3}, 0},
		{"slow subscriber drops, keeps the oldest", 2, nil, []int{1, 2, 3, 4}, []int{1, 2}, 2},
		{"filter", 4, func(v int) bool { return v%2 == 0 }, []int{1, 2, 3, 4}, []int{2, 4}, 0},
		{"filtered values do not count as dropped", 1, func(v int) bool { return v > 2 }, []int{1, 2, 3, 4}, []int{3}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b Broker[int]
			s := b.Subscribe(tc.buffer, tc.filter)
			fast := b.Subscribe(100, nil)
			for _, v := range tc.publish {
				b.Publish(v) // never blocks, whatever the subscribers do
			}
			s.Cancel()
			var got []int
			for v := range s.C {
				got = append(got, v)
			}
			if len(got) != len(tc.wantGot) {
				t.Fatalf("got %v, want %v", got, tc.wantGot)
			}
			for i := range got {
				if got[i] != tc.wantGot[i] {
					t.Fatalf("got %v, want %v", got, tc.wantGot)
				}
			}
			if s.Dropped() != tc.wantDropped {
				t.Errorf("dropped %d, want %d", s.Dropped(), tc.wantDropped)
			}
			if len(fast.C) != len(tc.publish) {
				t.Errorf("the fast subscriber got %d of %d values", len(fast.C), len(tc.publish))
			}
			if b.Subscribers() != 1 {
				t.Errorf("%d subscribers after one cancelled, want 1", b.Subscribers())
			}
			s.Cancel() // twice is fine
			b.Close()
			if _, ok := <-b.Subscribe(1, nil).C; ok {
				t.Error("a subscription to a closed broker is open")
			}
		})
	}
}

// BenchmarkPublish publishes to 50 subscribers of which 10 never read:
// the cost of one update reaching a class's viewers.
func BenchmarkPublish(b *testing.B) {
	var br Broker[int]
	for i := range 50 {
		s := br.Subscribe(64, nil)
		if i < 40 {
			go func() {
				for range s.C {
				}
			}()
		}
	}
	b.ResetTimer()
	for i := range b.N {
		br.Publish(i)
	}
	b.StopTimer()
	br.Close()
}
