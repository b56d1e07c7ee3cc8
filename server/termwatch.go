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
	recent []byte
	// size is the learner's terminal's (rows, cols), zero until it says:
	// the learner's shell draws for that size (line editing, wrapping),
	// so a watcher shows its bytes at that size.
	size     [2]uint16
	sessions int
	watchers map[chan tapMsg]struct{}
}

// tapMsg is what a watcher gets: output, or the learner's new size.
type tapMsg struct {
	data []byte
	size [2]uint16
}

func tapKey(clusterName, node string) string { return clusterName + "\x00" + node }

func (t *taps) get(key string) *tap {
	if t.m == nil {
		t.m = map[string]*tap{}
	}
	tp := t.m[key]
	if tp == nil {
		tp = &tap{watchers: map[chan tapMsg]struct{}{}}
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

// send passes m to every watcher of tp; a slow watcher misses it rather
// than slowing the learner. Called with t.mu held.
func (tp *tap) send(m tapMsg) {
	for ch := range tp.watchers {
		select {
		case ch <- m:
		default:
		}
	}
}

// session registers a learner's terminal on key; publish sends its output
// to the watchers, resize its new size (rows, cols), end unregisters it.
func (t *taps) session(key string) (publish func([]byte), resize func([2]uint16), end func()) {
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
		tp.send(tapMsg{data: append([]byte(nil), b...)})
	}
	resize = func(sz [2]uint16) {
		t.mu.Lock()
		defer t.mu.Unlock()
		if sz == tp.size {
			return
		}
		tp.size = sz
		tp.send(tapMsg{size: sz})
	}
	end = func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		tp.sessions--
		t.drop(key, tp)
	}
	return publish, resize, end
}

// watch follows the terminals on key: the recent output and the learner's
// size (zero when unknown) first, then what follows; cancel stops.
func (t *taps) watch(key string) (recent []byte, size [2]uint16, out <-chan tapMsg, cancel func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tp := t.get(key)
	ch := make(chan tapMsg, 256)
	tp.watchers[ch] = struct{}{}
	return append([]byte(nil), tp.recent...), tp.size, ch, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(tp.watchers, ch)
		t.drop(key, tp)
	}
}
