package nodeimage

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/flock"
	"github.com/svclab/svclab/lab/images"
	"github.com/svclab/svclab/lab/kind/ociimage"
)

// DefaultImage is the node image svclab builds, and its kind backend's
// default.
const DefaultImage = "svclab/kind-node:" + cluster.KubernetesVersion

// LabelKey is the node image's label holding the key of what went into it.
const LabelKey = "dev.svclab.kind-node.key"

// LabelBuild marks svclab's build containers (its value is the building
// process), so that a crashed build's container can be found and removed.
const LabelBuild = "dev.svclab.kind-node.build"

// KindnetdImage is the name of the kindnet DaemonSet's image in the node.
const KindnetdImage = "svclab/kindnetd:" + cluster.KubernetesVersion

// recipe changes whenever the way the image is made changes.
const recipe = 1

// Packages are the Debian packages of the node's root file system, on top
// of debootstrap's minbase variant (kind's base image's list, with
// Debian's containerd, runc and CNI plugins instead of upstream builds).
func Packages() []string {
	return []string{
		"systemd", "dbus", "libseccomp2",
		"conntrack", "iptables", "nftables", "iproute2", "ethtool", "util-linux", "mount", "kmod", "socat",
		"bash", "ca-certificates", "curl", "procps",
		"containerd", "runc", "containernetworking-plugins",
	}
}

//go:embed files
var files embed.FS

// Paths in the node.
const (
	kubePath     = images.KubePath // lab/images' kube layer puts it there
	manifestsDir = "/kind/manifests"
)

// Docker is what the build needs from the Docker engine.
type Docker interface {
	// ImageLabel returns an image's label, and whether the image exists.
	ImageLabel(ctx context.Context, image, label string) (value string, exists bool, err error)
	// Load loads an image archive.
	Load(ctx context.Context, archive string) error
	// Save writes image to an archive at path.
	Save(ctx context.Context, image, path string) error
	// Run starts a container (docker run -d ARGS).
	Run(ctx context.Context, args ...string) error
	// Exec runs argv in a container, with stdin from the file at stdin
	// when it is not "", and returns its output.
	Exec(ctx context.Context, container, stdin string, argv ...string) (string, error)
	// Commit makes an image of a container with the given changes.
	Commit(ctx context.Context, container, image string, changes ...string) error
	// RemoveContainer removes a container and its volumes.
	RemoveContainer(ctx context.Context, container string) error
	// RemoveImage removes an image (its name).
	RemoveImage(ctx context.Context, image string) error
	// PruneImages removes the untagged images that have label (node
	// images a newer one replaced under the same name).
	PruneImages(ctx context.Context, label string) error
	// Containers lists the containers (running or not) that have label,
	// with its value.
	Containers(ctx context.Context, label string) (map[string]string, error)
}

// Kube is svclab-kube, asked for what kubeadm needs.
type Kube interface {
	// ImagesList returns "kubeadm config images list" for version.
	ImagesList(ctx context.Context, version string) ([]string, error)
}

// Builder builds and loads the node image.
type Builder struct {
	// Image is the node image's name (DefaultImage when empty).
	Image string
	// Store holds the lab's images; its svclab-kube
	// (images.Options.KubeBin) is the node's.
	Store *images.Store
	// Layers holds the node's own layers (root file system, files), in a
	// store of their own.
	Layers *images.Store
	// Kube answers for kubeadm.
	Kube Kube
	// CacheDir holds the saved node images (archives by key) and the
	// packed layers.
	CacheDir string
	Docker   Docker
	Progress cluster.Progress
	Log      *slog.Logger
}

// Result says what Ensure did.
type Result struct {
	Image string
	Key   string
	// Archive is the saved node image.
	Archive string
	// Built says the image was built; Loaded that it was loaded from the
	// archive; neither, that the engine had it.
	Built, Loaded bool
	Duration      time.Duration
}

