package images

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDetectMirror(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"nothing", nil, DefaultMirror},
		{"one-line list", map[string]string{
			"sources.list": "# deb http://old.example/debian bookworm main\n" +
				"deb-src http://src.example/debian bookworm main\n" +
				"deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian/ bookworm main\n",
		}, "http://mirror.example/debian"},
		{"security first is skipped", map[string]string{
			"sources.list": "deb http://security.example/debian-security bookworm-security main\ndeb https://m.example/debian bookworm main\n",
		}, "https://m.example/debian"},
		{"deb822", map[string]string{
			"sources.list.d/debian.sources": "Types: deb\n# a comment\nURIs: http://deb.example.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\n" +
				"Types: deb\nURIs: http://deb.example.org/debian-security\nSuites: bookworm-security\nComponents: main\n",
		}, "http://deb.example.org/debian"},
		{"disabled deb822 and others", map[string]string{
			"sources.list.d/a.sources": "Types: deb\nEnabled: no\nURIs: http://off.example/debian\nSuites: bookworm\n",
			"sources.list.d/b.list":    "deb https://packages.cloud.example/apt cloud-sdk main\n",
			"sources.list.d/c.sources": "Types: deb-src deb\nURIs: http://on.example/debian\nSuites: bookworm\n",
		}, "http://on.example/debian"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				p := filepath.Join(dir, name)
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := DetectMirror(dir); got != tt.want {
				t.Errorf("DetectMirror = %q, want %q", got, tt.want)
			}
		})
	}
}
