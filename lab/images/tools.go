package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/svclab/svclab/lab/cluster"
)

// Suite is the Debian release the tools image is built from.
const Suite = "bookworm"

// ToolsPackages returns the Debian packages installed on top of
// debootstrap's minbase variant.
func ToolsPackages() []string {
	return []string{
		"bash", "busybox", "ca-certificates", "conntrack", "curl", "dnsutils",
		"iproute2", "iptables", "iputils-ping", "netcat-openbsd", "nftables",
		"procps", "socat", "tcpdump", "wget",
	}
}

// toolsRecipe changes whenever the way the tools layer is made changes.
const toolsRecipe = 1

// ErrNeedRoot is returned when building the tools image without root.
var ErrNeedRoot = errors.New("building the tools image needs root")

// ErrOffline is returned when the Debian mirror cannot be reached.
var ErrOffline = errors.New("the Debian mirror cannot be reached")

// debianArch maps Go's architecture names to Debian's.
func debianArch() string {
	switch runtime.GOARCH {
	case "386":
		return "i386"
	case "arm":
		return "armhf"
	case "ppc64le":
		return "ppc64el"
	default:
		return runtime.GOARCH
	}
}

// toolsKey identifies the tools layer: the suite, architecture, package
// list and recipe (not the mirror: any mirror gives the same packages).
func toolsKey() string {
	h := sha256.New()
	fmt.Fprintf(h, "recipe=%d format=%d suite=%s arch=%s variant=minbase packages=%s\n",
		toolsRecipe, layerFormat, Suite, debianArch(), strings.Join(ToolsPackages(), ","))
	return Suite + "-" + hex.EncodeToString(h.Sum(nil))[:12]
}

// buildTools debootstraps the tools root filesystem into rootfs.
func (s *Store) buildTools(ctx context.Context, p cluster.Progress, rootfs string) error {
	err := s.Debootstrap(ctx, p, rootfs, Bootstrap{Name: "tools", Key: toolsKey(), Packages: ToolsPackages(),
		Title: fmt.Sprintf("Bootstrapping Debian %s with %d tool packages (cold: a few minutes, cached afterwards)", Suite, len(ToolsPackages()))})
	if err != nil {
		return err
	}
	done := p.Start("Trimming the tools image (apt caches, documentation) and adding busybox applets")
	err = s.finishTools(ctx, rootfs)
	done(err)
	return err
}

// Bootstrap says what Debootstrap installs.
type Bootstrap struct {
	// Name and Key name the download cache (Key changes with Packages).
	Name, Key string
	// Packages are installed on top of debootstrap's minbase variant.
	Packages []string
	// Title is the progress step's.
	Title string
}

// Debootstrap bootstraps Debian Suite (the minbase variant and b's
// packages) into rootfs from the store's mirror, then trims it as an image
// (Trim). It needs root. The downloaded packages are kept until it
// completes, so an interrupted bootstrap resumes.
func (s *Store) Debootstrap(ctx context.Context, p cluster.Progress, rootfs string, b Bootstrap) error {
	p = cluster.OrNop(p)
	if !s.sys.IsRoot() {
		return fmt.Errorf("%w (debootstrap creates device nodes and runs package scripts in a chroot): run 'sudo svclab setup' once, or 'go tool task setup' as root", ErrNeedRoot)
	}
	debootstrap, err := s.debootstrapPath()
	if err != nil {
		return err
	}
	mirror := s.mirror
	done := p.Start("Checking the Debian mirror " + mirror)
	err = s.sys.Probe(ctx, mirror+"/dists/"+Suite+"/Release")
	done(err)
	if err != nil {
		return fmt.Errorf("%w: %w. Building the %s image downloads Debian packages once; "+
			"connect this machine to the network, or point apt's sources (/etc/apt/sources.list*) at a reachable Debian mirror, and try again", ErrOffline, err, b.Name)
	}

	// Downloaded packages survive an interrupted build, so a second attempt
	// only fetches what is missing.
	cache := filepath.Join(s.dir, "cache", "debootstrap-"+b.Key)
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return err
	}
	args := []string{"--variant=minbase", "--arch=" + debianArch(),
		"--include=" + strings.Join(b.Packages, ","), "--cache-dir=" + cache}
	if _, err := os.Stat(debianKeyring); err == nil {
		args = append(args, "--keyring="+debianKeyring)
	}
	args = append(args, Suite, rootfs, mirror)
	done = p.Start(b.Title)
	out := newProgressWriter(p, s.progressEvery)
	err = s.sys.Run(ctx, out, debootstrap, args...)
	out.Flush()
	if err != nil {
		err = fmt.Errorf("debootstrap failed: %w\n%s", err, out.Tail())
	}
	done(err)
	if err != nil {
		return err
	}
	if err := Trim(rootfs); err != nil {
		return err
	}
	return os.RemoveAll(cache)
}

const debianKeyring = "/usr/share/keyrings/debian-archive-keyring.gpg"

// debootstrapPath finds debootstrap. Installing it is svclab setup's job
// (package hostsetup), like every other system package.
func (s *Store) debootstrapPath() (string, error) {
	path, err := s.sys.LookPath("debootstrap")
	if err != nil {
		return "", fmt.Errorf("debootstrap is needed to build the tools image and is not installed: run 'sudo svclab setup' (or 'go tool task setup'), which installs it")
	}
	return path, nil
}

