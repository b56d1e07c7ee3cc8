package lab

import (
	"go/build"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The map in doc.go names every package under lab/ (those under
// lab/proxier have its README, lab/kube's internals their module), and
// every path it names exists.
func TestMapIsTrue(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || p == "." || p == "testdata" || strings.Contains(p, "/testdata") {
			return nil
		}
		pkg, err := build.ImportDir(p, 0)
		if err != nil || len(pkg.GoFiles) == 0 {
			return nil
		}
		if strings.HasPrefix(p, "proxier/") || strings.HasPrefix(p, "kube/") {
			return nil
		}
		if !strings.Contains(text, "lab/"+p) && !regexp.MustCompile(`(^|[\s(;,])`+regexp.QuoteMeta(p)+`([\s:;,)]|$)`).MatchString(text) {
			t.Errorf("the map in lab/doc.go does not name package lab/%s", p)
		}
		return nil
	})
	for _, m := range regexp.MustCompile(`\blab/[a-z][a-z0-9/]*[a-z0-9]`).FindAllString(text, -1) {
		if _, err := os.Stat(strings.TrimPrefix(m, "lab/")); err != nil {
			t.Errorf("the map in lab/doc.go names %s, which does not exist", m)
		}
	}
}

// Which may import which (doc.go): the domain reaches clusters only
// through lab/cluster, never a backend; lab/proxier imports nothing of
// svclab outside itself.
func TestImportRules(t *testing.T) {
	const module = "github.com/svclab/svclab/"
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}: {{join .Imports \" \"}}", "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, ": ")
		imports[pkg] = strings.Fields(deps)
	}
	reach := func(from string) map[string]bool {
		seen := map[string]bool{}
		var walk func(string)
		walk = func(p string) {
			for _, d := range imports[p] {
				if !seen[d] {
					seen[d] = true
					walk(d)
				}
			}
		}
		walk(from)
		return seen
	}
	for _, domain := range []string{"scenario", "faults", "grade", "session", "attempt", "class", "views", "store"} {
		for dep := range reach(module + "lab/" + domain) {
			if strings.HasPrefix(dep, module+"lab/embedded") || strings.HasPrefix(dep, module+"lab/kind") {
				t.Errorf("lab/%s reaches the backend %s", domain, strings.TrimPrefix(dep, module))
			}
		}
	}
	for pkg := range imports {
		if !strings.HasPrefix(pkg, module+"lab/proxier") || strings.HasPrefix(pkg, module+"lab/proxierctl") {
			continue
		}
		for _, dep := range imports[pkg] {
			if strings.HasPrefix(dep, module) && !strings.HasPrefix(dep, module+"lab/proxier/") && dep != module+"lab/proxier" {
				t.Errorf("%s imports %s: lab/proxier imports nothing of svclab outside itself", strings.TrimPrefix(pkg, module), strings.TrimPrefix(dep, module))
			}
		}
	}
	if len(imports) < 50 || !slices.Contains(imports[module+"lab/session"], module+"lab/cluster") {
		t.Errorf("go list gave %d packages, lab/session importing %v", len(imports), imports[module+"lab/session"])
	}
}
