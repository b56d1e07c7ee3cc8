package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/svclab/svclab/lab/images"
)

// recorder is a cluster.Progress that records step names.
type recorder struct {
	mu    sync.Mutex
	steps []string
}

func (r *recorder) Start(step string) func(error) {
	r.mu.Lock()
	r.steps = append(r.steps, step)
	r.mu.Unlock()
	return func(error) {}
}
func (r *recorder) Infof(string, ...any) {}

// tree is a file in a test layer.
type tree struct {
	path, data, link, hardlink string
	mode                       os.FileMode
	uid                        int
}

func makeLayer(t *testing.T, files []tree) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "rootfs")
	for _, f := range files {
		p := filepath.Join(root, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case f.link != "":
			err = os.Symlink(f.link, p)
		case f.hardlink != "":
			err = os.Link(filepath.Join(root, f.hardlink), p)
		case f.mode.IsDir():
			if err = os.MkdirAll(p, 0o755); err == nil {
				err = os.Chmod(p, f.mode&^os.ModeDir)
			}
		default:
			if err = os.WriteFile(p, []byte(f.data), f.mode.Perm()); err == nil {
				err = os.Chmod(p, f.mode.Perm())
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.uid != 0 && f.link == "" {
			if err := os.Lchown(p, f.uid, f.uid); err != nil {
				t.Skipf("cannot chown in this test environment: %v", err)
			}
		}
	}
	return root
}

// entry is what a test expects of a tar entry.
type entry struct {
	Type     byte
	Mode     int64
	Uid      int
	Data     string
	Linkname string
}

// layerFiles reads a layer's tar into a map by path.
func layerFiles(t *testing.T, l v1.Layer) map[string]entry {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		if _, dup := out[h.Name]; dup {
			t.Errorf("%s twice in the layer", h.Name)
		}
		if !h.AccessTime.IsZero() || h.Uname != "" {
			t.Errorf("%s: access time %v, user name %q: want neither (reproducible layers)", h.Name, h.AccessTime, h.Uname)
		}
		out[h.Name] = entry{Type: h.Typeflag, Mode: h.Mode & 0o7777, Uid: h.Uid, Data: string(data), Linkname: h.Linkname}
	}
}