func (b *Builder) image() string {
	if b.Image == "" {
		return DefaultImage
	}
	return b.Image
}

func (b *Builder) log() *slog.Logger {
	if b.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return b.Log
}

// plan is what goes into one node image.
type plan struct {
	key      string
	rootfs   images.Layer
	config   images.Layer
	entries  []ociimage.Entry
	required []string // the references kubeadm and the kindnet manifest use
	sandbox  string
}

// Ensure makes the node image available in the engine: nothing to do when
// the engine has it with the current key, a docker load when the cache has
// the archive, a build otherwise.
func (b *Builder) Ensure(ctx context.Context) (Result, error) {
	start := time.Now()
	p := cluster.OrNop(b.Progress)
	res := Result{Image: b.image()}
	pl, err := b.plan(ctx, p)
	if err != nil {
		return res, err
	}
	res.Key = pl.key
	res.Archive = filepath.Join(b.CacheDir, "kind-node-"+pl.key+".tar")
	if v, ok, err := b.Docker.ImageLabel(ctx, res.Image, LabelKey); err != nil {
		return res, err
	} else if ok && v == pl.key {
		p.Infof("the engine has the node image %s already (key %s)", res.Image, pl.key)
		res.Duration = time.Since(start)
		return res, nil
	}
	if err := os.MkdirAll(b.CacheDir, 0o755); err != nil {
		return res, fmt.Errorf("the node image cache %s is not writable: %w", b.CacheDir, err)
	}
	unlock, err := flock.Lock(filepath.Join(b.CacheDir, ".kind-node.lock"), 0o644)
	if err != nil {
		return res, err
	}
	defer unlock()
	if _, err := os.Stat(res.Archive); err != nil {
		if err := b.build(ctx, p, pl, res.Archive); err != nil {
			return res, err
		}
		res.Built = true
	}
	if v, ok, err := b.Docker.ImageLabel(ctx, res.Image, LabelKey); err != nil || !ok || v != pl.key {
		done := p.Start("Loading the node image " + res.Image + " into the engine (docker load)")
		err := b.Docker.Load(ctx, res.Archive)
		done(err)
		if err != nil {
			return res, fmt.Errorf("loading the node image: %w", err)
		}
		res.Loaded = true
	}
	b.prune(res.Archive)
	if res.Built || res.Loaded {
		if err := b.Docker.PruneImages(ctx, LabelKey); err != nil {
			b.log().Warn("removing superseded node images", "err", err)
		}
	}
	res.Duration = time.Since(start)
	return res, nil
}

