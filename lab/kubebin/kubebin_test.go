package kubebin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeModule(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSourceKey(t *testing.T) {
	dir := t.TempDir()
	writeModule(t, dir, map[string]string{
		"go.mod":              "module " + modulePath + "\n",
		"go.sum":              "",
		"main.go":             "package main\n",
		"internal/x/x.go":     "package x\n",
		"README.md":           "not part of the key\n",
		"testdata/ignored.go": "package ignored\n",
	})
	key, err := SourceKey(dir, "go1.26.8")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(key, "v1.37.2-") || len(key) != len("v1.37.2-")+12 {
		t.Fatalf("key %q", key)
	}
	same := func(what string, f func()) {
		t.Helper()
		f()
		k, err := SourceKey(dir, "go1.26.8")
		if err != nil {
			t.Fatal(err)
		}
		if k != key {
			t.Errorf("%s changed the key", what)
		}
	}
	differs := func(what string, goVersion string, f func()) {
		t.Helper()
		f()
		k, err := SourceKey(dir, goVersion)
		if err != nil {
			t.Fatal(err)
		}
		if k == key {
			t.Errorf("%s did not change the key", what)
		}
		key = k
	}
	same("editing a README", func() { writeModule(t, dir, map[string]string{"README.md": "changed"}) })
	same("editing testdata", func() { writeModule(t, dir, map[string]string{"testdata/ignored.go": "package changed\n"}) })
	differs("editing a source file", "go1.26.8", func() { writeModule(t, dir, map[string]string{"internal/x/x.go": "package x // changed\n"}) })
	differs("adding a source file", "go1.26.8", func() { writeModule(t, dir, map[string]string{"y.go": "package main\n"}) })
	differs("editing go.sum", "go1.26.8", func() { writeModule(t, dir, map[string]string{"go.sum": "x v1 h1:y\n"}) })
	differs("another Go version", "go1.27.0", func() {})
}

func TestFindSource(t *testing.T) {
	root := t.TempDir()
	writeModule(t, root, map[string]string{"lab/kube/go.mod": "module " + modulePath + "\n\ngo 1.26\n"})
	deep := filepath.Join(root, "a", "b")
	os.MkdirAll(deep, 0o755)
	got, err := FindSource(deep)
	if err != nil || got != filepath.Join(root, "lab", "kube") {
		t.Fatalf("FindSource = %q, %v", got, err)
	}
	other := t.TempDir()
	writeModule(t, other, map[string]string{"lab/kube/go.mod": "module example.com/other\n"})
	if _, err := FindSource(other); err == nil {
		t.Fatal("found a module with another path")
	}
}

func TestLDFlags(t *testing.T) {
	got := LDFlags("v1.37.2", time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	for _, want := range []string{
		"-X 'k8s.io/component-base/version.gitVersion=v1.37.2'",
		"-X 'k8s.io/client-go/pkg/version.gitVersion=v1.37.2'",
		"-X 'k8s.io/component-base/version.gitMajor=1'",
		"-X 'k8s.io/component-base/version.gitMinor=37'",
		"-X 'k8s.io/client-go/pkg/version.buildDate=2026-11-30T12:00:00Z'",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("ldflags lack %s:\n%s", want, got)
		}
	}
}

func TestCountLines(t *testing.T) {
	in := "k8s.io/api/core/v1\nk8s.io/kubernetes/pkg/a\n# k8s.io/x\nx.go:1:2: undefined: y\nk8s.io/kubernetes/pkg/b\n"
	var reports []int
	n, tail := countLines(strings.NewReader(in), func(n int) { reports = append(reports, n) }, 0)
	if n != 3 {
		t.Errorf("counted %d packages, want 3", n)
	}
	if strings.Join(tail, "|") != "# k8s.io/x|x.go:1:2: undefined: y" {
		t.Errorf("tail %q", tail)
	}
	if len(reports) != 3 {
		t.Errorf("reports %v", reports)
	}
}

// A fake go command (a shell script) stands in for the toolchain: it
// prints two compiled packages and writes the -o file.
const fakeGo = `#!/bin/sh
[ -n "$LOG" ] && echo "$*" >> "$LOG"
case "$1" in
env) echo go1.26.8 ;;
list) printf 'a\nb\nc\n' ;;
build|test)
  cmd=$1; out=
  while [ $# -gt 0 ]; do
    if [ "$1" = -o ]; then out=$2; fi
    shift
  done
  [ "$cmd" = build ] && { echo example.com/a >&2; echo example.com/b >&2; }
  [ -n "$FAIL" ] && { echo "main.go:1:1: boom" >&2; exit 1; }
  if [ -n "$out" ]; then echo "$cmd binary" > "$out"; fi ;;
esac
`

func TestEnsure(t *testing.T) {
	src := t.TempDir()
	writeModule(t, src, map[string]string{"go.mod": "module " + modulePath + "\n", "main.go": "package main\n"})
	goBin := filepath.Join(t.TempDir(), "go")
	if err := os.WriteFile(goBin, []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	var steps []string
	b := &Builder{Source: src, CacheDir: cache, Go: goBin, Progress: recorder{&steps}}
	bin, err := b.Ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(bin); string(data) != "build binary\n" {
		t.Fatalf("binary %q", data)
	}
	info, err := Info(bin)
	if err != nil || info.Packages != 2 || info.Version != "v1.37.2" {
		t.Errorf("info %+v %v", info, err)
	}
	if cur, err := os.Readlink(filepath.Join(cache, "current")); err != nil || cur != filepath.Base(filepath.Dir(bin)) {
		t.Errorf("current -> %q, %v", cur, err)
	}
	if len(steps) != 1 || !strings.Contains(steps[0], "Building svclab-kube") {
		t.Errorf("steps %v", steps)
	}
	// Cached: no second build.
	steps = nil
	if again, err := b.Ensure(context.Background()); err != nil || again != bin || len(steps) != 0 {
		t.Errorf("second Ensure = %q, %v, steps %v", again, err, steps)
	}
	// A failing build reports the compiler's words and leaves no binary.
	writeModule(t, src, map[string]string{"main.go": "package main // changed\n"})
	t.Setenv("FAIL", "1")
	_, err = b.Ensure(context.Background())
	if err == nil || !strings.Contains(err.Error(), "main.go:1:1: boom") {
		t.Fatalf("failing build: %v", err)
	}
	matches, _ := filepath.Glob(filepath.Join(cache, "v*", BinaryName+"*"))
	if len(matches) != 1 {
		t.Errorf("binaries in cache after a failed build: %v", matches)
	}
}

// A test binary's dependencies are compiled by go build (whose package
// names are the progress), then go test -c links it from the cache.
func TestEnsureTestBinary(t *testing.T) {
	a := Artifact{Name: "e2e.test", Dir: "lab/conformance/e2e", Module: "example.com/e2e", Test: true, Cache: "e2e"}
	root := t.TempDir()
	src := filepath.Join(root, "lab", "conformance", "e2e")
	writeModule(t, src, map[string]string{"go.mod": "module example.com/e2e\n", "e2e_test.go": "package e2e\n"})
	if found, err := a.FindSource(filepath.Join(root, "lab")); err != nil || found != src {
		t.Fatalf("FindSource = %q, %v", found, err)
	}
	goBin := filepath.Join(t.TempDir(), "go")
	if err := os.WriteFile(goBin, []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "log")
	t.Setenv("LOG", log)
	var steps []string
	b := &Builder{Artifact: a, Source: src, CacheDir: t.TempDir(), Go: goBin, Progress: recorder{&steps}}
	bin, err := b.Ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(bin) != "e2e.test" {
		t.Errorf("built %s", bin)
	}
	if data, _ := os.ReadFile(bin); string(data) != "test binary\n" {
		t.Errorf("binary %q", data)
	}
	calls, _ := os.ReadFile(log)
	var build, test bool
	for _, line := range strings.Split(string(calls), "\n") {
		build = build || strings.HasPrefix(line, "build -v -trimpath a b c")
		test = test || strings.HasPrefix(line, "test -c -vet=off -trimpath") && strings.HasSuffix(line, " .")
	}
	if !build || !test {
		t.Errorf("go was called with:\n%s", calls)
	}
	if len(steps) != 1 || !strings.Contains(steps[0], "Building e2e.test") {
		t.Errorf("steps %v", steps)
	}
	if info, err := Info(bin); err != nil || info.Packages != 2 {
		t.Errorf("info %+v %v", info, err)
	}
}

type recorder struct{ steps *[]string }

func (r recorder) Start(step string) func(error) {
	*r.steps = append(*r.steps, step)
	return func(error) {}
}
func (r recorder) Infof(string, ...any) {}