func TestArchive(t *testing.T) {
	base := makeLayer(t, []tree{
		{path: "bin/sh", data: "#!shell", mode: 0o755},
		{path: "bin/dash", hardlink: "bin/sh"},
		{path: "etc/passwd", data: "root:x:0:0::/root:/bin/sh\n", mode: 0o644},
		{path: "var/mail", mode: os.ModeDir | os.ModeSetgid | 0o775, uid: 8},
		{path: "usr/bin/sh", link: "/bin/sh"},
	})
	top := makeLayer(t, []tree{
		{path: "usr/local/lib/svclab/svclab", data: "svclab binary", mode: 0o755},
		{path: "agnhost", link: "/usr/local/lib/svclab/svclab"},
	})
	agnhost := images.Image{Name: images.ImageAgnhost, Layers: []string{base, top},
		Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Env: []string{"PATH=/usr/bin:/bin"}}
	busybox := images.Image{Name: images.ImageTools, Layers: []string{base}, Cmd: []string{"sh"}, Env: []string{"PATH=/usr/libexec/busybox:/bin"}}
	nginx := images.Image{Name: images.ImageWeb, Layers: []string{base, top}, Entrypoint: []string{"/docker-entrypoint.sh"},
		Cmd: []string{"nginx", "-g", "daemon off;"}, WorkingDir: "/", StopSignal: "SIGQUIT"}

	progress := &recorder{}
	b := &Builder{Dir: t.TempDir(), Progress: progress}
	ctx := context.Background()
	path, err := b.Archive(ctx, []Entry{
		{Image: agnhost, Tags: []string{"registry.k8s.io/e2e-test-images/agnhost:2.53"}},
		{Image: busybox, Tags: []string{"busybox:1.36", "busybox:latest"}},
		{Image: nginx, Tags: []string{"nginx:1.27"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	packed := slices.DeleteFunc(slices.Clone(progress.steps), func(s string) bool { return !strings.HasPrefix(s, "Packing") })
	if len(packed) != 2 {
		t.Errorf("packed %q: want each of the 2 layer directories packed once", packed)
	}

	// The archive's manifest: one entry per image, with its tags, and the
	// shared layer stored once.
	manifest, blobs := readArchive(t, path)
	var tags [][]string
	for _, m := range manifest {
		tags = append(tags, m.RepoTags)
	}
	slices.SortFunc(tags, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	want := [][]string{{"busybox:1.36", "busybox:latest"}, {"nginx:1.27"}, {"registry.k8s.io/e2e-test-images/agnhost:2.53"}}
	if diff := cmp.Diff(want, tags, cmp.Transformer("sort", func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s })); diff != "" {
		t.Errorf("RepoTags (-want +got):\n%s", diff)
	}
	if layerBlobs := len(slices.DeleteFunc(blobs, func(s string) bool { return !strings.HasSuffix(s, ".tar.gz") })); layerBlobs != 2 {
		t.Errorf("%d layer blobs in the archive, want 2 (layers shared between images are stored once): %v", layerBlobs, blobs)
	}

	open := func() (io.ReadCloser, error) { return os.Open(path) }
	img := func(ref string) v1.Image {
		t.Helper()
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		i, err := tarball.Image(open, &tag)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		return i
	}

	// Configurations.
	for _, tc := range []struct {
		ref  string
		want v1.Config
	}{
		{"registry.k8s.io/e2e-test-images/agnhost:2.53", v1.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Env: []string{"PATH=/usr/bin:/bin"}, Labels: map[string]string{LabelImage: images.ImageAgnhost}}},
		{"busybox:latest", v1.Config{Cmd: []string{"sh"}, Env: []string{"PATH=/usr/libexec/busybox:/bin"}, Labels: map[string]string{LabelImage: images.ImageTools}}},
		{"nginx:1.27", v1.Config{Entrypoint: []string{"/docker-entrypoint.sh"}, Cmd: []string{"nginx", "-g", "daemon off;"}, WorkingDir: "/", StopSignal: "SIGQUIT", Labels: map[string]string{LabelImage: images.ImageWeb}}},
	} {
		cf, err := img(tc.ref).ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, cf.Config); diff != "" {
			t.Errorf("%s config (-want +got):\n%s", tc.ref, diff)
		}
		if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
			t.Errorf("%s platform %s/%s", tc.ref, cf.OS, cf.Architecture)
		}
	}

	// Layers: the agnhost image has both, lowest first, and their files.
	layers, err := img("registry.k8s.io/e2e-test-images/agnhost:2.53").Layers()
	if err != nil || len(layers) != 2 {
		t.Fatalf("agnhost layers: %d, %v", len(layers), err)
	}
	wantBase := map[string]entry{
		"bin/":       {Type: tar.TypeDir, Mode: 0o755},
		"bin/dash":   {Type: tar.TypeReg, Mode: 0o755, Data: "#!shell"},
		"bin/sh":     {Type: tar.TypeLink, Mode: 0o755, Linkname: "bin/dash"},
		"etc/":       {Type: tar.TypeDir, Mode: 0o755},
		"etc/passwd": {Type: tar.TypeReg, Mode: 0o644, Data: "root:x:0:0::/root:/bin/sh\n"},
		"usr/":       {Type: tar.TypeDir, Mode: 0o755},
		"usr/bin/":   {Type: tar.TypeDir, Mode: 0o755},
		"usr/bin/sh": {Type: tar.TypeSymlink, Mode: 0o777, Linkname: "/bin/sh"},
		"var/":       {Type: tar.TypeDir, Mode: 0o755},
		"var/mail/":  {Type: tar.TypeDir, Mode: 0o2775, Uid: 8},
	}
	if diff := cmp.Diff(wantBase, layerFiles(t, layers[0])); diff != "" {
		t.Errorf("base layer (-want +got):\n%s", diff)
	}
	wantTop := map[string]entry{
		"agnhost":                     {Type: tar.TypeSymlink, Mode: 0o777, Linkname: "/usr/local/lib/svclab/svclab"},
		"usr/":                        {Type: tar.TypeDir, Mode: 0o755},
		"usr/local/":                  {Type: tar.TypeDir, Mode: 0o755},
		"usr/local/lib/":              {Type: tar.TypeDir, Mode: 0o755},
		"usr/local/lib/svclab/":       {Type: tar.TypeDir, Mode: 0o755},
		"usr/local/lib/svclab/svclab": {Type: tar.TypeReg, Mode: 0o755, Data: "svclab binary"},
	}
	if diff := cmp.Diff(wantTop, layerFiles(t, layers[1])); diff != "" {
		t.Errorf("top layer (-want +got):\n%s", diff)
	}
	// Digests in the manifest match the blobs (tarball.Image verifies
	// the config; check the layers too).
	for _, l := range layers {
		d, _ := l.Digest()
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		h, _, err := v1.SHA256(rc)
		rc.Close()
		if err != nil || h != d {
			t.Errorf("layer blob digest %v, manifest says %v (%v)", h, d, err)
		}
	}

	// The same request gives the same archive without packing again.
	progress.steps = nil
	again, err := b.Archive(ctx, []Entry{
		{Image: nginx, Tags: []string{"nginx:1.27"}},
		{Image: busybox, Tags: []string{"busybox:latest", "busybox:1.36"}},
		{Image: agnhost, Tags: []string{"registry.k8s.io/e2e-test-images/agnhost:2.53"}},
	})
	if err != nil || again != path {
		t.Errorf("second Archive = %q, %v; want the cached %q", again, err, path)
	}
	if len(progress.steps) != 0 {
		t.Errorf("second Archive did work: %q", progress.steps)
	}

	// A layer directory that lab/images removed takes its packed blob
	// with it when the next archive is written.
	if err := os.RemoveAll(top); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Archive(ctx, []Entry{{Image: busybox, Tags: []string{"busybox:1.35"}}}); err != nil {
		t.Fatal(err)
	}
	blobsLeft, _ := filepath.Glob(filepath.Join(b.Dir, "layers", "*.tar.gz"))
	if len(blobsLeft) != 1 {
		t.Errorf("packed layers left: %v; want the base layer's alone", blobsLeft)
	}
}

type manifestEntry struct {
	Config   string
	RepoTags []string
	Layers   []string
}

func readArchive(t *testing.T, path string) ([]manifestEntry, []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var manifest []manifestEntry
	var names []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name == "manifest.json" {
			data, _ := io.ReadAll(tr)
			if err := json.Unmarshal(data, &manifest); err != nil {
				t.Fatal(err)
			}
		}
	}
	if manifest == nil {
		t.Fatalf("%s has no manifest.json: %v", path, names)
	}
	return manifest, names
}

