package web

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAssetsEmbedded checks that the binary carries the UI's bundles.
func TestAssetsEmbedded(t *testing.T) {
	for file, want := range map[string]string{
		"assets/dist/terminal.js":  "xterm",
		"assets/dist/terminal.css": ".xterm",
		"assets/dist/panels.js":    "rules/",
		"assets/dist/workspace.js": "svclab.workspace",
		"static/app.css":           "#panel-timeline",
	} {
		b, err := fs.ReadFile(Assets(), file)
		if err != nil {
			t.Errorf("%s is not embedded: %v (run go tool task assets)", file, err)
			continue
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %q", file, want)
		}
	}
}

// TestAssetsAreFresh rebuilds the bundles from web/assets/src and compares
// them with the committed ones, where the npm packages are installed (go
// tool task assets installs them and rebuilds).
func TestAssetsAreFresh(t *testing.T) {
	esbuild := filepath.Join("assets", "node_modules", ".bin", "esbuild")
	if _, err := os.Stat(esbuild); err != nil {
		t.Skip("the npm packages of web/assets are not installed (go tool task assets installs them)")
	}
	out := t.TempDir()
	cmd := exec.Command("node", "build.mjs", out)
	cmd.Dir = "assets"
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("esbuild: %v\n%s", err, b)
	}
	built, err := os.ReadDir(out)
	if err != nil || len(built) < 5 {
		t.Fatalf("esbuild made %d bundles (%v)", len(built), err)
	}
	for _, e := range built {
		f := e.Name()
		got, _ := os.ReadFile(filepath.Join("assets", "dist", f))
		want, _ := os.ReadFile(filepath.Join(out, f))
		if !bytes.Equal(got, want) {
			t.Errorf("web/assets/dist/%s is stale: run go tool task assets and commit the result", f)
		}
	}
}