// plan lists what goes into the image and its key, building the lab's
// images (cached) first.
func (b *Builder) plan(ctx context.Context, p cluster.Progress) (*plan, error) {
	if b.Store == nil || b.Layers == nil || b.Kube == nil || b.Docker == nil || b.CacheDir == "" {
		return nil, errors.New("nodeimage.Builder needs a Store, Layers, Kube, Docker and CacheDir")
	}
	var required []string
	err := cluster.RunActions(ctx, p, []cluster.Action{{Name: "Asking kubeadm " + cluster.KubernetesVersion + " which images it needs", Run: func(ctx context.Context) error {
		var err error
		required, err = b.Kube.ImagesList(ctx, cluster.KubernetesVersion)
		if err == nil {
			p.Infof("%s", strings.Join(required, ", "))
		}
		return err
	}}})
	if err != nil {
		return nil, err
	}
	if err := b.Store.Build(ctx, p); err != nil {
		return nil, err
	}
	pl := &plan{}
	byImage := map[string][]string{}
	var order []string
	for _, ref := range required {
		img, err := componentImage(ref)
		if err != nil {
			return nil, err
		}
		if img == images.ImageKubePause {
			pl.sandbox = ref
		}
		if _, ok := byImage[img]; !ok {
			order = append(order, img)
		}
		byImage[img] = append(byImage[img], ref)
	}
	if pl.sandbox == "" {
		return nil, fmt.Errorf("kubeadm names no pause image in %q", required)
	}
	order = append(order, images.ImageKindnetd)
	byImage[images.ImageKindnetd] = []string{KindnetdImage}
	h := sha256.New()
	fmt.Fprintf(h, "recipe=%d suite=%s packages=%s\n", recipe, images.Suite, strings.Join(Packages(), ","))
	for _, name := range order {
		img, err := b.Store.Resolve(name)
		if err != nil {
			return nil, err
		}
		// Layer directories are named by their keys.
		fmt.Fprintf(h, "%s %s %s\n", name, strings.Join(byImage[name], ","), strings.Join(img.Layers, ","))
		pl.entries = append(pl.entries, ociimage.Entry{Image: img, Tags: byImage[name]})
		pl.required = append(pl.required, byImage[name]...)
	}
	tree, err := nodeFiles(pl.sandbox)
	if err != nil {
		return nil, err
	}
	pl.rootfs = b.rootfsLayer()
	pl.config = images.Layer{Name: "kind-node-files", Key: tree.key(), Title: "the kind node's files (entrypoint, units, containerd's configuration, manifests)",
		Build: func(_ context.Context, _ cluster.Progress, rootfs string) error { return tree.write(rootfs) }}
	fmt.Fprintf(h, "rootfs=%s files=%s\n", pl.rootfs.Key, pl.config.Key)
	pl.key = hex.EncodeToString(h.Sum(nil))[:16]
	return pl, nil
}

// componentImage maps a reference kubeadm asks for to the lab image that
// serves it.
func componentImage(ref string) (string, error) {
	r, err := images.ParseReference(ref)
	if err != nil {
		return "", err
	}
	switch path.Base(r.Name) {
	case "kube-apiserver":
		return images.ImageKubeAPIServer, nil
	case "kube-controller-manager":
		return images.ImageKubeControllerManager, nil
	case "kube-scheduler":
		return images.ImageKubeScheduler, nil
	case "kube-proxy":
		return images.ImageKubeProxy, nil
	case "etcd":
		return images.ImageEtcd, nil
	case "coredns":
		return images.ImageCoreDNS, nil
	case "pause":
		return images.ImageKubePause, nil
	}
	return "", fmt.Errorf("kubeadm asks for %s, which svclab-kube does not provide", ref)
}

// rootfsLayer is the node's root file system, keyed by the recipe and the
// package list.
func (b *Builder) rootfsLayer() images.Layer {
	sum := sha256.Sum256(fmt.Appendf(nil, "recipe=%d packages=%s", recipe, strings.Join(Packages(), ",")))
	return images.Layer{Name: "kind-node-rootfs", Key: images.Suite + "-" + hex.EncodeToString(sum[:])[:12],
		Title: fmt.Sprintf("the kind node's root file system (Debian %s with systemd, containerd, runc and %d more packages; cold: a few minutes)", images.Suite, len(Packages())-3),
		Build: b.buildRootfs}
}

// buildRootfs debootstraps the node's packages and trims the systemd
// units a container must not run, as kind's base image does.
func (b *Builder) buildRootfs(ctx context.Context, p cluster.Progress, rootfs string) error {
	err := b.Layers.Debootstrap(ctx, p, rootfs, images.Bootstrap{Name: "kind-node", Key: "kind-node-" + filepath.Base(filepath.Dir(rootfs)),
		Packages: Packages(), Title: fmt.Sprintf("Bootstrapping Debian %s with the kind node's %d packages", images.Suite, len(Packages()))})
	if err != nil {
		return err
	}
	return trimSystemd(rootfs)
}

