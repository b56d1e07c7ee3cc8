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

// DefaultCacheDir is $SVCLAB_CACHE_DIR, or svclab/kube in the user's cache
// directory.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv(EnvCacheDir); d != "" {
		return filepath.Join(d, "kube"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the user cache directory: %w (set %s)", err, EnvCacheDir)
	}
	return filepath.Join(d, "svclab", "kube"), nil
}

// FindSource walks up from dir looking for the lab/kube module and returns
// its directory.
func FindSource(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		cand := filepath.Join(dir, "lab", "kube")
		if b, err := os.ReadFile(filepath.Join(cand, "go.mod")); err == nil && bytes.Contains(b, []byte("module "+modulePath+"\n")) {
			return cand, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no lab/kube module found above the current directory")
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

// Builder builds svclab-kube into the cache.
type Builder struct {
	// Source is the lab/kube module directory.
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
	done := cluster.OrNop(b.Progress).Start(fmt.Sprintf("Building %s from scratch with an empty Go build cache (10-35 minutes on 2 cores)", BinaryName))
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
func (b *Builder) Path(key string) string { return filepath.Join(b.CacheDir, key, BinaryName) }

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
	done := p.Start(fmt.Sprintf("Building %s %s from source (cold: 10-35 minutes on 2 cores, cached afterwards)", BinaryName, cluster.KubernetesVersion))
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
		return "", fmt.Errorf("the Go toolchain is needed to build %s: %w", BinaryName, err)
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
	p := cluster.OrNop(b.Progress)
	start := time.Now()
	total := b.countPackages(ctx)
	dir := filepath.Join(b.CacheDir, key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return BuildInfo{}, err
	}
	tmp := filepath.Join(dir, BinaryName+".tmp")
	cmd := exec.CommandContext(ctx, b.goCmd(), "build", "-v", "-trimpath",
		"-ldflags", LDFlags(cluster.KubernetesVersion, start), "-o", tmp, ".")
	cmd.Dir = b.Source
	if b.GoCache != "" {
		cmd.Env = append(os.Environ(), "GOCACHE="+b.GoCache)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return BuildInfo{}, err
	}
	if err := cmd.Start(); err != nil {
		return BuildInfo{}, fmt.Errorf("starting go build: %w", err)
	}
	every := b.ProgressEvery
	if every == 0 {
		every = 15 * time.Second
	}
	compiled, tail := countLines(stderr, func(n int) {
		p.Infof("compiled %s packages (%s elapsed)", ofTotal(n, total), time.Since(start).Round(time.Second))
	}, every)
	if err := cmd.Wait(); err != nil {
		os.Remove(tmp)
		return BuildInfo{}, fmt.Errorf("go build in %s failed: %w\n%s", b.Source, err, strings.Join(tail, "\n"))
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
	cmd := exec.CommandContext(ctx, b.goCmd(), "list", "-deps", ".")
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

// Locate finds svclab-kube: $SVCLAB_KUBE_BIN; else, when run inside the
// svclab source tree, the binary for the current sources (built if missing);
// else the most recently built binary in the cache.
func Locate(ctx context.Context, progress cluster.Progress) (string, error) {
	if bin := os.Getenv(EnvBinary); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("%s points at %s: %w", EnvBinary, bin, err)
		}
		return bin, nil
	}
	cache, err := DefaultCacheDir()
	if err != nil {
		return "", err
	}
	wd, _ := os.Getwd()
	if src, err := FindSource(wd); err == nil {
		b := &Builder{Source: src, CacheDir: cache, Progress: progress}
		return b.Ensure(ctx)
	}
	bin := filepath.Join(cache, "current", BinaryName)
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%s is not built yet: run 'go tool task build' in the svclab source tree, or set %s", BinaryName, EnvBinary)
	}
	return bin, nil
}
