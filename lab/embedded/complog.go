package embedded

import (
	"fmt"
	"os"
	"sync"
)

// The control plane's own logs (logs/NAME.log: the supervisor's, each
// component's) are svclab's files, but what goes into them is the lab's to
// provoke: a learner's requests make the API server log. Each is rotated
// past componentLogMaxBytes, keeping componentLogFiles files in all
// (NAME.log, NAME.log.1, …), so that a lab's logs take at most
// componentLogFiles × componentLogMaxBytes per component of the host's disk.
const (
	componentLogMaxBytes = 4 << 20
	componentLogFiles    = 3
)

// rotatingLog appends to a log file and rotates it (see componentLogFiles).
// It is safe for concurrent writers, and the same log may outlive many
// runs of a component.
type rotatingLog struct {
	path     string
	maxBytes int64
	files    int

	mu   sync.Mutex
	f    *os.File
	size int64
}

// openRotatingLog opens path for appending, making it when missing.
func openRotatingLog(path string, maxBytes int64, files int) (*rotatingLog, error) {
	l := &rotatingLog{path: path, maxBytes: maxBytes, files: max(files, 1)}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *rotatingLog) open() error {
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.size = f, fi.Size()
	return nil
}

// Write appends p, rotating first when p would take the file past its
// size (a single write larger than the limit is cut to it).
func (l *rotatingLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	if int64(len(p)) > l.maxBytes {
		p = p[:l.maxBytes]
	}
	if l.size > 0 && l.size+int64(len(p)) > l.maxBytes {
		if err := l.rotateLocked(); err != nil {
			return 0, err
		}
	}
	w, err := l.f.Write(p)
	l.size += int64(w)
	if err != nil {
		return w, err
	}
	return n, nil
}

// rotateLocked moves NAME.log to NAME.log.1 (and each NAME.log.i to .i+1,
// dropping the oldest) and starts an empty NAME.log.
func (l *rotatingLog) rotateLocked() error {
	l.f.Close()
	if l.files == 1 {
		os.Remove(l.path)
	} else {
		os.Remove(fmt.Sprintf("%s.%d", l.path, l.files-1))
		for i := l.files - 2; i >= 1; i-- {
			os.Rename(fmt.Sprintf("%s.%d", l.path, i), fmt.Sprintf("%s.%d", l.path, i+1))
		}
		os.Rename(l.path, l.path+".1")
	}
	return l.open()
}

// Close closes the file.
func (l *rotatingLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}
