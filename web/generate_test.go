package web

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedFilesAreFresh fails when a *_templ.go file differs from what
// `templ generate` makes of its .templ file (run `go tool task generate`).
func TestGeneratedFilesAreFresh(t *testing.T) {
	templs, err := filepath.Glob("*.templ")
	if err != nil || len(templs) == 0 {
		t.Fatalf("no templ files found: %v", err)
	}
	tmp := t.TempDir()
	for _, f := range templs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "tool", "templ", "generate", "-path", tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("templ generate: %v\n%s", err, out)
	}
	for _, f := range templs {
		gen := strings.TrimSuffix(f, ".templ") + "_templ.go"
		want, err := os.ReadFile(filepath.Join(tmp, gen))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(gen)
		if err != nil {
			t.Fatalf("%s is missing: run go tool task generate", gen)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go tool task generate and commit the result", gen)
		}
	}
}
