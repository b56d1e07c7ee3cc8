package server

import "sync"

// recentOutput is how much of a terminal's latest output a watcher that
// arrives late gets first (a screen or two).
const recentOutput = 32 << 10

// taps fan the output of learners' terminals out to the instructor's
// read-only views of them, per cluster and node.
type taps struct {
	mu sync.Mutex
	m  map[string]*tap
}

type tap struct {
	recent   []byte
	sessions int
	watchers map[chan []byte]struct{}
}

func tapKey(clusterName, node string) string { return clusterName + "\x00" + node }

func (t *taps) get(key string) *tap {
	if t.m == nil {
		t.m = map[string]*tap{}
	}
	tp := t.m[key]
	if tp == nil {
		tp = &tap{watchers: map[chan []byte]struct{}{}}
		t.m[key] = tp
	}
	return tp
}

// drop forgets a tap nobody uses any more.
func (t *taps) drop(key string, tp *tap) {
	if tp.sessions == 0 && len(tp.watchers) == 0 {
		delete(t.m, key)
	}
}

// session registers a learner's terminal on key; publish sends its output
// to the watchers, end unregisters it.
func (t *taps) session(key string) (publish func([]byte), end func()) {
	t.mu.Lock()
	tp := t.get(key)
	tp.sessions++
	t.mu.Unlock()
	publish = func(b []byte) {
		t.mu.Lock()
		defer t.mu.Unlock()
		tp.recent = append(tp.recent, b...)
		if over := len(tp.recent) - recentOutput; over > 0 {
			tp.recent = append(tp.recent[:0], tp.recent[over:]...)
		}
		for ch := range tp.watchers {
			select {
			case ch <- append([]byte(nil), b...):
			default: // a slow watcher misses output rather than slowing the learner
			}
		}
	}
	end = func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		tp.sessions--
		t.drop(key, tp)
	}
	return publish, end
}

// watch follows the terminals on key: the recent output first, then what
// follows; cancel stops.
func (t *taps) watch(key string) (recent []byte, out <-chan []byte, cancel func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tp := t.get(key)
	ch := make(chan []byte, 256)
	tp.watchers[ch] = struct{}{}
	return append([]byte(nil), tp.recent...), ch, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(tp.watchers, ch)
		t.drop(key, tp)
	}
}
