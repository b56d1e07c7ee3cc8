package images

import (
	"errors"
	"fmt"
	"strings"
)

// Canonical names of the images the lab builds.
const (
	ImageTools   = "svclab/tools"
	ImageAgnhost = "svclab/agnhost"
	ImageWeb     = "svclab/web"
	ImageCoreDNS = "svclab/coredns"
	ImageProxier = "svclab/proxier"
	// ImageNode is the file system of an embedded cluster's nodes: tools
	// plus svclab-kube where the control-plane terminal's kubectl runs it
	// from, so a terminal needs no copy of it per cluster.
	ImageNode = "svclab/node"
)

// The Kubernetes component images (svclab-kube under each component's
// name), which the kind backend's node image holds under the names
// kubeadm asks for. Pods of embedded clusters do not use them.
const (
	ImageKubeAPIServer         = "svclab/kube-apiserver"
	ImageKubeControllerManager = "svclab/kube-controller-manager"
	ImageKubeScheduler         = "svclab/kube-scheduler"
	ImageKubeProxy             = "svclab/kube-proxy"
	ImageEtcd                  = "svclab/etcd"
	ImageKindnetd              = "svclab/kindnetd"
	ImageKubePause             = "svclab/kube-pause"
)

// KubeComponentImages are the Kubernetes component images.
var KubeComponentImages = []string{ImageKubeAPIServer, ImageKubeControllerManager, ImageKubeScheduler, ImageKubeProxy, ImageEtcd, ImageKindnetd, ImageKubePause}

// ErrNotFound is returned by Resolve for a reference that no local image
// serves. Its message lists the references that work.
var ErrNotFound = errors.New("image not available in this lab")

// ErrNotBuilt is returned by Resolve when the reference is known but the
// image has not been built on this machine yet.
var ErrNotBuilt = errors.New("image not built yet")

// defaultPath is the PATH of every image: Debian's, then the busybox
// applets as a fallback for the commands Debian has no package for here
// (telnet, traceroute, ifconfig, netstat, ...).
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:" + busyboxAppletDir

// coreDNSEnv is the CoreDNS image's environment.
var coreDNSEnv = []string{defaultPath, "GOGC=25"}

// variant is how one upstream image name is served: which of our images,
// with the upstream image's entrypoint, command, environment and working
// directory, so that pod specs written for the upstream image behave the
// same.
type variant struct {
	image      string
	entrypoint []string
	cmd        []string
	env        []string
	workingDir string
	stopSignal string
}

