package kind

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/images"
	"github.com/svclab/svclab/lab/kind/ociimage"
)

func TestParseDockerInfo(t *testing.T) {
	exit1 := exec.Command("false").Run()
	for _, tc := range []struct {
		name           string
		stdout, stderr string
		runErr         error
		want           DockerInfo
		is             error
		msg            string
	}{
		{name: "running, cgroup v2", stdout: `{"ServerVersion":"28.0.1","CgroupVersion":"2","CgroupDriver":"systemd"}`, want: DockerInfo{ServerVersion: "28.0.1", CgroupVersion: "2"}},
		{name: "running, cgroup v1", stdout: `{"ServerVersion":"24.0.7","CgroupVersion":"1"}`, want: DockerInfo{ServerVersion: "24.0.7", CgroupVersion: "1"}},
		{name: "old docker says no cgroup version", stdout: `{"ServerVersion":"19.03.2"}`, want: DockerInfo{ServerVersion: "19.03.2", CgroupVersion: "1"}},
		{name: "daemon down (stderr)", stderr: "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n", runErr: exit1,
			is: ErrDockerDown, msg: "the Docker daemon is not running: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"},
		{name: "daemon down (ServerErrors)", stdout: `{"ServerVersion":"","ServerErrors":["Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"]}`, runErr: exit1, is: ErrDockerDown},
		{name: "socket missing", stderr: "error during connect: dial unix /var/run/docker.sock: connect: no such file or directory", runErr: exit1, is: ErrDockerDown},
		{name: "permission denied", stderr: "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: Get \"http://%2Fvar%2Frun%2Fdocker.sock/v1.24/info\": dial unix /var/run/docker.sock: connect: permission denied", runErr: exit1, is: ErrDockerDenied},
		{name: "something else", stderr: "docker: 'info' is not a docker command.", runErr: exit1, msg: "docker info failed: docker: 'info' is not a docker command."},
		{name: "nothing said", runErr: exit1, msg: "docker info failed: exit status 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseDockerInfo([]byte(tc.stdout), tc.stderr, tc.runErr)
			if tc.is == nil && tc.msg == "" {
				if err != nil || got != tc.want {
					t.Errorf("= %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; got %+v", got)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err = %v, want errors.Is %v", err, tc.is)
			}
			if tc.msg != "" && err.Error() != tc.msg {
				t.Errorf("err = %q, want %q", err, tc.msg)
			}
		})
	}
}

// Without a docker command the real engine says so, and the provider turns
// that into one line saying what to install and what to use instead.
func TestNoDockerCommand(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	p := New(t.TempDir(), nil)
	// svclab's own engine is not an option (it would install docker.io).
	p.Engine = Docker{}
	_, err := p.Create(context.Background(), cluster.CreateOptions{Name: "lab", Workers: 1})
	if !errors.Is(err, ErrNoDocker) {
		t.Fatalf("Create without docker: %v", err)
	}
	want := "the kind backend needs Docker, which is not installed here (no docker command on PATH): install Docker (Debian and Ubuntu: sudo apt-get install docker.io; elsewhere Docker Engine or Docker Desktop), or use the embedded backend, which needs no Docker: svclab cluster create --backend embedded"
	if err.Error() != want {
		t.Errorf("err = %q\nwant  %q", err, want)
	}
	if entries, _ := os.ReadDir(filepath.Join(p.StateDir, "kind")); len(entries) != 0 {
		t.Errorf("left %v", entries)
	}
}

// The real engine against a real docker command whose daemon is not
// there.
func TestDockerCheckDaemonDown(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("no docker command here")
	}
	t.Setenv("DOCKER_HOST", "unix://"+t.TempDir()+"/docker.sock")
	_, err := Docker{}.Check(context.Background())
	if !errors.Is(err, ErrDockerDown) {
		t.Fatalf("Check = %v, want ErrDockerDown", err)
	}
	p := New(t.TempDir(), nil)
	_, err = p.Create(context.Background(), cluster.CreateOptions{Name: "lab", Workers: 1})
	if err == nil || !strings.Contains(err.Error(), "Docker is installed but its daemon is not running") {
		t.Errorf("Create = %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(p.StateDir, "kind")); len(entries) != 0 {
		t.Errorf("left %v", entries)
	}
}