// finishTools links the busybox applets into a trimmed tools root file
// system.
func (s *Store) finishTools(ctx context.Context, rootfs string) error {
	var list bytes.Buffer
	if err := s.sys.Run(ctx, &list, "chroot", rootfs, "/bin/busybox", "--list"); err != nil {
		return fmt.Errorf("listing the busybox applets: %w\n%s", err, lastLines(list.String(), 10))
	}
	appletDir := filepath.Join(rootfs, busyboxAppletDir)
	if err := os.MkdirAll(appletDir, 0o755); err != nil {
		return err
	}
	for _, a := range strings.Fields(list.String()) {
		if strings.ContainsAny(a, "/.") {
			continue
		}
		if err := os.Symlink("/bin/busybox", filepath.Join(appletDir, a)); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}

	return nil
}

// Trim makes a fresh debootstrap a lean container image: it removes apt's
// caches and lists, documentation, manual pages and logs, and leaves the
// files the runtime bind-mounts (resolv.conf, hosts, hostname) as neutral
// placeholders.
func Trim(rootfs string) error {
	for _, pattern := range []string{
		"var/cache/apt/archives/*.deb", "var/cache/apt/archives/partial/*", "var/cache/apt/*.bin",
		"var/lib/apt/lists/*", "var/cache/debconf/*-old", "var/lib/dpkg/*-old",
		"usr/share/man/*", "usr/share/info/*", "usr/share/lintian/*", "usr/share/locale/*",
		"var/log/*.log", "var/log/apt/*", "tmp/*", "var/tmp/*",
	} {
		if err := removeGlob(rootfs, pattern, "usr/share/locale/locale.alias", "var/lib/apt/lists/partial", "var/cache/apt/archives/partial"); err != nil {
			return err
		}
	}
	// Documentation goes, copyright notices stay.
	docs, _ := filepath.Glob(filepath.Join(rootfs, "usr/share/doc/*"))
	for _, d := range docs {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.Name() != "copyright" {
				if err := os.RemoveAll(filepath.Join(d, e.Name())); err != nil {
					return err
				}
			}
		}
	}

	files := map[string]string{
		"etc/resolv.conf": "",
		"etc/hostname":    "",
		"etc/hosts":       "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		// Keep packages installed later in a pod as lean as these.
		"etc/dpkg/dpkg.cfg.d/svclab-nodoc": "path-exclude /usr/share/doc/*\npath-include /usr/share/doc/*/copyright\n" +
			"path-exclude /usr/share/man/*\npath-exclude /usr/share/info/*\npath-exclude /usr/share/locale/*\n",
		"etc/apt/apt.conf.d/svclab-clean": "DPkg::Post-Invoke { \"rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true\"; };\n" +
			"Dir::Cache::pkgcache \"\";\nDir::Cache::srcpkgcache \"\";\nAPT::Install-Recommends \"false\";\n",
	}
	for name, content := range files {
		p := filepath.Join(rootfs, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		// resolv.conf may be a link to the host's resolver; replace it.
		os.Remove(p)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// removeGlob removes what pattern matches under root, except keep.
func removeGlob(root, pattern string, keep ...string) error {
	matches, err := filepath.Glob(filepath.Join(root, pattern))
	if err != nil {
		return err
	}
next:
	for _, m := range matches {
		for _, k := range keep {
			if m == filepath.Join(root, k) {
				continue next
			}
		}
		if err := os.RemoveAll(m); err != nil {
			return err
		}
	}
	return nil
}

// progressWriter turns debootstrap's output into progress lines: at most
// one every interval, with counts of the packages retrieved, unpacked and
// configured so far. It keeps the last lines for error messages.
type progressWriter struct {
	mu       sync.Mutex
	p        cluster.Progress
	every    time.Duration
	last     time.Time
	partial  []byte
	tail     []string
	counts   map[string]int
	current  string
	reported string
}

func newProgressWriter(p cluster.Progress, every time.Duration) *progressWriter {
	return &progressWriter{p: p, every: every, last: time.Now(), counts: map[string]int{}}
}

func (w *progressWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.line(strings.TrimSpace(string(w.partial[:i])))
		w.partial = w.partial[i+1:]
	}
	return len(b), nil
}

func (w *progressWriter) line(l string) {
	if l == "" {
		return
	}
	w.tail = append(w.tail, l)
	if len(w.tail) > 30 {
		w.tail = w.tail[1:]
	}
	if msg, ok := strings.CutPrefix(l, "I: "); ok {
		// "Retrieving libc6 2.36-9", "Unpacking libc6...", "Configuring
		// libc6..." count; "Retrieving Packages", "Unpacking the base
		// system..." and the like do not.
		fields := strings.Fields(strings.TrimSuffix(msg, "..."))
		if len(fields) >= 2 {
			switch fields[0] {
			case "Retrieving", "Unpacking", "Configuring":
				switch fields[1] {
				case "InRelease", "Release", "Packages", "required", "the", "base":
				default:
					w.counts[fields[0]]++
				}
			}
		}
		w.current = msg
	}
	if time.Since(w.last) >= w.every {
		w.report()
	}
}

func (w *progressWriter) report() {
	if w.current == "" {
		return
	}
	msg := fmt.Sprintf("%d packages retrieved, %d unpacked, %d configured; now: %s",
		w.counts["Retrieving"], w.counts["Unpacking"], w.counts["Configuring"], w.current)
	if msg != w.reported {
		w.p.Infof("%s", msg)
		w.reported = msg
	}
	w.last = time.Now()
}

// Flush handles a last line without a newline.
func (w *progressWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.partial) > 0 {
		w.line(strings.TrimSpace(string(w.partial)))
		w.partial = nil
	}
}

// Tail returns the last lines written, for error messages.
func (w *progressWriter) Tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.tail, "\n")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
