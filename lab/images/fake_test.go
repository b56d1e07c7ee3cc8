package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// fakeSystem is a hand-written System: its debootstrap lays out a tiny
// root filesystem with the kinds of files the real one leaves behind.
type fakeSystem struct {
	mu             sync.Mutex
	notRoot        bool
	offline        error
	paths          map[string]string
	calls          []string
	debootstrapErr error
}

func newFakeSystem() *fakeSystem {
	return &fakeSystem{paths: map[string]string{"debootstrap": "/usr/sbin/debootstrap", "apt-get": "/usr/bin/apt-get", "chroot": "/usr/sbin/chroot"}}
}

func (f *fakeSystem) IsRoot() bool { return !f.notRoot }

func (f *fakeSystem) LookPath(name string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.paths[name]; ok {
		return p, nil
	}
	return "", fmt.Errorf("%s: not found", name)
}

func (f *fakeSystem) Probe(ctx context.Context, url string) error {
	f.record("probe " + url)
	return f.offline
}

func (f *fakeSystem) record(call string) {
	f.mu.Lock()
	f.calls = append(f.calls, call)
	f.mu.Unlock()
}

func (f *fakeSystem) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeSystem) count(prefix string) int {
	n := 0
	for _, c := range f.Calls() {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

func (f *fakeSystem) Run(ctx context.Context, out io.Writer, name string, args ...string) error {
	f.record(name + " " + strings.Join(args, " "))
	switch filepath.Base(name) {
	case "debootstrap":
		fmt.Fprintln(out, "I: Retrieving InRelease ...")
		fmt.Fprintln(out, "I: Retrieving libc6 2.36-9")
		fmt.Fprintln(out, "I: Retrieving bash 5.2.15-2")
		if f.debootstrapErr != nil {
			fmt.Fprintln(out, "E: Couldn't download packages: libc6")
			return f.debootstrapErr
		}
		rootfs := args[len(args)-2]
		files := map[string]string{
			"bin/bash":                           "bash",
			"bin/busybox":                        "busybox",
			"usr/bin/wget":                       "wget",
			"usr/bin/nslookup":                   "nslookup",
			"usr/sbin/nft":                       "nft",
			"usr/sbin/conntrack":                 "conntrack",
			"usr/share/doc/curl/changelog.gz":    "changes",
			"usr/share/doc/curl/copyright":       "license",
			"usr/share/man/man1/curl.1.gz":       "man",
			"usr/share/locale/de/LC_MESSAGES/x":  "de",
			"usr/share/locale/locale.alias":      "alias",
			"var/cache/apt/archives/curl_1.deb":  "deb",
			"var/cache/apt/pkgcache.bin":         "cache",
			"var/lib/apt/lists/deb.debian.org_x": "list",
			"var/log/dpkg.log":                   "log",
			"etc/resolv.conf":                    "nameserver 192.0.2.53\n",
		}
		for name, content := range files {
			p := filepath.Join(rootfs, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
				return err
			}
		}
		fmt.Fprintln(out, "I: Unpacking libc6...")
		fmt.Fprintln(out, "I: Configuring libc6...")
		fmt.Fprintln(out, "I: Base system installed successfully.")
		return nil
	case "chroot":
		fmt.Fprintln(out, "[\n[[\nsh\nwget\ntelnet\ntraceroute\nnslookup")
		return nil
	}
	return errors.New("fake: unexpected command " + name)
}

// recProgress records the steps and details a build reports.
type recProgress struct {
	mu    sync.Mutex
	steps []string
	infos []string
	fails []string
}

func (p *recProgress) Start(step string) func(error) {
	p.mu.Lock()
	p.steps = append(p.steps, step)
	p.mu.Unlock()
	return func(err error) {
		if err != nil {
			p.mu.Lock()
			p.fails = append(p.fails, step)
			p.mu.Unlock()
		}
	}
}

func (p *recProgress) Infof(format string, args ...any) {
	p.mu.Lock()
	p.infos = append(p.infos, fmt.Sprintf(format, args...))
	p.mu.Unlock()
}

func (p *recProgress) has(list []string, sub string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