func TestArchiveErrors(t *testing.T) {
	layer := makeLayer(t, []tree{{path: "a", data: "a", mode: 0o644}})
	img := images.Image{Name: "svclab/tools", Layers: []string{layer}}
	for _, tc := range []struct {
		name    string
		entries []Entry
		want    string
	}{
		{"nothing", nil, "no images"},
		{"no tags", []Entry{{Image: img}}, "has no tags"},
		{"bad tag", []Entry{{Image: img, Tags: []string{"Busy Box"}}}, `image reference "Busy Box"`},
		{"duplicate tag", []Entry{{Image: img, Tags: []string{"busybox:1"}}, {Image: img, Tags: []string{"busybox:1"}}}, "given twice"},
		{"no layers", []Entry{{Image: images.Image{Name: "svclab/x"}, Tags: []string{"x:1"}}}, "has no layers"},
		{"missing layer", []Entry{{Image: images.Image{Name: "svclab/x", Layers: []string{"/nonexistent/rootfs"}}, Tags: []string{"x:1"}}}, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &Builder{Dir: t.TempDir()}
			_, err := b.Archive(context.Background(), tc.entries)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
			if archives, _ := filepath.Glob(filepath.Join(b.Dir, "archives", "*")); len(archives) != 0 {
				t.Errorf("left %v", archives)
			}
		})
	}
	// Cancelled while packing: no partial blob is left.
	b := &Builder{Dir: t.TempDir()}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Archive(ctx, []Entry{{Image: img, Tags: []string{"busybox:1"}}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Archive: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(b.Dir, "layers", "*")); len(left) != 0 {
		t.Errorf("cancelled Archive left %v", left)
	}
}

// The same tree packs to the same bytes.
func TestPackReproducible(t *testing.T) {
	layer := makeLayer(t, []tree{{path: "x/y", data: "y", mode: 0o600}, {path: "z", link: "x/y"}})
	var a, b bytes.Buffer
	if err := writeTar(context.Background(), &a, layer); err != nil {
		t.Fatal(err)
	}
	// Reading the files changes their access times, which must not matter.
	if err := writeTar(context.Background(), &b, layer); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("packing the same tree twice gave different bytes")
	}
}
