package kind

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"os"
	"path"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/svclab/svclab/lab/images"
)

// The archive built from the lab's real image store (the debootstrapped
// tools layer, the svclab binary layer and the thin layers) holds the
// right programs under the names pods and the kube-proxy DaemonSet use.
func TestLabImagesArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("packs the real tools image (-short)")
	}
	dir, err := images.DefaultDir()
	if err != nil {
		t.Fatal(err)
	}
	haveTools := false
	if layers, err := images.NewStore(dir, images.Options{}).Layers(); err == nil {
		for _, l := range layers {
			haveTools = haveTools || (l.Name == "tools" && l.Current)
		}
	}
	if !haveTools {
		t.Skipf("the tools image is not built in %s: run 'svclab setup' as root first", dir)
	}
	// The test binary stands in for svclab: the images must carry exactly
	// the binary they are given.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exeSum := fileSum(t, exe)

	archive, proxierRef, err := LabImages{Dir: dir, SvclabBin: exe}.Archive(context.Background(), nil, []string{"nginx:1.27"})
	if err != nil {
		t.Fatal(err)
	}
	open := func() (io.ReadCloser, error) { return os.Open(archive) }
	image := func(ref string) v1.Image {
		t.Helper()
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		img, err := tarball.Image(open, &tag)
		if err != nil {
			t.Fatalf("%s is not in the archive: %v", ref, err)
		}
		return img
	}

	for _, tc := range []struct {
		ref        string
		entrypoint []string
		// files maps paths to what they must be: "svclab" (the binary),
		// "elf" (some program), or "-> TARGET" (a symbolic link).
		files map[string]string
	}{
		{ref: proxierRef, entrypoint: []string{"/usr/local/bin/kube-proxy"}, files: map[string]string{
			"usr/local/bin/kube-proxy":    "-> /usr/local/lib/svclab/svclab",
			"usr/local/lib/svclab/svclab": "svclab",
			"usr/sbin/nft":                "elf",
			"usr/sbin/xtables-nft-multi":  "elf",
			"usr/sbin/conntrack":          "elf",
		}},
		{ref: "registry.k8s.io/e2e-test-images/agnhost:2.53", entrypoint: []string{"/agnhost"}, files: map[string]string{
			"agnhost":                     "-> /usr/local/lib/svclab/svclab",
			"usr/local/lib/svclab/svclab": "svclab",
		}},
		{ref: "nginx:1.27", entrypoint: []string{"/docker-entrypoint.sh"}, files: map[string]string{
			"usr/sbin/nginx":              "-> /usr/local/lib/svclab/svclab",
			"usr/local/lib/svclab/svclab": "svclab",
		}},
		{ref: "busybox:1.36", files: map[string]string{
			"usr/bin/busybox": "elf",
			"usr/bin/curl":    "elf",
			"usr/bin/dig":     "elf",
		}},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			img := image(tc.ref)
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if !equal(cf.Config.Entrypoint, tc.entrypoint) {
				t.Errorf("entrypoint %q, want %q", cf.Config.Entrypoint, tc.entrypoint)
			}
			m, err := img.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Layers) < 2 {
				t.Errorf("%d layers: want the tools layer and the image's own", len(m.Layers))
			}
			found := map[string]bool{}
			rc := mutate.Extract(img)
			defer rc.Close()
			tr := tar.NewReader(rc)
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				want, ok := tc.files[path.Clean(h.Name)]
				if !ok {
					continue
				}
				found[path.Clean(h.Name)] = true
				switch want {
				case "svclab":
					sum := sha256.New()
					io.Copy(sum, tr)
					if h.Typeflag != tar.TypeReg || !bytes.Equal(sum.Sum(nil), exeSum) {
						t.Errorf("%s is not the svclab binary given (type %c)", h.Name, h.Typeflag)
					}
				case "elf":
					head := make([]byte, 4)
					io.ReadFull(tr, head)
					if (h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeLink) || (h.Typeflag == tar.TypeReg && string(head) != "\x7fELF") {
						t.Errorf("%s is not a program (type %c, %q)", h.Name, h.Typeflag, head)
					}
				default:
					if h.Typeflag != tar.TypeSymlink || "-> "+h.Linkname != want {
						t.Errorf("%s: type %c → %q, want %s", h.Name, h.Typeflag, h.Linkname, want)
					}
				}
			}
			for f := range tc.files {
				if !found[f] {
					t.Errorf("%s is missing", f)
				}
			}
		})
	}
	// CoreDNS and kube-proxy come with kind's node image, untouched.
	for _, ref := range []string{"registry.k8s.io/kube-proxy:latest", "registry.k8s.io/coredns/coredns:latest"} {
		tag, _ := name.NewTag(ref)
		if _, err := tarball.Image(open, &tag); err == nil {
			t.Errorf("the archive replaces %s", ref)
		}
	}
	fi, _ := os.Stat(archive)
	t.Logf("archive %s: %d MB", archive, fi.Size()>>20)
}

func fileSum(t *testing.T, p string) []byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return h.Sum(nil)
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
