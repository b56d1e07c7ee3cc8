package daemon

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestObjectsFileChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "objects.yaml")
	write := func(content string, mtime time.Time) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(tmp, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now().Add(-time.Hour)
	write("kind: A\n", t0)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f := &ObjectsFile{Path: path, last: sha256.Sum256([]byte("kind: A\n")), stat: st}

	steps := []struct {
		name    string
		content string
		mtime   time.Time
		want    bool
	}{
		{"the same file", "", time.Time{}, false},
		{"rewritten with the same content", "kind: A\n", t0.Add(time.Minute), false},
		{"rewritten again, unchanged", "", time.Time{}, false},
		{"new content of the same size", "kind: B\n", t0.Add(2 * time.Minute), true},
	}
	for _, s := range steps {
		if s.content != "" {
			write(s.content, s.mtime)
		}
		if got := f.changed(); got != s.want {
			t.Errorf("%s: changed() = %v, want %v", s.name, got, s.want)
		}
	}
}