// trimSystemd removes the units that make no sense in a node container
// (udev, getty, the units Debian's packages enabled) and links /sbin/init
// to systemd; the node's own units are enabled by its files layer.
func trimSystemd(rootfs string) error {
	for _, pattern := range []string{
		"lib/systemd/system/multi-user.target.wants/*",
		"etc/systemd/system/*.wants/*",
		"lib/systemd/system/local-fs.target.wants/*",
		"lib/systemd/system/sockets.target.wants/*udev*",
		"lib/systemd/system/sockets.target.wants/*initctl*",
		"lib/systemd/system/basic.target.wants/*",
		"lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service",
	} {
		matches, err := filepath.Glob(filepath.Join(rootfs, pattern))
		if err != nil {
			return err
		}
		for _, m := range matches {
			if err := os.RemoveAll(m); err != nil {
				return err
			}
		}
	}
	f, err := os.OpenFile(filepath.Join(rootfs, "etc/systemd/journald.conf"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString("ReadKMsg=no\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	init := filepath.Join(rootfs, "sbin/init")
	os.Remove(init)
	if err := os.MkdirAll(filepath.Dir(init), 0o755); err != nil {
		return err
	}
	if err := os.Symlink("/lib/systemd/systemd", init); err != nil {
		return err
	}
	return os.MkdirAll(filepath.Join(rootfs, "etc/kubernetes/manifests"), 0o755)
}

// tree is the node's files layer: paths to contents (mode 0644 unless
// executable), and symbolic links.
type tree struct {
	files map[string]string
	exec  map[string]bool
	links map[string]string
	dirs  []string
}

func (t tree) key() string {
	h := sha256.New()
	for _, p := range slices.Sorted(maps.Keys(t.files)) {
		fmt.Fprintf(h, "f %s %v %d\n%s", p, t.exec[p], len(t.files[p]), t.files[p])
	}
	for _, p := range slices.Sorted(maps.Keys(t.links)) {
		fmt.Fprintf(h, "l %s %s\n", p, t.links[p])
	}
	fmt.Fprintf(h, "d %s\n", strings.Join(t.dirs, ","))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func (t tree) write(root string) error {
	for _, d := range t.dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	for p, data := range t.files {
		dst := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		mode := fs.FileMode(0o644)
		if t.exec[p] {
			mode = 0o755
		}
		if err := os.WriteFile(dst, []byte(data), mode); err != nil {
			return err
		}
		if err := os.Chmod(dst, mode); err != nil {
			return err
		}
	}
	for p, target := range t.links {
		dst := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(target, dst); err != nil {
			return err
		}
	}
	return nil
}

// nodeFiles is the node's files layer for a sandbox (pause) image.
func nodeFiles(sandbox string) (tree, error) {
	read := func(name string) (string, error) {
		data, err := files.ReadFile("files/" + name)
		return string(data), err
	}
	t := tree{files: map[string]string{}, exec: map[string]bool{}, links: map[string]string{}}
	for dst, src := range map[string]string{
		"/usr/local/bin/entrypoint":                             "entrypoint",
		"/kind/bin/kubelet-cgroups-v2":                          "kubelet-cgroups-v2",
		"/etc/containerd/config.toml":                           "containerd-config.toml",
		"/etc/crictl.yaml":                                      "crictl.yaml",
		"/etc/default/kubelet":                                  "default-kubelet",
		"/etc/sysctl.d/10-svclab-node.conf":                     "sysctl.conf",
		"/etc/systemd/system/kubelet.service":                   "kubelet.service",
		"/etc/systemd/system/kubelet.slice":                     "kubelet.slice",
		"/etc/systemd/system/kubelet.service.d/10-kubeadm.conf": "kubelet-kubeadm.conf",
		"/etc/systemd/system/kubelet.service.d/11-cgroups.conf": "kubelet-cgroups.conf",
		manifestsDir + "/default-cni.yaml":                      "default-cni.yaml",
		manifestsDir + "/default-storage.yaml":                  "default-storage.yaml",
	} {
		data, err := read(src)
		if err != nil {
			return t, err
		}
		data = strings.ReplaceAll(data, "@SANDBOX_IMAGE@", sandbox)
		data = strings.ReplaceAll(data, "@KINDNETD_IMAGE@", KindnetdImage)
		t.files[dst] = data
		t.exec[dst] = strings.HasPrefix(dst, "/usr/local/bin/") || strings.HasPrefix(dst, "/kind/bin/")
	}
	t.files["/kind/version"] = cluster.KubernetesVersion
	for _, name := range []string{"kubelet", "kubeadm", "kubectl"} {
		t.links["/usr/bin/"+name] = kubePath
	}
	t.links["/etc/systemd/system/multi-user.target.wants/kubelet.service"] = "/etc/systemd/system/kubelet.service"
	t.links["/etc/systemd/system/multi-user.target.wants/containerd.service"] = "/lib/systemd/system/containerd.service"
	t.links["/etc/systemd/system/systemd-binfmt.service"] = "/dev/null"
	t.links["/opt/cni/bin"] = "/usr/lib/cni"
	t.dirs = []string{"/etc/kubernetes/manifests", "/etc/cni/net.d", "/var/lib/kubelet"}
	return t, nil
}

// buildContainerPrefix names svclab's build containers.
const buildContainerPrefix = "svclab-kind-node-build-"

// build makes the node image and saves it to archive.
func (b *Builder) build(ctx context.Context, p cluster.Progress, pl *plan, archive string) (err error) {
	b.sweep(ctx)
	rootfs, err := b.Layers.EnsureLayer(ctx, p, pl.rootfs)
	if err != nil {
		return err
	}
	config, err := b.Layers.EnsureLayer(ctx, p, pl.config)
	if err != nil {
		return err
	}
	packer := &ociimage.Builder{Dir: filepath.Join(b.CacheDir, "oci"), Progress: p, Log: b.log()}
	base := "svclab/kind-node-base:" + pl.key
	// The node's layers: the root file system, its files, svclab-kube
	// (the kube layer the component images share).
	kube, err := b.Store.KubeLayer()
	if err != nil {
		return err
	}
	baseArchive, err := packer.Archive(ctx, []ociimage.Entry{{Image: images.Image{
		Name: "svclab/kind-node-base", Layers: []string{rootfs, config, kube},
		Entrypoint: []string{"/usr/local/bin/entrypoint", "/sbin/init"},
		Env:        []string{"container=docker", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		StopSignal: "SIGRTMIN+3",
	}, Tags: []string{base}}})
	if err != nil {
		return err
	}
	componentArchive, err := packer.Archive(ctx, pl.entries)
	if err != nil {
		return err
	}
	done := p.Start("Loading the base image into the engine")
	err = b.Docker.Load(ctx, baseArchive)
	done(err)
	if err != nil {
		return err
	}
	defer b.Docker.RemoveImage(context.WithoutCancel(ctx), base)

	suffix := make([]byte, 4)
	rand.Read(suffix)
	name := buildContainerPrefix + pl.key[:8] + "-" + hex.EncodeToString(suffix)
	// The build container needs no privilege: containerd imports the
	// images without unpacking them (no mounts), as in kind's builds.
	if err := b.Docker.Run(ctx, "--name", name, "--label", fmt.Sprintf("%s=%d", LabelBuild, os.Getpid()), "--network", "none",
		"--entrypoint", "sleep", base, "infinity"); err != nil {
		return fmt.Errorf("starting the build container: %w", err)
	}
	defer func() {
		if rerr := b.Docker.RemoveContainer(context.WithoutCancel(ctx), name); rerr != nil {
			b.log().Warn("removing the node image's build container", "container", name, "err", rerr)
		}
	}()
	err = cluster.RunActions(ctx, p, []cluster.Action{
		{Name: "Starting containerd in the build container", Run: func(ctx context.Context) error {
			if _, err := b.Docker.Exec(ctx, name, "", "sh", "-c", "nohup containerd >/tmp/containerd.log 2>&1 &"); err != nil {
				return err
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				_, err := b.Docker.Exec(ctx, name, "", "ctr", "version")
				if err == nil {
					return nil
				}
				if time.Now().After(deadline) {
					log, _ := b.Docker.Exec(ctx, name, "", "tail", "-n", "20", "/tmp/containerd.log")
					return fmt.Errorf("containerd did not answer: %w\n%s", err, log)
				}
				time.Sleep(300 * time.Millisecond)
			}
		}},
		{Name: fmt.Sprintf("Importing %d images into the node's containerd (%s)", len(pl.required), strings.Join(pl.required, ", ")), Run: func(ctx context.Context) error {
			_, err := b.Docker.Exec(ctx, name, componentArchive, "ctr", "--namespace=k8s.io", "images", "import",
				"--label=io.cri-containerd.pinned=pinned", "--all-platforms", "--no-unpack", "--digests", "-")
			if err != nil {
				return err
			}
			out, err := b.Docker.Exec(ctx, name, "", "ctr", "--namespace=k8s.io", "images", "list", "-q")
			if err != nil {
				return err
			}
			have := strings.Fields(out)
			var missing []string
			for _, ref := range pl.required {
				if !slices.Contains(have, normalize(ref)) {
					missing = append(missing, ref)
				}
			}
			if len(missing) > 0 {
				return fmt.Errorf("containerd does not list %s after the import (it has %s)", strings.Join(missing, ", "), strings.Join(have, ", "))
			}
			return nil
		}},
		{Name: "Stopping containerd", Run: func(ctx context.Context) error {
			// The build container's init (sleep) reaps nobody: containerd
			// is done once it is a zombie.
			_, err := b.Docker.Exec(ctx, name, "", "sh", "-c",
				"running() { ps -C containerd -o stat= | grep -qv '^Z'; }; pkill -x containerd; "+
					"for i in $(seq 300); do running || break; sleep 0.1; done; "+
					"! running && rm -rf /run/containerd /tmp/containerd.log")
			return err
		}},
		{Name: "Committing the node image " + b.image(), Run: func(ctx context.Context) error {
			// The environment and stop signal come from the base image;
			// the entrypoint is back from the build container's sleep.
			return b.Docker.Commit(ctx, name, b.image(),
				`ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]`,
				`CMD []`,
				fmt.Sprintf("LABEL %s=%s", LabelKey, pl.key))
		}},
		{Name: "Saving the node image to the cache", Run: func(ctx context.Context) error {
			tmp := archive + ".partial"
			os.Remove(tmp)
			if err := b.Docker.Save(ctx, b.image(), tmp); err != nil {
				os.Remove(tmp)
				return err
			}
			return os.Rename(tmp, archive)
		}},
	})
	return err
}

// normalize is containerd's name for ref: docker.io/library/ for short
// names.
func normalize(ref string) string {
	first, _, ok := strings.Cut(ref, "/")
	if !ok {
		return "docker.io/library/" + ref
	}
	if !strings.ContainsAny(first, ".:") && first != "localhost" {
		return "docker.io/" + ref
	}
	return ref
}

// sweep removes build containers whose building process is gone (a build
// that crashed); those of a live build stay.
func (b *Builder) sweep(ctx context.Context) {
	ids, err := b.Docker.Containers(ctx, LabelBuild)
	if err != nil {
		b.log().Warn("listing leftover node image build containers", "err", err)
		return
	}
	for id, pid := range ids {
		if pidAlive(pid) {
			continue
		}
		if err := b.Docker.RemoveContainer(ctx, id); err != nil {
			b.log().Warn("removing a leftover node image build container", "container", id, "err", err)
		}
	}
}

// prune removes saved node images other than keep.
func (b *Builder) prune(keep string) {
	matches, _ := filepath.Glob(filepath.Join(b.CacheDir, "kind-node-*.tar"))
	for _, m := range matches {
		if m != keep {
			if err := os.Remove(m); err == nil {
				b.log().Info("removed a superseded node image archive", "path", m)
			}
		}
	}
}
