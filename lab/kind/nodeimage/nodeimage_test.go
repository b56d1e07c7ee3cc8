package nodeimage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/svclab/svclab/lab/images"
)

func TestComponentImage(t *testing.T) {
	for ref, want := range map[string]string{
		"registry.k8s.io/kube-apiserver:v1.37.2":          images.ImageKubeAPIServer,
		"registry.k8s.io/kube-controller-manager:v1.37.2": images.ImageKubeControllerManager,
		"registry.k8s.io/kube-scheduler:v1.37.2":          images.ImageKubeScheduler,
		"registry.k8s.io/kube-proxy:v1.37.2":              images.ImageKubeProxy,
		"registry.k8s.io/coredns/coredns:v1.14.6":         images.ImageCoreDNS,
		"registry.k8s.io/pause:3.10.2":                    images.ImageKubePause,
		"registry.k8s.io/etcd:3.7.0-0":                    images.ImageEtcd,
	} {
		if got, err := componentImage(ref); err != nil || got != want {
			t.Errorf("%s: %s, %v; want %s", ref, got, err, want)
		}
	}
	if _, err := componentImage("registry.k8s.io/kube-dashboard:v1"); err == nil {
		t.Error("an image svclab-kube does not have was accepted")
	}
}

func TestNormalize(t *testing.T) {
	for ref, want := range map[string]string{
		"registry.k8s.io/pause:3.10.2": "registry.k8s.io/pause:3.10.2",
		"svclab/kindnetd:v1.37.2":      "docker.io/svclab/kindnetd:v1.37.2",
		"busybox:1.36":                 "docker.io/library/busybox:1.36",
		"localhost/x:1":                "localhost/x:1",
	} {
		if got := normalize(ref); got != want {
			t.Errorf("%s: %s, want %s", ref, got, want)
		}
	}
}

// The node's files: the sandbox and kindnetd images filled in, kind's
// template marker for the pod subnet kept, scripts executable, the kubelet
// and containerd enabled, the node binaries linked to svclab-kube.
func TestNodeFiles(t *testing.T) {
	tr, err := nodeFiles("registry.k8s.io/pause:3.10.2")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := tr.write(root); err != nil {
		t.Fatal(err)
	}
	read := func(p string) string {
		data, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	if c := read("etc/containerd/config.toml"); !strings.Contains(c, `sandbox_image = "registry.k8s.io/pause:3.10.2"`) || !strings.Contains(c, `bin_dir = "/usr/lib/cni"`) {
		t.Errorf("containerd config:\n%s", c)
	}
	cni := read("kind/manifests/default-cni.yaml")
	for _, want := range []string{"image: " + KindnetdImage, "value: {{ .PodSubnet }}", "would you kindly template this file", "would you kindly patch this file"} {
		if !strings.Contains(cni, want) {
			t.Errorf("CNI manifest lacks %q", want)
		}
	}
	// Once kind has templated it, it is valid YAML.
	for _, doc := range strings.Split(strings.ReplaceAll(cni, "{{ .PodSubnet }}", "10.244.0.0/16"), "\n---\n") {
		var v map[string]any
		if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
			t.Errorf("CNI manifest document: %v\n%s", err, doc)
		}
	}
	if v := read("kind/version"); v != "v1.37.2" {
		t.Errorf("/kind/version = %q", v)
	}
	for _, p := range []string{"usr/local/bin/entrypoint", "kind/bin/kubelet-cgroups-v2"} {
		if fi, err := os.Stat(filepath.Join(root, p)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v %v", p, fi, err)
		}
	}
	for link, want := range map[string]string{
		"usr/bin/kubelet": kubePath, "usr/bin/kubeadm": kubePath, "usr/bin/kubectl": kubePath,
		"etc/systemd/system/multi-user.target.wants/kubelet.service":    "/etc/systemd/system/kubelet.service",
		"etc/systemd/system/multi-user.target.wants/containerd.service": "/lib/systemd/system/containerd.service",
	} {
		if got, err := os.Readlink(filepath.Join(root, link)); err != nil || got != want {
			t.Errorf("%s -> %q (%v), want %s", link, got, err, want)
		}
	}
	other, _ := nodeFiles("registry.k8s.io/pause:3.11")
	if other.key() == tr.key() {
		t.Error("another sandbox image gives the same key")
	}
}

func TestTrimSystemd(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{
		"lib/systemd/system/multi-user.target.wants/getty.target",
		"etc/systemd/system/multi-user.target.wants/containerd.service",
		"lib/systemd/system/sockets.target.wants/systemd-udevd-control.socket",
		"lib/systemd/system/sockets.target.wants/systemd-journald.socket",
		"lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service",
		"etc/systemd/journald.conf",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		os.WriteFile(filepath.Join(root, p), nil, 0o644)
	}
	if err := trimSystemd(root); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{
		"lib/systemd/system/multi-user.target.wants/getty.target":                false,
		"etc/systemd/system/multi-user.target.wants/containerd.service":          false,
		"lib/systemd/system/sockets.target.wants/systemd-udevd-control.socket":   false,
		"lib/systemd/system/sockets.target.wants/systemd-journald.socket":        true,
		"lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service": false,
		"etc/kubernetes/manifests": true,
	} {
		if _, err := os.Lstat(filepath.Join(root, p)); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", p, err == nil, want)
		}
	}
	if got, _ := os.Readlink(filepath.Join(root, "sbin/init")); got != "/lib/systemd/systemd" {
		t.Errorf("/sbin/init -> %q", got)
	}
	if j, _ := os.ReadFile(filepath.Join(root, "etc/systemd/journald.conf")); string(j) != "ReadKMsg=no\n" {
		t.Errorf("journald.conf: %q", j)
	}
}
