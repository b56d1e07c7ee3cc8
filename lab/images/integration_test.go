package images

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/cluster"
)

// TestBuildToolsImage builds the real tools image into the lab's image
// cache (so it happens once per machine, and the lab then uses it) and
// checks that the commands learners use are in it.
func TestBuildToolsImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Debian root filesystem; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("building the tools image needs root")
	}
	dir, err := DefaultDir()
	if err != nil {
		t.Skip(err)
	}
	s := NewStore(dir, Options{SvclabBin: "/nonexistent"})
	key := toolsKey()
	if _, err := os.Stat(s.layerPath(layerTools, key)); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := Host{}.Probe(ctx, s.mirror+"/dists/"+Suite+"/Release")
		cancel()
		if err != nil {
			t.Skipf("the Debian mirror %s is not reachable: %v", s.mirror, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	start := time.Now()
	if err := s.ensure(ctx, cluster.NewTextProgress(testWriter{t}), []string{layerTools, layerToolsConfig}); err != nil {
		t.Fatal(err)
	}
	t.Logf("tools image ready in %s", time.Since(start).Round(time.Second))

	root := filepath.Join(s.layerPath(layerTools, key), "rootfs")
	for _, cmd := range []string{
		"/bin/bash", "/bin/sh", "/bin/busybox", "/usr/bin/curl", "/usr/bin/wget", "/usr/bin/nslookup", "/usr/bin/dig",
		"/bin/nc", "/sbin/ip", "/usr/sbin/nft", "/usr/sbin/iptables", "/usr/sbin/conntrack", "/usr/bin/tcpdump",
		"/bin/ping", "/bin/ps", "/bin/sleep",
		busyboxAppletDir + "/wget", busyboxAppletDir + "/nslookup", busyboxAppletDir + "/telnet",
	} {
		p, err := resolveIn(root, cmd)
		if err != nil {
			t.Errorf("%s: %v", cmd, err)
			continue
		}
		fi, err := os.Stat(p)
		if err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("%s is not an executable file in the tools image (%v)", cmd, err)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(root, "var/cache/apt/archives/*.deb")); len(m) > 0 {
		t.Errorf("%d .deb files left in the image", len(m))
	}
	if m, _ := filepath.Glob(filepath.Join(root, "usr/share/doc/*/changelog*")); len(m) > 0 {
		t.Errorf("%d changelogs left in the image", len(m))
	}
	var li []LayerInfo
	if li, err = s.Layers(); err == nil {
		for _, l := range li {
			if l.Name == layerTools && l.Key == key {
				t.Logf("tools layer: %d MB, built in %s", l.Bytes>>20, l.Duration.Round(time.Second))
			}
		}
	}
}

// resolveIn follows symbolic links inside root as a chroot would and
// returns the host path of name.
func resolveIn(root, name string) (string, error) {
	parts := strings.Split(strings.Trim(name, "/"), "/")
	cur := "/"
	for hops := 0; len(parts) > 0; {
		next := filepath.Join(cur, parts[0])
		parts = parts[1:]
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", os.ErrInvalid
		}
		to, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(to) {
			to = filepath.Join(cur, to)
		}
		parts = append(strings.Split(strings.Trim(to, "/"), "/"), parts...)
		cur = "/"
	}
	return filepath.Join(root, cur), nil
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
