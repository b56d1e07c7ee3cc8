package scenario

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
)

// FuzzLoad loads whatever a scenario file may hold — the built-in ones,
// and mutations of them — next to a manifest: the loader never panics,
// every problem names its file and says what is wrong, and a scenario it
// accepts has an id, a title and checks.
func FuzzLoad(f *testing.F) {
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..", "scenarios")
	for _, id := range []string{"selector-typo", "stale-dns-conntrack", "networkpolicy-and-or", "prefer-same-zone"} {
		b, err := os.ReadFile(filepath.Join(root, id, "scenario.yaml"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, seed := range []string{"", "id: x\n", "{", "id: [\n", "checks: *a\n", "a: &a [*a]\n", "title: \"\\u0000\"\n", strings.Repeat("- ", 1000)} {
		f.Add([]byte(seed))
	}
	web, err := os.ReadFile(filepath.Join(root, "selector-typo", "web.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		fsys := fstest.MapFS{
			"fuzzed/scenario.yaml": {Data: doc},
			"fuzzed/web.yaml":      {Data: web},
		}
		cat, problems := Load(Options{}, Source{FS: fsys, Display: "scenarios"})
		for _, p := range problems {
			if p.File == "" || strings.TrimSpace(p.Message) == "" {
				t.Fatalf("a problem without a file or a message: %+v", p)
			}
		}
		for _, s := range cat.Scenarios {
			if s.ID == "" || s.Title == "" || len(s.Checks) == 0 {
				t.Fatalf("accepted a scenario without an id, a title or checks: %+v", s)
			}
		}
	})
}