func TestProgressLogger(t *testing.T) {
	rec := &stepRecorder{}
	l := newProgressLogger(rec, nil)
	l.V(0).Infof("Creating cluster %q ...\n", "lab")
	l.V(0).Infof(" • %s  ...\n", "Ensuring node image (kindest/node:v1.37.0) 🖼")
	l.V(0).Infof(" ✓ %s\n", "Ensuring node image (kindest/node:v1.37.0) 🖼")
	l.V(0).Infof(" • %s  ...\n", "Preparing nodes 📦")
	l.V(0).Infof(" • %s  ...\n", "Writing configuration 📜") // kind ends the previous step by starting one
	l.Warn("cgroup v1 is deprecated")
	l.V(1).Info("not for the user")
	l.V(0).Infof(" ✗ %s\n", "Writing configuration 📜")
	l.V(0).Infof(" • %s  ...\n", "Starting control-plane 🕹️")
	l.Close(errors.New("kubeadm init failed"))
	want := []string{
		"start Ensuring node image (kindest/node:v1.37.0) 🖼",
		"done Ensuring node image (kindest/node:v1.37.0) 🖼",
		"start Preparing nodes 📦",
		"done Preparing nodes 📦",
		"start Writing configuration 📜",
		"info warning: cgroup v1 is deprecated",
		"fail Writing configuration 📜: failed",
		"start Starting control-plane 🕹️",
		"fail Starting control-plane 🕹️: kubeadm init failed",
	}
	if strings.Join(rec.lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("progress:\n%s\nwant:\n%s", strings.Join(rec.lines, "\n"), strings.Join(want, "\n"))
	}
}

// fakeResolver serves every name with a one-layer image.
type fakeResolver struct{ layer string }

func (f fakeResolver) Available() []string {
	return []string{"busybox", "registry.k8s.io/e2e-test-images/agnhost", "nginx", "registry.k8s.io/coredns/coredns", "registry.k8s.io/kube-proxy"}
}

func (f fakeResolver) Resolve(ref string) (images.Image, error) {
	r, err := images.ParseReference(ref)
	if err != nil {
		return images.Image{}, err
	}
	switch r.Name {
	case "busybox", "registry.k8s.io/e2e-test-images/agnhost", "nginx", images.ImageProxier, images.ImageTools:
		return images.Image{Name: "svclab/" + r.Name, Layers: []string{f.layer}, Cmd: []string{r.Name}}, nil
	}
	return images.Image{}, images.ErrNotFound
}

func TestArchiveEntries(t *testing.T) {
	layer := t.TempDir()
	res := fakeResolver{layer: layer}
	entries, proxier, err := archiveEntries(res, []string{"nginx:1.25", "busybox:1.36"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, e := range entries {
		got[e.Image.Name] = e.Tags
	}
	if !strings.HasPrefix(proxier, "svclab/proxier:") || len(proxier) != len("svclab/proxier:")+12 {
		t.Errorf("proxier ref %q", proxier)
	}
	want := map[string][]string{
		"svclab/busybox": {"busybox:latest", "busybox:1.36"}, // the scenarios use 1.36
		"svclab/registry.k8s.io/e2e-test-images/agnhost": {"registry.k8s.io/e2e-test-images/agnhost:latest", "registry.k8s.io/e2e-test-images/agnhost:2.53"},
		"svclab/nginx":          {"nginx:latest", "nginx:1.25"},
		"svclab/svclab/proxier": {proxier},
		"svclab/svclab/tools":   {"svclab/tools:latest"},
	}
	for k, v := range want {
		if strings.Join(got[k], ",") != strings.Join(v, ",") {
			t.Errorf("%s tags %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("images %v: CoreDNS and kube-proxy come with kind's node image", got)
	}
	// The entries make a real archive.
	b := &ociimage.Builder{Dir: t.TempDir()}
	if _, err := b.Archive(context.Background(), entries); err != nil {
		t.Fatal(err)
	}
	// Same layers, same proxier tag; the DaemonSet is not rolled for nothing.
	if _, again, _ := archiveEntries(res, nil); again != proxier {
		t.Errorf("proxier ref changed: %s → %s", proxier, again)
	}

	for _, tc := range []struct{ ref, want string }{
		{"nginx", "give a tag"},
		{"nginx@sha256:" + strings.Repeat("a", 64), "give a tag and no digest"},
		{"registry.k8s.io/kube-proxy:v1.37.0", "kind's node image brings registry.k8s.io/kube-proxy itself"},
		{"postgres:16", "not available"},
	} {
		if _, _, err := archiveEntries(res, []string{tc.ref}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("archiveEntries(%s) = %v, want an error containing %q", tc.ref, err, tc.want)
		}
	}
}

// The real engine runs "docker info" and reads its answer; a docker
// script on PATH stands in for Docker.
func TestDockerCheckCommand(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\n[ \"$1 $2 $3\" = 'info --format {{json .}}' ] || { echo \"unexpected: $*\" >&2; exit 2; }\necho '{\"ServerVersion\":\"27.5.1\",\"CgroupVersion\":\"1\",\"Driver\":\"overlay2\"}'\n"
	if err := os.WriteFile(filepath.Join(dir, "docker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	info, err := Docker{}.Check(context.Background())
	if err != nil || info != (DockerInfo{ServerVersion: "27.5.1", CgroupVersion: "1"}) {
		t.Errorf("Check = %+v, %v", info, err)
	}
}
