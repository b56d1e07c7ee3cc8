package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/svclab/svclab/lab/flock"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/kubebin"
)

// Image is a local image a container runs from: read-only layers to stack
// with overlayfs, and the configuration an OCI image would carry.
type Image struct {
	// Name is our canonical name, e.g. "svclab/tools".
	Name string
	// Layers are root filesystem directories, lowest first (overlayfs's
	// lowerdir= option lists them the other way round, topmost first).
	Layers []string
	// Entrypoint and Cmd behave as in an OCI image: a pod's command
	// replaces Entrypoint, its args replace Cmd.
	Entrypoint, Cmd []string
	// Env holds KEY=VALUE pairs, PATH among them.
	Env []string
	// WorkingDir is "" for the root directory.
	WorkingDir string
	// StopSignal is the signal that stops the main process gracefully, as
	// the upstream image declares it ("SIGQUIT" for nginx); "" for SIGTERM.
	StopSignal string
}

// Options configure a Store.
type Options struct {
	// SvclabBin is the svclab executable, which the agnhost, web and
	// proxier images run under other names; os.Executable when empty.
	SvclabBin string
	// KubeBin is svclab-kube (see kubebin.Locate), which the coredns image
	// runs as /coredns. Without it the coredns image is not built.
	KubeBin string
	// Mirror is the Debian mirror; DetectMirror("/etc/apt") when empty.
	Mirror string
	// System runs commands; Host{} when nil.
	System System
	// Logger receives a line per built layer; slog.Default() when nil.
	Logger *slog.Logger
	// ProgressEvery is how often debootstrap's progress is reported;
	// 10s when zero.
	ProgressEvery time.Duration
}

// Store builds the lab's images into a directory and maps pods' image
// references to them. A Store is safe for concurrent use; builds by
// several processes are serialised with a lock file.
type Store struct {
	dir           string
	svclabBin     string
	kubeBin       string
	mirror        string
	sys           System
	log           *slog.Logger
	progressEvery time.Duration

	mu     sync.Mutex
	hashes map[string]fileHash
}

type fileHash struct {
	size  int64
	mtime time.Time
	ino   uint64
	key   string
}

