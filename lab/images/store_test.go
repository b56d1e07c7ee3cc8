package images

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

type fixture struct {
	store  *Store
	sys    *fakeSystem
	dir    string
	svclab string
	kube   string
}

func newFixture(t *testing.T, withKube bool) *fixture {
	t.Helper()
	tmp := t.TempDir()
	f := &fixture{sys: newFakeSystem(), dir: filepath.Join(tmp, "images"), svclab: filepath.Join(tmp, "svclab")}
	if err := os.WriteFile(f.svclab, []byte("svclab binary v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if withKube {
		f.kube = filepath.Join(tmp, "svclab-kube")
		if err := os.WriteFile(f.kube, []byte("svclab-kube binary"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f.store = f.newStore()
	return f
}

func (f *fixture) newStore() *Store {
	return NewStore(f.dir, Options{
		SvclabBin: f.svclab, KubeBin: f.kube, Mirror: "http://mirror.test/debian/",
		System: f.sys, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

func (f *fixture) build(t *testing.T) *recProgress {
	t.Helper()
	p := &recProgress{}
	if err := f.store.Build(context.Background(), p); err != nil {
		t.Fatalf("Build: %v", err)
	}
	return p
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

func TestResolveBeforeBuild(t *testing.T) {
	f := newFixture(t, true)
	_, err := f.store.Resolve("busybox:1.36")
	if !errors.Is(err, ErrNotBuilt) {
		t.Fatalf("Resolve before Build = %v, want ErrNotBuilt", err)
	}
	if !strings.Contains(err.Error(), "svclab setup") {
		t.Errorf("error does not say how to build the images: %v", err)
	}
}

func TestBuildAndResolve(t *testing.T) {
	f := newFixture(t, true)
	p := f.build(t)

	// debootstrap ran once, as asked.
	var boot string
	for _, c := range f.sys.Calls() {
		if strings.HasPrefix(c, "/usr/sbin/debootstrap ") {
			boot = c
		}
	}
	for _, want := range []string{"--variant=minbase", "--include=bash,busybox,ca-certificates,conntrack,curl,dnsutils,", "--cache-dir=" + f.dir + "/cache/", " bookworm ", " http://mirror.test/debian"} {
		if !strings.Contains(boot, want) {
			t.Errorf("debootstrap call %q lacks %q", boot, want)
		}
	}
	if f.sys.count("probe http://mirror.test/debian/dists/bookworm/Release") != 1 {
		t.Errorf("the mirror was not probed: %v", f.sys.Calls())
	}
	for _, step := range []string{"Checking the Debian mirror", "Bootstrapping Debian bookworm", "Trimming the tools image", "the agnhost image", "the nginx/httpd image", "the CoreDNS image", "the kube-proxy image"} {
		if !p.has(p.steps, step) {
			t.Errorf("no progress step %q in %q", step, p.steps)
		}
	}

	img, err := f.store.Resolve("docker.io/library/nginx:1.27@sha256:" + strings.Repeat("ab", 32))
	if err != nil {
		t.Fatal(err)
	}
	if img.Name != ImageWeb || len(img.Layers) != 4 {
		t.Fatalf("nginx resolved to %s with %d layers, want %s with 4", img.Name, len(img.Layers), ImageWeb)
	}
	tools, config, bin, web := img.Layers[0], img.Layers[1], img.Layers[2], img.Layers[3]
	if !exists(filepath.Join(tools, "bin/bash")) || !exists(filepath.Join(config, "entrypoint.sh")) {
		t.Errorf("tools layers incomplete: %v", img.Layers)
	}
	if b, _ := os.ReadFile(filepath.Join(bin, svclabPath)); string(b) != "svclab binary v1" {
		t.Errorf("svclab layer holds %q", b)
	}
	if to, _ := os.Readlink(filepath.Join(web, "usr/sbin/nginx")); to != svclabPath {
		t.Errorf("/usr/sbin/nginx links to %q, want %q", to, svclabPath)
	}
	if b, _ := os.ReadFile(filepath.Join(web, "usr/share/nginx/html/index.html")); !strings.Contains(string(b), "Welcome to nginx!") {
		t.Errorf("nginx index page: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(web, "usr/local/apache2/htdocs/index.html")); !strings.Contains(string(b), "It works!") {
		t.Errorf("httpd index page: %q", b)
	}
	if !slices.Equal(img.Cmd, []string{"nginx", "-g", "daemon off;"}) || img.StopSignal != "SIGQUIT" {
		t.Errorf("nginx config: cmd %q stop signal %q", img.Cmd, img.StopSignal)
	}

	// The tools layer was trimmed and finished.
	for _, gone := range []string{"usr/share/doc/curl/changelog.gz", "usr/share/man/man1", "usr/share/locale/de", "var/cache/apt/archives/curl_1.deb", "var/cache/apt/pkgcache.bin", "var/lib/apt/lists/deb.debian.org_x", "var/log/dpkg.log"} {
		if exists(filepath.Join(tools, gone)) {
			t.Errorf("%s was not removed from the tools image", gone)
		}
	}
	for _, kept := range []string{"usr/share/doc/curl/copyright", "usr/share/locale/locale.alias", "etc/dpkg/dpkg.cfg.d/svclab-nodoc"} {
		if !exists(filepath.Join(tools, kept)) {
			t.Errorf("%s is missing from the tools image", kept)
		}
	}
	if b, err := os.ReadFile(filepath.Join(tools, "etc/resolv.conf")); err != nil || len(b) != 0 {
		t.Errorf("resolv.conf should be an empty placeholder, is %q (%v)", b, err)
	}
	for _, applet := range []string{"telnet", "traceroute", "wget"} {
		if to, _ := os.Readlink(filepath.Join(tools, busyboxAppletDir, applet)); to != "/bin/busybox" {
			t.Errorf("busybox applet %s links to %q", applet, to)
		}
	}
	if exists(filepath.Join(tools, busyboxAppletDir, "[[")) != true {
		t.Errorf("applet [[ missing")
	}
	if exists(filepath.Join(f.dir, "cache", "debootstrap-"+toolsKey())) {
		t.Errorf("the debootstrap package cache was kept after a complete build")
	}

	// agnhost: the program, the certificate pair, the upload directory.
	ag, err := f.store.Resolve("registry.k8s.io/e2e-test-images/agnhost:2.53")
	if err != nil {
		t.Fatal(err)
	}
	top := ag.Layers[len(ag.Layers)-1]
	if to, _ := os.Readlink(filepath.Join(top, "agnhost")); to != svclabPath {
		t.Errorf("/agnhost links to %q", to)
	}
	for _, name := range []string{"localhost.crt", "localhost.key", "uploads"} {
		if !exists(filepath.Join(top, name)) {
			t.Errorf("agnhost layer lacks /%s", name)
		}
	}
	if crt, _ := os.ReadFile(filepath.Join(top, "localhost.crt")); !strings.Contains(string(crt), "BEGIN CERTIFICATE") {
		t.Errorf("localhost.crt is not a certificate: %q", crt)
	}

	// coredns: svclab-kube hard-linked, /coredns pointing at it.
	dns, err := f.store.Resolve("registry.k8s.io/coredns/coredns:v1.12.0")
	if err != nil {
		t.Fatal(err)
	}
	kubeCopy := filepath.Join(dns.Layers[2], KubePath)
	a, errA := os.Stat(kubeCopy)
	b, errB := os.Stat(f.kube)
	if errA != nil || errB != nil || a.Sys().(*syscall.Stat_t).Ino != b.Sys().(*syscall.Stat_t).Ino {
		t.Errorf("svclab-kube was not hard-linked into the kube layer (%v, %v)", errA, errB)
	}
	if to, _ := os.Readlink(filepath.Join(dns.Layers[3], "coredns")); to != KubePath {
		t.Errorf("/coredns links to %q", to)
	}
	px, err := f.store.Resolve("svclab/proxier")
	if err != nil {
		t.Fatal(err)
	}
	if to, _ := os.Readlink(filepath.Join(px.Layers[3], "usr/local/bin/kube-proxy")); to != svclabPath || !slices.Equal(px.Entrypoint, []string{"/usr/local/bin/kube-proxy"}) {
		t.Errorf("proxier: kube-proxy links to %q, entrypoint %q", to, px.Entrypoint)
	}

	// Nothing half-made is left behind.
	if m, _ := filepath.Glob(filepath.Join(f.dir, "layers", "*.partial-*")); len(m) > 0 {
		t.Errorf("partial layers left: %v", m)
	}
}

func TestBuildIsCached(t *testing.T) {
	f := newFixture(t, false)
	f.build(t)
	before, _ := f.store.Resolve("busybox")
	// A new store (a new process) finds everything built.
	f.store = f.newStore()
	p := f.build(t)
	if n := f.sys.count("/usr/sbin/debootstrap"); n != 1 {
		t.Errorf("debootstrap ran %d times, want 1", n)
	}
	if len(p.steps) != 0 || !p.has(p.infos, "up to date") {
		t.Errorf("a cached build reported steps %q, infos %q", p.steps, p.infos)
	}
	after, _ := f.store.Resolve("busybox")
	if !slices.Equal(before.Layers, after.Layers) {
		t.Errorf("layers changed without a change: %v -> %v", before.Layers, after.Layers)
	}

	// A new svclab binary rebuilds its layer only.
	old, _ := f.store.Resolve("nginx")
	if err := os.WriteFile(f.svclab, []byte("svclab binary v2, longer"), 0o755); err != nil {
		t.Fatal(err)
	}
	p = f.build(t)
	if len(p.steps) != 1 || !strings.Contains(p.steps[0], "svclab binary") {
		t.Errorf("after changing the binary Build ran %q, want only the svclab layer", p.steps)
	}
	cur, err := f.store.Resolve("nginx")
	if err != nil {
		t.Fatal(err)
	}
	if cur.Layers[2] == old.Layers[2] || cur.Layers[0] != old.Layers[0] {
		t.Errorf("layers after the change: %v, before: %v", cur.Layers, old.Layers)
	}
	if b, _ := os.ReadFile(filepath.Join(cur.Layers[2], svclabPath)); string(b) != "svclab binary v2, longer" {
		t.Errorf("svclab layer holds %q", b)
	}

	layers, err := f.store.Layers()
	if err != nil {
		t.Fatal(err)
	}
	stale := 0
	for _, l := range layers {
		if !l.Current {
			stale++
		}
	}
	if stale != 1 {
		t.Errorf("%d stale layers, want 1 (the old svclab layer): %+v", stale, layers)
	}
	removed, err := f.store.Prune(context.Background())
	if err != nil || len(removed) != 1 || !strings.Contains(removed[0], "svclab-") || exists(removed[0]) {
		t.Errorf("Prune removed %v (%v)", removed, err)
	}
	if _, err := f.store.Resolve("nginx"); err != nil {
		t.Errorf("Prune broke the current image: %v", err)
	}
}

func TestBuildWithoutKube(t *testing.T) {
	f := newFixture(t, false)
	p := f.build(t)
	if !p.has(p.infos, "skipping the CoreDNS image") {
		t.Errorf("no note about the skipped CoreDNS image: %q", p.infos)
	}
	_, err := f.store.Resolve("registry.k8s.io/coredns/coredns:v1.11.1")
	if !errors.Is(err, ErrNotBuilt) || !strings.Contains(err.Error(), "svclab-kube") {
		t.Errorf("coredns without svclab-kube: %v", err)
	}
	if _, err := f.store.Resolve("busybox"); err != nil {
		t.Errorf("busybox: %v", err)
	}
}

func TestBuildFailures(t *testing.T) {
	t.Run("not root", func(t *testing.T) {
		f := newFixture(t, false)
		f.sys.notRoot = true
		err := f.store.Build(context.Background(), nil)
		if !errors.Is(err, ErrNeedRoot) || !strings.Contains(err.Error(), "sudo svclab setup") {
			t.Fatalf("Build as non-root = %v", err)
		}
		if f.sys.count("/usr/sbin/debootstrap") != 0 {
			t.Error("debootstrap ran without root")
		}
	})
	t.Run("offline", func(t *testing.T) {
		f := newFixture(t, false)
		f.sys.offline = errors.New("dial tcp: lookup mirror.test: no such host")
		p := &recProgress{}
		err := f.store.Build(context.Background(), p)
		if !errors.Is(err, ErrOffline) || !strings.Contains(err.Error(), "no such host") || !strings.Contains(err.Error(), "network") {
			t.Fatalf("Build offline = %v", err)
		}
		if !p.has(p.fails, "Checking the Debian mirror") {
			t.Errorf("the failed step was not reported: %q", p.fails)
		}
	})
	t.Run("debootstrap missing", func(t *testing.T) {
		f := newFixture(t, false)
		delete(f.sys.paths, "debootstrap")
		err := f.store.Build(context.Background(), nil)
		if err == nil || !strings.Contains(err.Error(), "svclab setup") {
			t.Fatalf("Build = %v, want an error naming svclab setup", err)
		}
		if f.sys.count("apt-get") != 0 {
			t.Errorf("the image store ran apt-get: %v", f.sys.Calls())
		}
	})
	t.Run("interrupted and resumed", func(t *testing.T) {
		f := newFixture(t, false)
		f.sys.debootstrapErr = errors.New("exit status 1")
		err := f.store.Build(context.Background(), nil)
		if err == nil || !strings.Contains(err.Error(), "Couldn't download packages") {
			t.Fatalf("Build = %v, want debootstrap's last lines", err)
		}
		if m, _ := filepath.Glob(filepath.Join(f.dir, "layers", "*")); len(m) != 0 {
			t.Errorf("a failed build left layers behind: %v", m)
		}
		cache := filepath.Join(f.dir, "cache", "debootstrap-"+toolsKey())
		if !exists(cache) {
			t.Error("the package cache was removed after a failed build; the next attempt could not resume")
		}
		// A leftover from a build killed mid-way is swept.
		partial := filepath.Join(f.dir, "layers", "tools-x.partial-123")
		if err := os.MkdirAll(partial, 0o755); err != nil {
			t.Fatal(err)
		}
		f.sys.debootstrapErr = nil
		f.build(t)
		if exists(partial) || exists(cache) {
			t.Errorf("after a good build: partial left %v, cache left %v", exists(partial), exists(cache))
		}
		if _, err := f.store.Resolve("busybox"); err != nil {
			t.Error(err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		f := newFixture(t, false)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := f.store.Build(ctx, nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("Build with a cancelled context = %v", err)
		}
	})
}

func TestProgressWriter(t *testing.T) {
	p := &recProgress{}
	w := newProgressWriter(p, 0)
	io.WriteString(w, "I: Retrieving InRelease \nI: Retrieving libc6 2.36\nI: Retrieving bash 5.2\nI: Unpacking libc6...\nI: Configur")
	io.WriteString(w, "ing libc6...\nW: a warning\nE: the end")
	w.Flush()
	last := p.infos[len(p.infos)-1]
	if !strings.HasPrefix(last, "2 packages retrieved, 1 unpacked, 1 configured; now: Configuring libc6...") {
		t.Errorf("last progress line %q", last)
	}
	if tail := w.Tail(); !strings.HasSuffix(tail, "W: a warning\nE: the end") {
		t.Errorf("tail %q", tail)
	}
}

func TestScripts(t *testing.T) {
	dir := t.TempDir()
	if err := writeTree(dir, treeLayers()[layerToolsConfig]); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		script string
		args   []string
		code   int
		out    string
	}{
		{"usr/local/bin/apk", []string{"add", "--no-cache", "curl", "bind-tools"}, 0, "OK: bind-tools is already installed"},
		{"usr/local/bin/apk", []string{"update"}, 0, "nothing to do"},
		{"usr/local/bin/apk", []string{"add", "curl", "redis"}, 1, "unable to select packages: redis"},
		// curlimages/curl's entrypoint: options go to curl, commands run.
		{"entrypoint.sh", []string{"-V"}, 0, "curl_invoked"},
		{"entrypoint.sh", []string{"echo", "plain"}, 0, "plain"},
	}
	for _, tt := range tests {
		t.Run(tt.script+" "+strings.Join(tt.args, " "), func(t *testing.T) {
			cmd := exec.Command("/bin/sh", append([]string{filepath.Join(dir, tt.script)}, tt.args...)...)
			// A stand-in curl, so the test needs no network nor curl.
			bin := t.TempDir()
			os.WriteFile(filepath.Join(bin, "curl"), []byte("#!/bin/sh\necho curl_invoked \"$@\"\n"), 0o755)
			cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.code || !strings.Contains(string(out), tt.out) {
				t.Errorf("exit %d, output %q; want %d and %q", code, out, tt.code, tt.out)
			}
		})
	}
}

// Every svclab build makes a new svclab layer; the ones it supersedes go
// once they are old enough that nobody is about to mount them.
func TestBuildPrunesSupersededLayers(t *testing.T) {
	f := newFixture(t, true)
	f.build(t)
	first, _ := f.store.Resolve("nginx")
	oldSvclab := filepath.Dir(first.Layers[2]) // the layer directory holds rootfs/ and layer.json
	if err := os.WriteFile(f.svclab, []byte("svclab binary v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.build(t)
	if !exists(oldSvclab) {
		t.Fatalf("a layer superseded a moment ago was removed: %s", oldSvclab)
	}
	// An hour later, the next build removes it, and nothing current.
	removed, err := f.store.pruneSuperseded(time.Now().Add(supersededAge + time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != oldSvclab || exists(oldSvclab) {
		t.Errorf("removed %v, want just %s", removed, oldSvclab)
	}
	for _, ref := range []string{"nginx", "busybox", "registry.k8s.io/coredns/coredns:v1.12.0", "registry.k8s.io/e2e-test-images/agnhost:2.53"} {
		img, err := f.store.Resolve(ref)
		if err != nil {
			t.Fatalf("%s after pruning: %v", ref, err)
		}
		for _, l := range img.Layers {
			if !exists(l) {
				t.Errorf("%s lost its layer %s", ref, l)
			}
		}
	}
}