// known lists the upstream names (after normalisation, without tag or
// digest) each variant serves, in the order Available reports them.
var known = []struct {
	names []string
	v     variant
}{
	// busybox's applets come first, so sh, wget and nslookup behave and
	// print as in the busybox image.
	{[]string{"busybox", "registry.k8s.io/e2e-test-images/busybox"}, variant{image: ImageTools, cmd: []string{"sh"},
		env: []string{"PATH=" + busyboxAppletDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}},
	{[]string{"ubuntu"}, variant{image: ImageTools, cmd: []string{"bash"}}},
	{[]string{"debian"}, variant{image: ImageTools, cmd: []string{"bash"}}},
	// The e2e suites' DNS queriers: Debian with dig and glibc's resolver
	// (getent), as the tools image is.
	{[]string{"registry.k8s.io/e2e-test-images/jessie-dnsutils", "registry.k8s.io/e2e-test-images/glibc-dns-testing"}, variant{image: ImageTools, cmd: []string{"bash"}}},
	{[]string{"alpine"}, variant{image: ImageTools, cmd: []string{"/bin/sh"}}},
	{[]string{"curlimages/curl"}, variant{image: ImageTools, entrypoint: []string{"/entrypoint.sh"}, cmd: []string{"curl"}}},
	{[]string{"nicolaka/netshoot"}, variant{image: ImageTools, cmd: []string{"bash"}}},
	{[]string{"registry.k8s.io/e2e-test-images/agnhost"}, variant{image: ImageAgnhost, entrypoint: []string{"/agnhost"}, cmd: []string{"pause"}}},
	// The boom-server of [sig-network] Conntrack's invalid conntrack state
	// spec, one of agnhost's (hidden) subcommands here.
	{[]string{"registry.k8s.io/e2e-test-images/regression-issue-74839"}, variant{image: ImageAgnhost, entrypoint: []string{"/agnhost", "boom-server"}}},
	// The pause image (any tag: Pods in the Kubernetes docs and the e2e
	// suites name many), its /pause from the agnhost image's files.
	{[]string{"registry.k8s.io/pause", "gcr.io/google-containers/pause", "rancher/mirrored-pause"}, variant{image: ImageAgnhost, entrypoint: []string{"/pause"}}},
	{[]string{"nginx", "registry.k8s.io/e2e-test-images/nginx"}, variant{image: ImageWeb, entrypoint: []string{"/docker-entrypoint.sh"}, cmd: []string{"nginx", "-g", "daemon off;"}, stopSignal: "SIGQUIT"}},
	{[]string{"httpd", "registry.k8s.io/e2e-test-images/httpd"}, variant{image: ImageWeb, cmd: []string{"httpd-foreground"}, workingDir: "/usr/local/apache2",
		env:        []string{"PATH=/usr/local/apache2/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:" + busyboxAppletDir, "HTTPD_PREFIX=/usr/local/apache2"},
		stopSignal: "SIGWINCH"}},
	// CoreDNS (a Go program like the others, but built into svclab-kube)
	// trades some CPU for memory through its environment: two replicas
	// run in every cluster.
	{[]string{"registry.k8s.io/coredns/coredns", "coredns/coredns"}, variant{image: ImageCoreDNS, entrypoint: []string{"/coredns"}, env: coreDNSEnv}},
	{[]string{"registry.k8s.io/kube-proxy"}, variant{image: ImageProxier, entrypoint: []string{"/usr/local/bin/kube-proxy"}}},
	// Our own names, for node shells and add-ons.
	{[]string{ImageTools}, variant{image: ImageTools, cmd: []string{"bash"}}},
	{[]string{ImageNode}, variant{image: ImageNode, cmd: []string{"bash"}}},
	{[]string{ImageAgnhost}, variant{image: ImageAgnhost, entrypoint: []string{"/agnhost"}, cmd: []string{"pause"}}},
	{[]string{ImageWeb}, variant{image: ImageWeb, entrypoint: []string{"/docker-entrypoint.sh"}, cmd: []string{"nginx", "-g", "daemon off;"}, stopSignal: "SIGQUIT"}},
	{[]string{ImageCoreDNS}, variant{image: ImageCoreDNS, entrypoint: []string{"/coredns"}, env: coreDNSEnv}},
	{[]string{ImageProxier}, variant{image: ImageProxier, entrypoint: []string{"/usr/local/bin/kube-proxy"}}},
	{[]string{ImageKubeAPIServer}, variant{image: ImageKubeAPIServer, entrypoint: []string{"/usr/local/bin/kube-apiserver"}}},
	{[]string{ImageKubeControllerManager}, variant{image: ImageKubeControllerManager, entrypoint: []string{"/usr/local/bin/kube-controller-manager"}}},
	{[]string{ImageKubeScheduler}, variant{image: ImageKubeScheduler, entrypoint: []string{"/usr/local/bin/kube-scheduler"}}},
	{[]string{ImageKubeProxy}, variant{image: ImageKubeProxy, entrypoint: []string{"/usr/local/bin/kube-proxy"}}},
	{[]string{ImageEtcd}, variant{image: ImageEtcd, entrypoint: []string{"/usr/local/bin/etcd"}}},
	{[]string{ImageKindnetd}, variant{image: ImageKindnetd, entrypoint: []string{"/bin/kindnetd"}}},
	{[]string{ImageKubePause}, variant{image: ImageKubePause, entrypoint: []string{"/pause"}}},
}

// Reference is an image reference split into its parts, with the name
// normalised: Docker Hub's "docker.io/" and "library/" prefixes removed and
// the old k8s.gcr.io registry renamed to registry.k8s.io.
type Reference struct {
	Name   string // "nginx", "registry.k8s.io/e2e-test-images/agnhost"
	Tag    string // "1.27", or "" when none was given
	Digest string // "sha256:...", or ""
}

// ParseReference splits and normalises ref.
func ParseReference(ref string) (Reference, error) {
	s := strings.TrimSpace(ref)
	if s == "" {
		return Reference{}, fmt.Errorf("the image reference is empty")
	}
	var r Reference
	if i := strings.Index(s, "@"); i >= 0 {
		r.Digest = s[i+1:]
		s = s[:i]
		if !validDigest(r.Digest) {
			return Reference{}, fmt.Errorf("image reference %q has an invalid digest %q (want sha256: and 64 hex digits)", ref, r.Digest)
		}
	}
	if i := strings.LastIndex(s, ":"); i > strings.LastIndex(s, "/") {
		r.Tag = s[i+1:]
		s = s[:i]
		if r.Tag == "" {
			return Reference{}, fmt.Errorf("image reference %q has an empty tag", ref)
		}
	}
	for _, p := range []string{"docker.io/", "index.docker.io/", "registry-1.docker.io/"} {
		if strings.HasPrefix(s, p) {
			s = strings.TrimPrefix(s, p)
			break
		}
	}
	s = strings.TrimPrefix(s, "library/")
	if strings.HasPrefix(s, "k8s.gcr.io/") {
		s = "registry.k8s.io/" + strings.TrimPrefix(s, "k8s.gcr.io/")
	}
	if s == "" || strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") || strings.Contains(s, "//") {
		return Reference{}, fmt.Errorf("image reference %q has no valid name", ref)
	}
	r.Name = s
	return r, nil
}

func validDigest(d string) bool {
	alg, hex, ok := strings.Cut(d, ":")
	if !ok || alg == "" || len(hex) < 32 {
		return false
	}
	for _, c := range hex {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// lookup maps a reference to the variant serving it.
func lookup(ref string) (variant, error) {
	r, err := ParseReference(ref)
	if err != nil {
		return variant{}, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	for _, k := range known {
		for _, n := range k.names {
			if r.Name == n {
				return k.v, nil
			}
		}
	}
	return variant{}, notFound(ref)
}

// notFoundError carries the learner-facing message for an unknown image.
type notFoundError struct{ ref string }

func notFound(ref string) error { return &notFoundError{ref: ref} }

func (e *notFoundError) Error() string {
	return fmt.Sprintf("image %q is not available in this lab: there is no registry, pods run images built on this machine. "+
		"Use one of: %s (any tag)", e.ref, strings.Join(availableNames(), ", "))
}

func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }

// availableNames returns the image names pods can use, in a stable order.
func availableNames() []string {
	var out []string
	for _, k := range known {
		if strings.HasPrefix(k.names[0], "svclab/") {
			continue
		}
		out = append(out, k.names[0])
	}
	return out
}