// DefaultDir is $SVCLAB_CACHE_DIR/images, or svclab/images in the user's
// cache directory (/root/.cache/svclab/images for root).
func DefaultDir() (string, error) {
	if d := os.Getenv(kubebin.EnvCacheDir); d != "" {
		return filepath.Join(d, "images"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the user cache directory: %w (set %s)", err, kubebin.EnvCacheDir)
	}
	return filepath.Join(d, "svclab", "images"), nil
}

// NewStore returns a store keeping its images in dir.
func NewStore(dir string, opts Options) *Store {
	s := &Store{
		dir:           dir,
		svclabBin:     opts.SvclabBin,
		kubeBin:       opts.KubeBin,
		mirror:        strings.TrimSuffix(opts.Mirror, "/"),
		sys:           opts.System,
		log:           opts.Logger,
		progressEvery: opts.ProgressEvery,
		hashes:        map[string]fileHash{},
	}
	if s.svclabBin == "" {
		s.svclabBin, _ = os.Executable()
	}
	if s.mirror == "" {
		s.mirror = DetectMirror("/etc/apt")
	}
	if s.sys == nil {
		s.sys = Host{}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.progressEvery == 0 {
		s.progressEvery = 10 * time.Second
	}
	return s
}

// Dir returns the directory images are stored in.
func (s *Store) Dir() string { return s.dir }

// Available returns the image names pods can use, in a stable order. Any
// tag or digest is accepted with each, and so are the canonical svclab/*
// names.
func (s *Store) Available() []string { return availableNames() }

// Resolve maps a pod's image reference to a local image. An unknown
// reference gives an error that matches ErrNotFound and lists the names
// that work; a known image that is not built yet gives ErrNotBuilt.
func (s *Store) Resolve(ref string) (Image, error) {
	v, err := lookup(ref)
	if err != nil {
		return Image{}, err
	}
	img := Image{
		Name:       v.image,
		Entrypoint: clone(v.entrypoint),
		Cmd:        clone(v.cmd),
		Env:        clone(v.env),
		WorkingDir: v.workingDir,
		StopSignal: v.stopSignal,
	}
	if len(img.Env) == 0 {
		img.Env = []string{defaultPath}
	}
	for _, name := range imageLayers[v.image] {
		key, err := s.layerKey(name)
		if err != nil {
			return Image{}, fmt.Errorf("%w: image %q (%s): %w", ErrNotBuilt, ref, v.image, err)
		}
		root := filepath.Join(s.layerPath(name, key), "rootfs")
		if _, err := os.Stat(root); err != nil {
			return Image{}, fmt.Errorf("%w: image %q (%s) needs layer %s, which is not in %s; build the lab's images with 'svclab setup' as root",
				ErrNotBuilt, ref, v.image, name+"-"+key, s.dir)
		}
		img.Layers = append(img.Layers, root)
	}
	return img, nil
}

func clone(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s...)
}

// layersDir holds one directory per built layer.
func (s *Store) layersDir() string { return filepath.Join(s.dir, "layers") }

func (s *Store) layerPath(name, key string) string {
	return filepath.Join(s.layersDir(), name+"-"+key)
}

// layerKey returns the current key of a layer.
func (s *Store) layerKey(name string) (string, error) {
	switch name {
	case layerTools:
		return toolsKey(), nil
	case layerSvclab:
		if s.svclabBin == "" {
			return "", fmt.Errorf("the svclab executable was not found")
		}
		return s.fileKey(s.svclabBin)
	case layerKube:
		if s.kubeBin == "" {
			return "", fmt.Errorf("%s was not found: build it with 'svclab kube build' (or set %s)", kubebin.BinaryName, kubebin.EnvBinary)
		}
		// kubebin names each build by a hash of its sources: use it rather
		// than hashing 200 MB.
		if real, err := filepath.EvalSymlinks(s.kubeBin); err == nil {
			if info, err := kubebin.Info(real); err == nil && info.Key != "" && filepath.Base(filepath.Dir(real)) == info.Key {
				return info.Key, nil
			}
		}
		return s.fileKey(s.kubeBin)
	}
	entries, ok := treeLayers()[name]
	if !ok {
		return "", fmt.Errorf("unknown layer %q", name)
	}
	return treeKey(entries), nil
}

// fileKey hashes a file's content, remembering the hash while its size,
// modification time and inode stay the same.
func (s *Store) fileKey(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	s.mu.Lock()
	h, ok := s.hashes[path]
	s.mu.Unlock()
	if ok && h.size == fi.Size() && h.mtime.Equal(fi.ModTime()) && h.ino == ino {
		return h.key, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sum := sha256.New()
	if _, err := io.Copy(sum, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	key := hex.EncodeToString(sum.Sum(nil))[:16]
	s.mu.Lock()
	s.hashes[path] = fileHash{size: fi.Size(), mtime: fi.ModTime(), ino: ino, key: key}
	s.mu.Unlock()
	return key, nil
}

// layerInfo is written next to each layer's rootfs.
type layerInfo struct {
	Name     string        `json:"name"`
	Key      string        `json:"key"`
	Built    time.Time     `json:"built"`
	Duration time.Duration `json:"duration"`
	Bytes    int64         `json:"bytes"`
	Mirror   string        `json:"mirror,omitempty"`
}

// LayerTitle says what each layer is, for progress lines.
var layerTitles = map[string]string{
	layerTools:       "the tools image (Debian " + Suite + " with bash, busybox, curl, dig, nc, socat, ip, nft, iptables, conntrack, tcpdump)",
	layerToolsConfig: "the tools image's configuration",
	layerSvclab:      "the svclab binary layer (agnhost, nginx/httpd, kube-proxy)",
	layerKube:        "the " + kubebin.BinaryName + " layer (CoreDNS)",
	layerAgnhost:     "the agnhost image",
	layerWeb:         "the nginx/httpd image",
	layerCoreDNS:     "the CoreDNS image",
	layerKubeBin:     "the Kubernetes component images (kube-apiserver, etcd, ... for kind's node image)",
	layerProxier:     "the kube-proxy image",
}

// Build builds every layer that is missing, reporting a step per layer. A
// layer is built in a temporary directory and renamed into place when
// complete, so an interrupted build leaves nothing half-made behind; the
// packages debootstrap downloaded are kept until the tools layer is
// complete, so a second attempt resumes. The coredns image is skipped
// when the store has no svclab-kube.
func (s *Store) Build(ctx context.Context, progress cluster.Progress) error {
	return s.ensure(ctx, cluster.OrNop(progress), buildOrder)
}

// ensure builds the named layers that are missing, in order.
func (s *Store) ensure(ctx context.Context, p cluster.Progress, layers []string) error {
	if err := os.MkdirAll(s.layersDir(), 0o755); err != nil {
		return fmt.Errorf("cannot create the image directory %s: %w (set %s to a writable directory)", s.dir, err, kubebin.EnvCacheDir)
	}
	unlock, err := flock.Lock(filepath.Join(s.dir, ".build.lock"), 0o644)
	if err != nil {
		return err
	}
	defer unlock()
	// Leftovers of interrupted builds; nobody else builds while we hold the
	// lock.
	if err := removeGlob(s.layersDir(), "*.partial-*"); err != nil {
		return err
	}
	built := 0
	for _, name := range layers {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("image build interrupted: %w", err)
		}
		if name == layerKube || name == layerCoreDNS || name == layerKubeBin {
			if s.kubeBin == "" {
				if name == layerKube {
					p.Infof("skipping the CoreDNS image: %s is not built yet", kubebin.BinaryName)
				}
				continue
			}
		}
		key, err := s.layerKey(name)
		if err != nil {
			return fmt.Errorf("building %s: %w", layerTitles[name], err)
		}
		if _, err := os.Stat(s.layerPath(name, key)); err == nil {
			continue
		}
		if name == layerTools {
			// Several steps of its own.
			err = s.buildLayer(ctx, p, name, key)
		} else {
			done := p.Start("Building " + layerTitles[name])
			err = s.buildLayer(ctx, p, name, key)
			done(err)
		}
		if err != nil {
			return fmt.Errorf("building %s: %w", layerTitles[name], err)
		}
		built++
	}
	if built == 0 {
		p.Infof("images are up to date in %s", s.dir)
	}
	if removed, err := s.pruneSuperseded(time.Now()); err != nil {
		s.log.Warn("removing superseded image layers", "err", err)
	} else if len(removed) > 0 {
		s.log.Info("removed superseded image layers", "count", len(removed))
	}
	return nil
}

// supersededAge is how old a superseded layer must be before it goes: a
// layer another svclab binary (a parallel test, say) built a moment ago
// may be about to be mounted.
const supersededAge = time.Hour

// pruneSuperseded removes layers whose key no longer matches the current
// sources (every build of svclab makes a new svclab layer), once they are
// older than supersededAge and no mount uses them. Called with the build
// lock held.
func (s *Store) pruneSuperseded(now time.Time) ([]string, error) {
	layers, err := s.Layers()
	if err != nil {
		return nil, err
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, l := range layers {
		if (l.Name == layerKube || l.Name == layerCoreDNS || l.Name == layerKubeBin) && s.kubeBin == "" {
			continue // no svclab-kube here to tell which is current
		}
		if _, ours := layerTitles[l.Name]; !ours {
			continue // another package's (EnsureLayer): it knows which are current
		}
		if l.Current || now.Sub(l.Built) < supersededAge || bytes.Contains(mounts, []byte(l.Dir+"/")) || bytes.Contains(mounts, []byte(l.Dir+",")) || bytes.Contains(mounts, []byte(l.Dir+":")) {
			continue
		}
		if err := os.RemoveAll(l.Dir); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, l.Dir)
	}
	return removed, errors.Join(errs...)
}

// buildLayer builds one layer into a temporary directory and renames it
// into place.
func (s *Store) buildLayer(ctx context.Context, p cluster.Progress, name, key string) error {
	start := time.Now()
	err := s.buildInto(ctx, name, key, func(rootfs string) error {
		switch name {
		case layerTools:
			return s.buildTools(ctx, p, rootfs)
		case layerSvclab:
			// A hard link where it can be: containers then run the very
			// file the cluster's supervisor and node agents run, so the
			// kernel keeps one copy of its pages for all of them, not one
			// more for kube-proxy and every agnhost or web server. A new
			// build is a new file (go build replaces, never rewrites; a
			// running binary cannot be rewritten in place) with a new key.
			return copyFile(s.svclabBin, filepath.Join(rootfs, svclabPath), true)
		case layerKube:
			// kubebin's cache never rewrites a binary in place, so a hard link
			// is safe and saves 200 MB.
			src := s.kubeBin
			if real, e := filepath.EvalSymlinks(src); e == nil {
				src = real
			}
			return copyFile(src, filepath.Join(rootfs, KubePath), true)
		default:
			return writeTree(rootfs, treeLayers()[name])
		}
	})
	if err != nil {
		return err
	}
	if name == layerTools {
		if l, err := s.layerInfo(name, key); err == nil {
			p.Infof("the tools image is %d MB, built in %s", l.Bytes>>20, time.Since(start).Round(time.Second))
		}
	}
	return nil
}

func (s *Store) layerInfo(name, key string) (layerInfo, error) {
	var li layerInfo
	data, err := os.ReadFile(filepath.Join(s.layerPath(name, key), "layer.json"))
	if err != nil {
		return li, err
	}
	return li, json.Unmarshal(data, &li)
}

// buildInto makes layer name-key with build, in a temporary directory
// renamed into place when build succeeded. Called with the build lock
// held.
func (s *Store) buildInto(ctx context.Context, name, key string, build func(rootfs string) error) (err error) {
	start := time.Now()
	tmp, err := os.MkdirTemp(s.layersDir(), name+"-"+key+".partial-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	rootfs := filepath.Join(tmp, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return err
	}
	info := layerInfo{Name: name, Key: key, Built: start}
	if name == layerTools {
		info.Mirror = s.mirror
	}
	if err := build(rootfs); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	info.Duration = time.Since(start)
	info.Bytes = diskUsage(rootfs)
	data, _ := json.MarshalIndent(info, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, "layer.json"), data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, s.layerPath(name, key)); err != nil {
		return err
	}
	s.log.Info("built image layer", "layer", name, "key", key, "duration", info.Duration.Round(time.Millisecond), "bytes", info.Bytes)
	return nil
}

// KubeLayer returns the root file system directory of the layer holding
// svclab-kube (at /usr/local/lib/svclab/svclab-kube), once built.
func (s *Store) KubeLayer() (string, error) {
	key, err := s.layerKey(layerKube)
	if err != nil {
		return "", err
	}
	root := filepath.Join(s.layerPath(layerKube, key), "rootfs")
	if _, err := os.Stat(root); err != nil {
		return "", fmt.Errorf("%w: the %s layer: build the lab's images first", ErrNotBuilt, kubebin.BinaryName)
	}
	return root, nil
}

// Layer is a layer another package defines and the store builds and
// keeps like its own: under its name and key, built in a temporary
// directory and renamed into place, with the store's build lock held.
type Layer struct {
	// Name and Key name the layer's directory; a new key is a new layer.
	Name, Key string
	// Title says what it is, for the progress step.
	Title string
	// Build makes the layer's root file system in rootfs (an empty
	// directory); Debootstrap may be used there.
	Build func(ctx context.Context, p cluster.Progress, rootfs string) error
}

// EnsureLayer returns the root file system directory of l, building it
// first when it is missing. The store never prunes such layers.
func (s *Store) EnsureLayer(ctx context.Context, p cluster.Progress, l Layer) (string, error) {
	p = cluster.OrNop(p)
	root := filepath.Join(s.layerPath(l.Name, l.Key), "rootfs")
	if _, err := os.Stat(root); err == nil {
		return root, nil
	}
	if err := os.MkdirAll(s.layersDir(), 0o755); err != nil {
		return "", fmt.Errorf("cannot create the image directory %s: %w (set %s to a writable directory)", s.dir, err, kubebin.EnvCacheDir)
	}
	unlock, err := flock.Lock(filepath.Join(s.dir, ".build.lock"), 0o644)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(root); err == nil { // built by another process meanwhile
		return root, nil
	}
	done := p.Start("Building " + l.Title)
	err = s.buildInto(ctx, l.Name, l.Key, func(rootfs string) error { return l.Build(ctx, p, rootfs) })
	done(err)
	if err != nil {
		return "", fmt.Errorf("building %s: %w", l.Title, err)
	}
	return root, nil
}

// LayerInfo describes a built layer.
type LayerInfo struct {
	Name     string
	Key      string
	Dir      string
	Built    time.Time
	Duration time.Duration
	Bytes    int64
	Current  bool // the key matches the current sources
}

// Layers lists the built layers.
func (s *Store) Layers() ([]LayerInfo, error) {
	entries, err := os.ReadDir(s.layersDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []LayerInfo
	for _, e := range entries {
		if !e.IsDir() || strings.Contains(e.Name(), ".partial-") {
			continue
		}
		dir := filepath.Join(s.layersDir(), e.Name())
		data, err := os.ReadFile(filepath.Join(dir, "layer.json"))
		if err != nil {
			continue
		}
		var li layerInfo
		if json.Unmarshal(data, &li) != nil {
			continue
		}
		cur, _ := s.layerKey(li.Name)
		out = append(out, LayerInfo{Name: li.Name, Key: li.Key, Dir: dir, Built: li.Built, Duration: li.Duration, Bytes: li.Bytes, Current: cur == li.Key})
	}
	return out, nil
}

// Prune removes the layers that are not current (older builds of the
// svclab binary, an earlier tools recipe) and returns their directories.
// Call it only when no container runs: a running container's overlay
// mount may still use an old layer.
func (s *Store) Prune(ctx context.Context) ([]string, error) {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, err
	}
	unlock, err := flock.Lock(filepath.Join(s.dir, ".build.lock"), 0o644)
	if err != nil {
		return nil, err
	}
	defer unlock()
	layers, err := s.Layers()
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, l := range layers {
		if _, ours := layerTitles[l.Name]; l.Current || !ours || ctx.Err() != nil {
			continue
		}
		if err := os.RemoveAll(l.Dir); err != nil {
			return removed, err
		}
		removed = append(removed, l.Dir)
	}
	return removed, ctx.Err()
}

// copyFile copies src to dst (executable), or hard-links it when link is
// set and both are on the same file system.
func copyFile(src, dst string, link bool) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if link && os.Link(src, dst) == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, 0o755)
}

// diskUsage adds up the sizes of the regular files under root.
func diskUsage(root string) int64 {
	var n int64
	filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
