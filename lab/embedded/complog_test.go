package embedded

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestRotatingLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kube-apiserver.log")
	l, err := openRotatingLog(path, 1000, 3)
	if err != nil {
		t.Fatal(err)
	}
	line := bytes.Repeat([]byte("x"), 99)
	line = append(line, '\n')
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 250 {
				if n, err := l.Write(line); err != nil || n != len(line) {
					t.Errorf("write: %d, %v", n, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// One write larger than the whole limit is cut to it.
	if n, err := l.Write(bytes.Repeat([]byte("y"), 5000)); err != nil || n != 5000 {
		t.Errorf("a large write: %d, %v", n, err)
	}
	l.Close()
	entries, _ := os.ReadDir(dir)
	var total int64
	for _, e := range entries {
		fi, _ := e.Info()
		total += fi.Size()
		if fi.Size() > 1000 {
			t.Errorf("%s has %d bytes, past the limit", e.Name(), fi.Size())
		}
	}
	if len(entries) != 3 || total > 3000 {
		t.Errorf("%d files, %d bytes; want 3 files of at most 1000 bytes", len(entries), total)
	}
	// Reopened, it goes on from the size on disk.
	l, err = openRotatingLog(path, 1000, 3)
	if err != nil {
		t.Fatal(err)
	}
	l.Write([]byte("z\n"))
	l.Close()
	if fi, _ := os.Stat(path); fi.Size() > 1000 {
		t.Errorf("reopened log grew to %d bytes", fi.Size())
	}
}
