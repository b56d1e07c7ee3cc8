package kubebin

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/svclab/svclab/lab/flock"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/svclab/svclab/lab/cluster"
)

// BinaryName is the file name of the multi-call binary.
const BinaryName = "svclab-kube"

// EnvBinary names an environment variable that points at a prebuilt
// svclab-kube; it wins over everything else.
const EnvBinary = "SVCLAB_KUBE_BIN"

// EnvCacheDir overrides the cache directory.
const EnvCacheDir = "SVCLAB_CACHE_DIR"

// modulePath is the module path of the lab/kube module.
const modulePath = "github.com/svclab/svclab/lab/kube"

// Artifact is a program svclab builds from a Go module of its own source
// tree into the per-user cache, keyed by the module's sources: svclab-kube,
// or the conformance suite's test binary.
type Artifact struct {
	// Name is the built file's name.
	Name string
	// Dir is the module's directory in the svclab tree, Module its path.
	Dir, Module string
	// Test builds the module's test binary (go test -c) rather than its
	// program.
	Test bool
	// Cache is the artifact's directory in svclab's cache.
	Cache string
	// Env names an environment variable pointing at a prebuilt file,
	// which wins over everything else.
	Env string
	// Cold is how long a cold build takes, for the progress line.
	Cold string
}

var (
	// Kube is svclab-kube, the Kubernetes components (lab/kube).
	Kube = Artifact{Name: BinaryName, Dir: "lab/kube", Module: modulePath, Cache: "kube", Env: EnvBinary,
		Cold: "10-35 minutes on 2 cores"}
	// E2E is upstream Kubernetes' end-to-end suite cut to its
	// [sig-network] specs (lab/conformance/e2e), which svclab's
	// conformance run drives.
	E2E = Artifact{Name: "e2e.test", Dir: "lab/conformance/e2e", Module: "github.com/svclab/svclab/lab/conformance/e2e",
		Test: true, Cache: "e2e", Env: "SVCLAB_E2E_BIN", Cold: "about 15 minutes on 2 cores after svclab-kube"}
)

// BuildInfo is stored next to each cached binary.
type BuildInfo struct {
	Version   string        `json:"version"`
	Key       string        `json:"key"`
	GoVersion string        `json:"goVersion"`
	Built     time.Time     `json:"built"`
	Duration  time.Duration `json:"duration"`
	// Packages is the number of packages the build compiled (0 when all
	// came from Go's build cache).
	Packages int `json:"packages"`
}

// DefaultCacheDir is svclab-kube's cache directory (Kube.CacheDir).
func DefaultCacheDir() (string, error) { return Kube.CacheDir() }

// CacheDir is $SVCLAB_CACHE_DIR/CACHE, or svclab/CACHE in the user's cache
// directory.
func (a Artifact) CacheDir() (string, error) {
	if d := os.Getenv(EnvCacheDir); d != "" {
		return filepath.Join(d, a.Cache), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the user cache directory: %w (set %s)", err, EnvCacheDir)
	}
	return filepath.Join(d, "svclab", a.Cache), nil
}

// FindSource finds the lab/kube module above dir (Kube.FindSource).
func FindSource(dir string) (string, error) { return Kube.FindSource(dir) }

// FindSource walks up from dir looking for the artifact's module and
// returns its directory.
func (a Artifact) FindSource(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		cand := filepath.Join(dir, filepath.FromSlash(a.Dir))
		if b, err := os.ReadFile(filepath.Join(cand, "go.mod")); err == nil && bytes.Contains(b, []byte("module "+a.Module+"\n")) {
			return cand, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no %s module found above the current directory", a.Dir)
		}
		dir = parent
	}
}

// SourceKey returns the cache key of the module in dir: the Kubernetes
// version followed by a hash of go.mod, go.sum, every .go file and the Go
// version that builds it.
func SourceKey(dir, goVersion string) (string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != dir && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") || name == "go.mod" || name == "go.sum" {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", dir, err)
	}
	sort.Strings(files)
	h := sha256.New()
	fmt.Fprintf(h, "go=%s\n", goVersion)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(dir, f)
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(rel), len(b))
		h.Write(b)
	}
	return cluster.KubernetesVersion + "-" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// Builder builds an artifact into the cache.
