package server

import (
	"sync"
	"time"
)

// recentOutput is how much of a terminal's latest output a watcher that
// arrives late gets first (a screen or two).
const recentOutput = 32 << 10

// tapKeep is how long a node's recent output outlives the learner's last
// terminal on it: a learner whose page reloads (the lab came back, they
// pressed F5) gets a new shell, and the instructor still sees what they
// did before it.
const tapKeep = 30 * time.Minute

// newTerminalMark is what a watcher sees where a learner's terminal on a
// node started while output of an earlier one is still kept.
const newTerminalMark = "\r\n\x1b[2m[the learner opened a new terminal here]\x1b[0m\r\n"

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
	// idle is when the last session and watcher left (zero while any
	// is there).
	idle time.Time
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
	t.sweep(time.Now())
	tp := t.m[key]
	if tp == nil {
		tp = &tap{watchers: map[chan tapMsg]struct{}{}}
		t.m[key] = tp
	}
	return tp
}

// drop marks a tap nobody uses any more: one without output is forgotten
// at once, one with output after tapKeep (sweep).
func (t *taps) drop(key string, tp *tap) {
	if tp.sessions > 0 || len(tp.watchers) > 0 {
		return
	}
	if len(tp.recent) == 0 {
		delete(t.m, key)
		return
	}
	tp.idle = time.Now()
}

// sweep forgets the taps idle for longer than tapKeep at now. Called with
// t.mu held.
func (t *taps) sweep(now time.Time) {
	for key, tp := range t.m {
		if !tp.idle.IsZero() && now.Sub(tp.idle) > tapKeep {
			delete(t.m, key)
		}
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

// publish keeps b as recent output and passes it on. Called with t.mu
// held.
func (tp *tap) publish(b []byte) {
	tp.recent = append(tp.recent, b...)
	if over := len(tp.recent) - recentOutput; over > 0 {
		tp.recent = append(tp.recent[:0], tp.recent[over:]...)
	}
	tp.send(tapMsg{data: append([]byte(nil), b...)})
}

// session registers a learner's terminal on key; publish sends its output
// to the watchers, resize its new size (rows, cols), end unregisters it.
func (t *taps) session(key string) (publish func([]byte), resize func([2]uint16), end func()) {
	t.mu.Lock()
	tp := t.get(key)
	tp.sessions++
	tp.idle = time.Time{}
	if len(tp.recent) > 0 {
		tp.publish([]byte(newTerminalMark))
	}
	t.mu.Unlock()
	publish = func(b []byte) {
		t.mu.Lock()
		defer t.mu.Unlock()
		tp.publish(b)
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
	tp.idle = time.Time{}
	return append([]byte(nil), tp.recent...), tp.size, ch, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(tp.watchers, ch)
		t.drop(key, tp)
	}
}
