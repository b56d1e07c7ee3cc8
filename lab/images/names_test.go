package images

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseReference(t *testing.T) {
	digest := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	tests := []struct {
		ref  string
		want Reference
		err  string
	}{
		{ref: "busybox", want: Reference{Name: "busybox"}},
		{ref: "busybox:1.36", want: Reference{Name: "busybox", Tag: "1.36"}},
		{ref: "docker.io/library/busybox:1.36", want: Reference{Name: "busybox", Tag: "1.36"}},
		{ref: "library/nginx", want: Reference{Name: "nginx"}},
		{ref: "index.docker.io/nicolaka/netshoot:v0.13", want: Reference{Name: "nicolaka/netshoot", Tag: "v0.13"}},
		{ref: "nginx@" + digest, want: Reference{Name: "nginx", Digest: digest}},
		{ref: "nginx:1.27-alpine@" + digest, want: Reference{Name: "nginx", Tag: "1.27-alpine", Digest: digest}},
		{ref: "registry.k8s.io/e2e-test-images/agnhost:2.53", want: Reference{Name: "registry.k8s.io/e2e-test-images/agnhost", Tag: "2.53"}},
		{ref: "k8s.gcr.io/e2e-test-images/agnhost:2.39", want: Reference{Name: "registry.k8s.io/e2e-test-images/agnhost", Tag: "2.39"}},
		{ref: "localhost:5000/web", want: Reference{Name: "localhost:5000/web"}},
		{ref: "localhost:5000/web:v2", want: Reference{Name: "localhost:5000/web", Tag: "v2"}},
		{ref: "  busybox  ", want: Reference{Name: "busybox"}},
		{ref: "", err: "empty"},
		{ref: "busybox:", err: "empty tag"},
		{ref: "busybox@sha256:xyz", err: "invalid digest"},
		{ref: "docker.io/", err: "no valid name"},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			got, err := ParseReference(tt.ref)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseReference(%q) = %+v, %v; want an error with %q", tt.ref, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseReference(%q) = %+v, %v; want %+v", tt.ref, got, err, tt.want)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		ref        string
		image      string
		entrypoint []string
		cmd        []string
	}{
		{"busybox:1.36", ImageTools, nil, []string{"sh"}},
		{"docker.io/library/busybox", ImageTools, nil, []string{"sh"}},
		{"ubuntu:24.04", ImageTools, nil, []string{"bash"}},
		{"debian:bookworm-slim", ImageTools, nil, []string{"bash"}},
		{"alpine:3.20", ImageTools, nil, []string{"/bin/sh"}},
		{"curlimages/curl:8.10.1", ImageTools, []string{"/entrypoint.sh"}, []string{"curl"}},
		{"nicolaka/netshoot", ImageTools, nil, []string{"bash"}},
		{"registry.k8s.io/e2e-test-images/agnhost:2.53", ImageAgnhost, []string{"/agnhost"}, []string{"pause"}},
		{"registry.k8s.io/pause:3.10.2", ImageAgnhost, []string{"/pause"}, nil},
		{"k8s.gcr.io/pause:3.1", ImageAgnhost, []string{"/pause"}, nil},
		{"registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1", ImageTools, nil, []string{"bash"}},
		{"registry.k8s.io/e2e-test-images/httpd:2.4.39-4", ImageWeb, nil, []string{"httpd-foreground"}},
		{"nginx", ImageWeb, []string{"/docker-entrypoint.sh"}, []string{"nginx", "-g", "daemon off;"}},
		{"nginx:1.27-alpine", ImageWeb, []string{"/docker-entrypoint.sh"}, []string{"nginx", "-g", "daemon off;"}},
		{"httpd:2.4", ImageWeb, nil, []string{"httpd-foreground"}},
		{"registry.k8s.io/coredns/coredns:v1.11.3", ImageCoreDNS, []string{"/coredns"}, nil},
		{"registry.k8s.io/kube-proxy:v1.37.2", ImageProxier, []string{"/usr/local/bin/kube-proxy"}, nil},
		{"svclab/proxier", ImageProxier, []string{"/usr/local/bin/kube-proxy"}, nil},
		{"svclab/tools", ImageTools, nil, []string{"bash"}},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			v, err := lookup(tt.ref)
			if err != nil {
				t.Fatal(err)
			}
			if v.image != tt.image || !slices.Equal(v.entrypoint, tt.entrypoint) || !slices.Equal(v.cmd, tt.cmd) {
				t.Fatalf("lookup(%q) = %s %q %q; want %s %q %q", tt.ref, v.image, v.entrypoint, v.cmd, tt.image, tt.entrypoint, tt.cmd)
			}
		})
	}
}

func TestLookupUnknown(t *testing.T) {
	for _, ref := range []string{"nginxx", "redis:7", "gcr.io/google-samples/hello-app:1.0", "registry.k8s.io/e2e-test-images/agnhostt:2.53", "quay.io/nginx", "busybox:"} {
		t.Run(ref, func(t *testing.T) {
			_, err := lookup(ref)
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("lookup(%q) = %v, want ErrNotFound", ref, err)
			}
		})
	}
	_, err := lookup("redis:7")
	msg := err.Error()
	for _, want := range []string{`"redis:7"`, "not available in this lab", "no registry", "busybox, ubuntu", "registry.k8s.io/e2e-test-images/agnhost", "nginx", "httpd", "(any tag)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "svclab/") {
		t.Errorf("message lists internal names: %q", msg)
	}
}

func TestAvailable(t *testing.T) {
	s := NewStore(t.TempDir(), Options{System: newFakeSystem(), SvclabBin: "/nonexistent", Mirror: DefaultMirror})
	got := s.Available()
	want := []string{"busybox", "ubuntu", "debian", "registry.k8s.io/e2e-test-images/jessie-dnsutils", "alpine", "curlimages/curl", "nicolaka/netshoot",
		"registry.k8s.io/e2e-test-images/agnhost", "registry.k8s.io/e2e-test-images/regression-issue-74839", "registry.k8s.io/pause", "nginx", "httpd",
		"registry.k8s.io/coredns/coredns", "registry.k8s.io/kube-proxy"}
	if !slices.Equal(got, want) {
		t.Fatalf("Available() = %q, want %q", got, want)
	}
	// Every name it lists resolves to an image with layers.
	for _, name := range got {
		v, err := lookup(name + ":latest")
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if len(imageLayers[v.image]) == 0 {
			t.Errorf("%s maps to %s, which has no layers", name, v.image)
		}
	}
}