type Builder struct {
	// Artifact is what to build; Kube when zero.
	Artifact Artifact
	// Source is the artifact's module directory.
	Source string
	// CacheDir holds one directory per key.
	CacheDir string
	// Go is the go command; "go" when empty.
	Go string
	// Progress receives the build's progress.
	Progress cluster.Progress
	// ProgressEvery is how often a progress line is written during the
	// compile; 15s when zero.
	ProgressEvery time.Duration
	// GoCache, when set, is the GOCACHE the build uses.
	GoCache string
}

func (b *Builder) art() Artifact {
	if b.Artifact.Name == "" {
		return Kube
	}
	return b.Artifact
}

// MeasureCold builds svclab-kube from scratch — with an empty Go build
// cache, into a scratch directory, leaving the cached binary alone — and
// records the time as the last cold build.
func (b *Builder) MeasureCold(ctx context.Context) (BuildInfo, error) {
	goVersion, err := b.goVersion(ctx)
	if err != nil {
		return BuildInfo{}, err
	}
	if err := os.MkdirAll(b.CacheDir, 0o755); err != nil {
		return BuildInfo{}, err
	}
	scratch, err := os.MkdirTemp(b.CacheDir, "cold-")
	if err != nil {
		return BuildInfo{}, err
	}
	defer os.RemoveAll(scratch)
	cold := *b
	cold.CacheDir = scratch
	cold.GoCache = filepath.Join(scratch, "gocache")
	done := cluster.OrNop(b.Progress).Start(fmt.Sprintf("Building %s from scratch with an empty Go build cache (%s)", b.art().Name, b.art().Cold))
	info, err := cold.build(ctx, "cold", goVersion)
	done(err)
	if err != nil {
		return info, err
	}
	data, _ := json.MarshalIndent(info, "", "  ")
	return info, os.WriteFile(filepath.Join(b.CacheDir, "cold-build.json"), data, 0o644)
}

func (b *Builder) goCmd() string {
	if b.Go == "" {
		return "go"
	}
	return b.Go
}

// Path returns where the binary for key lives in the cache.
func (b *Builder) Path(key string) string { return filepath.Join(b.CacheDir, key, b.art().Name) }

// Ensure returns the cached binary for the current sources, building it
// first when it is missing.
func (b *Builder) Ensure(ctx context.Context) (string, error) {
	p := cluster.OrNop(b.Progress)
	goVersion, err := b.goVersion(ctx)
	if err != nil {
		return "", err
	}
	key, err := SourceKey(b.Source, goVersion)
	if err != nil {
		return "", err
	}
	bin := b.Path(key)
	if _, err := os.Stat(bin); err == nil {
		return bin, b.linkCurrent(key)
	}
	if err := os.MkdirAll(b.CacheDir, 0o755); err != nil {
		return "", fmt.Errorf("cannot create the cache directory %s: %w (set %s to a writable directory)", b.CacheDir, err, EnvCacheDir)
	}
	unlock, err := flock.Lock(filepath.Join(b.CacheDir, ".build.lock"), 0o644)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil { // built by someone else while we waited
		return bin, b.linkCurrent(key)
	}
	done := p.Start(fmt.Sprintf("Building %s %s from source (cold: %s, cached afterwards)", b.art().Name, cluster.KubernetesVersion, b.art().Cold))
	info, err := b.build(ctx, key, goVersion)
	done(err)
	if err != nil {
		return "", err
	}
	p.Infof("built %s in %s (%d packages compiled)", bin, info.Duration.Round(time.Second), info.Packages)
	return bin, b.linkCurrent(key)
}

func (b *Builder) goVersion(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, b.goCmd(), "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("the Go toolchain is needed to build %s: %w", b.art().Name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// LDFlags stamps the Kubernetes version into the binary, as the upstream
// build does, so that kubectl version and /version report it.
func LDFlags(version string, buildDate time.Time) string {
	major, minor := "", ""
	if parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3); len(parts) >= 2 {
		major, minor = parts[0], parts[1]
	}
	var flags []string
	for _, pkg := range []string{"k8s.io/client-go/pkg/version", "k8s.io/component-base/version"} {
		for _, kv := range [][2]string{
			{"gitVersion", version},
			{"gitMajor", major},
			{"gitMinor", minor},
			{"gitTreeState", "clean"},
			{"buildDate", buildDate.UTC().Format("2006-01-02T15:04:05Z")},
		} {
			flags = append(flags, fmt.Sprintf("-X '%s.%s=%s'", pkg, kv[0], kv[1]))
		}
	}
	return "-s -w " + strings.Join(flags, " ")
}

func (b *Builder) build(ctx context.Context, key, goVersion string) (BuildInfo, error) {
	start := time.Now()
	total := b.countPackages(ctx)
	dir := filepath.Join(b.CacheDir, key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return BuildInfo{}, err
	}
	tmp := filepath.Join(dir, b.art().Name+".tmp")
	ldflags := LDFlags(cluster.KubernetesVersion, start)
	// go build -v names each package it compiles, which is the progress;
	// go test -c names none, so a test binary's dependencies are compiled
	// by a go build first and the test binary is linked from the cache.
	args := []string{"build", "-v", "-trimpath", "-ldflags", ldflags, "-o", tmp, "."}
	if b.art().Test {
		args = append([]string{"build", "-v", "-trimpath"}, b.testDeps(ctx)...)
	}
	compiled, err := b.goBuild(ctx, start, total, args)
	if err == nil && b.art().Test {
		// go test vets what it builds, and vet needs facts of every dependency:
		// minutes over the e2e suite's thousands of packages, for nothing here.
		_, err = b.goBuild(ctx, start, total, []string{"test", "-c", "-vet=off", "-trimpath", "-ldflags", ldflags, "-o", tmp, "."})
	}
	if err != nil {
		os.Remove(tmp)
		return BuildInfo{}, err
	}
	if err := os.Rename(tmp, b.Path(key)); err != nil {
		return BuildInfo{}, err
	}
	info := BuildInfo{Version: cluster.KubernetesVersion, Key: key, GoVersion: goVersion, Built: start, Duration: time.Since(start), Packages: compiled}
	data, _ := json.MarshalIndent(info, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "build.json"), data, 0o644); err != nil {
		return info, err
	}
	if compiled >= coldThreshold {
		// Most packages were compiled, not taken from Go's build cache:
		// remember this as the last cold build.
		if err := os.WriteFile(filepath.Join(b.CacheDir, "cold-build.json"), data, 0o644); err != nil {
			return info, err
		}
	}
	return info, nil
}

// goBuild runs the go command with args in the module, counting the
// packages it names on its standard error, and returns that count; an error
// carries the compiler's last words.
func (b *Builder) goBuild(ctx context.Context, start time.Time, total int, args []string) (int, error) {
	p := cluster.OrNop(b.Progress)
	cmd := exec.CommandContext(ctx, b.goCmd(), args...)
	cmd.Dir = b.Source
	if b.GoCache != "" {
		cmd.Env = append(os.Environ(), "GOCACHE="+b.GoCache)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting go %s: %w", args[0], err)
	}
	every := b.ProgressEvery
	if every == 0 {
		every = 15 * time.Second
	}
	compiled, tail := countLines(stderr, func(n int) {
		p.Infof("compiled %s packages (%s elapsed)", ofTotal(n, total), time.Since(start).Round(time.Second))
	}, every)
	if err := cmd.Wait(); err != nil {
		return compiled, fmt.Errorf("go %s in %s failed: %w\n%s", args[0], b.Source, err, strings.Join(tail, "\n"))
	}
	return compiled, nil
}

// testDeps lists the packages a test binary of the module is linked from,
// but for the module's own test-only package and the standard library.
func (b *Builder) testDeps(ctx context.Context) []string {
	cmd := exec.CommandContext(ctx, b.goCmd(), "list", "-deps", "-test", "-f",
		`{{if not (or .Standard .ForTest (eq .Name "main") (eq .ImportPath "`+b.art().Module+`"))}}{{.ImportPath}}{{end}}`, ".")
	cmd.Dir = b.Source
	out, err := cmd.Output()
	if err != nil {
		return []string{"."} // let go build say what is wrong
	}
	return strings.Fields(string(out))
}

// coldThreshold is how many compiled packages make a build count as cold
// (a full build compiles a few thousand).
const coldThreshold = 1000

// LastColdBuild returns the record of the last cold build in cacheDir.
func LastColdBuild(cacheDir string) (BuildInfo, error) {
	var info BuildInfo
	b, err := os.ReadFile(filepath.Join(cacheDir, "cold-build.json"))
	if err != nil {
		return info, err
	}
	return info, json.Unmarshal(b, &info)
}

func ofTotal(n, total int) string {
	if total <= 0 {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d of at most %d", n, total)
}

// countPackages counts the packages the build may compile; 0 when unknown.
func (b *Builder) countPackages(ctx context.Context) int {
	args := []string{"list", "-deps", "."}
	if b.art().Test {
		args = []string{"list", "-deps", "-test", "."}
	}
	cmd := exec.CommandContext(ctx, b.goCmd(), args...)
	cmd.Dir = b.Source
	out, err := cmd.Output()
	if err != nil {
		return 0
	}
	return bytes.Count(out, []byte("\n"))
}

// countLines counts lines from r, calling report at most every interval, and
// returns the count and the last lines (for error messages).
func countLines(r io.Reader, report func(int), every time.Duration) (int, []string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	n := 0
	var tail []string
	last := time.Now()
	for sc.Scan() {
		line := sc.Text()
		// go build -v prints one import path per compiled package; anything
		// else (errors) is kept for the message.
		if strings.ContainsAny(line, " \t:") {
			tail = append(tail, line)
			if len(tail) > 40 {
				tail = tail[1:]
			}
			continue
		}
		n++
		if time.Since(last) >= every {
			report(n)
			last = time.Now()
		}
	}
	return n, tail
}

func (b *Builder) linkCurrent(key string) error {
	link := filepath.Join(b.CacheDir, "current")
	// A name of its own: tests locate svclab-kube from parallel goroutines.
	tmp := fmt.Sprintf("%s.%d.%d.tmp", link, os.Getpid(), rand.Uint64())
	if err := os.Symlink(key, tmp); err != nil {
		return fmt.Errorf("updating %s: %w", link, err)
	}
	return os.Rename(tmp, link)
}

// Info reads the build information of the cached binary at bin.
func Info(bin string) (BuildInfo, error) {
	var info BuildInfo
	b, err := os.ReadFile(filepath.Join(filepath.Dir(bin), "build.json"))
	if err != nil {
		return info, err
	}
	return info, json.Unmarshal(b, &info)
}

// Locate finds svclab-kube (Kube.Locate).
func Locate(ctx context.Context, progress cluster.Progress) (string, error) {
	return Kube.Locate(ctx, progress)
}

// Locate finds the artifact: the file its environment variable names;
// else, when run inside the svclab source tree, the build of the current
// sources (built if missing); else the most recent build in the cache.
func (a Artifact) Locate(ctx context.Context, progress cluster.Progress) (string, error) {
	if bin := os.Getenv(a.Env); a.Env != "" && bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("%s points at %s: %w", a.Env, bin, err)
		}
		return bin, nil
	}
	cache, err := a.CacheDir()
	if err != nil {
		return "", err
	}
	wd, _ := os.Getwd()
	if src, err := a.FindSource(wd); err == nil {
		b := &Builder{Artifact: a, Source: src, CacheDir: cache, Progress: progress}
		return b.Ensure(ctx)
	}
	bin := filepath.Join(cache, "current", a.Name)
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%s is not built yet: run svclab from the svclab source tree once (go tool task build), or set %s", a.Name, a.Env)
	}
	return bin, nil
}
