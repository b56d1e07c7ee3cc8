package images

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/svclab/svclab/lab/images/webserver"
)

// Paths inside the images.
const (
	// svclabPath is where the svclab binary sits in the svclab layer; the
	// program names of the agnhost, web and proxier images link to it and
	// the binary dispatches on the name it was called by.
	svclabPath = "/usr/local/lib/svclab/svclab"
	// KubePath is where svclab-kube sits in the kube layer, and where the
	// control-plane terminal's kubectl runs it from (server/terminal).
	KubePath = "/usr/local/lib/svclab/svclab-kube"
	// busyboxAppletDir holds a link to busybox for every applet; it is
	// last on the images' PATH.
	busyboxAppletDir = "/usr/libexec/busybox"
)

// Layer names. Each is built into its own directory, keyed by a hash of
// what goes into it.
const (
	layerTools       = "tools"        // Debian bookworm minbase + tools (debootstrap)
	layerToolsConfig = "tools-config" // small files every image has
	layerSvclab      = "svclab"       // the svclab binary
	layerKube        = "kube"         // the svclab-kube binary
	layerAgnhost     = "agnhost"
	layerWeb         = "web"
	layerCoreDNS     = "coredns"
	layerProxier     = "proxier"
	layerKubeBin     = "kube-bin" // the Kubernetes components' names for svclab-kube
)

// buildOrder is the order Build makes layers in.
var buildOrder = []string{layerTools, layerToolsConfig, layerSvclab, layerKube, layerAgnhost, layerWeb, layerCoreDNS, layerProxier, layerKubeBin}

// imageLayers lists each image's layers, lowest first.
var imageLayers = map[string][]string{
	ImageTools:   {layerTools, layerToolsConfig},
	ImageNode:    {layerTools, layerToolsConfig, layerKube},
	ImageAgnhost: {layerTools, layerToolsConfig, layerSvclab, layerAgnhost},
	ImageWeb:     {layerTools, layerToolsConfig, layerSvclab, layerWeb},
	ImageCoreDNS: {layerTools, layerToolsConfig, layerKube, layerCoreDNS},
	ImageProxier: {layerTools, layerToolsConfig, layerSvclab, layerProxier},
}

// The Kubernetes components as images, for the kind backend's offline node
// image: each runs svclab-kube under the component's name, on the tools
// layer, so that they share every layer.
func init() {
	for _, name := range KubeComponentImages {
		imageLayers[name] = []string{layerTools, layerToolsConfig, layerKube, layerKubeBin}
	}
}

// entry is one file, directory or symbolic link of a file-tree layer.
type entry struct {
	path string      // absolute path in the image
	mode fs.FileMode // permission bits, with fs.ModeDir for a directory
	data string      // file content
	link string      // symbolic link target, when not empty
	// generate makes the content at build time (key material); data then
	// names the generator for the layer's key.
	generate func() ([]byte, error)
}

func file(path string, mode fs.FileMode, data string) entry {
	return entry{path: path, mode: mode, data: data}
}
func dir(path string) entry         { return entry{path: path, mode: fs.ModeDir | 0o755} }
func symlink(path, to string) entry { return entry{path: path, link: to} }

const curlEntrypoint = `#!/bin/sh
# As in curlimages/curl: run curl when the first argument is an option or
# not a command.
set -e
if [ "${1#-}" != "${1}" ] || [ -z "$(command -v "${1}")" ]; then
  set -- curl "$@"
fi
exec "$@"
`

// apkShim stands in for Alpine's package manager, which tutorials run in
// alpine and busybox pods ("apk add curl"): the tools are already there,
// and pods cannot reach a package registry anyway.
const apkShim = `#!/bin/sh
# svclab: this lab's alpine image is Debian-based and has its tools
# installed already; pods cannot reach a package registry.
installed=" bash bind-tools busybox busybox-extras ca-certificates conntrack-tools coreutils curl drill iproute2 iptables iputils iputils-ping netcat-openbsd nftables procps socat tcpdump wget "
cmd="$1"
[ $# -gt 0 ] && shift
case "$cmd" in
add)
  status=0
  for arg in "$@"; do
    case "$arg" in
    -*) continue ;;
    esac
    case "$installed" in
    *" $arg "*) echo "OK: $arg is already installed (svclab's images are Debian-based)" ;;
    *) echo "ERROR: unable to select packages: $arg (not installed, and pods in this lab cannot reach a package registry)" >&2; status=1 ;;
    esac
  done
  exit $status ;;
update|upgrade|cache)
  echo "OK: nothing to do (svclab's images are Debian-based and complete)"; exit 0 ;;
*)
  echo "apk: svclab's images are Debian-based; the tools are installed already (curl, wget, dig, nslookup, nc, socat, ip, nft, iptables, conntrack, tcpdump)" >&2
  exit 1 ;;
esac
`

// busyboxWget stands in for busybox's wget applet: Debian bookworm's
// busybox 1.35 crashes (SIGSEGV) on wget -T, which learners type all the
// time; -T keeps its meaning through timeout(1).
const busyboxWget = `#!/bin/sh
t=
n=$#
i=0
while [ "$i" -lt "$n" ]; do
  a=$1; shift; i=$((i+1))
  case "$a" in
    -T) t=$1; shift; i=$((i+1)); continue ;;
    -T*) t=${a#-T}; continue ;;
    --timeout=*) t=${a#--timeout=}; continue ;;
  esac
  set -- "$@" "$a"
done
[ -z "$t" ] && exec busybox wget "$@"
/usr/bin/timeout "$t" busybox wget "$@"
rc=$?
if [ "$rc" = 124 ]; then
  echo "wget: download timed out" >&2
  exit 1
fi
exit "$rc"
`

const nginxEntrypoint = `#!/bin/sh
# As in the nginx image: announce, then run the command.
set -e
if [ "$1" = "nginx" ] || [ "$1" = "nginx-debug" ]; then
  echo "/docker-entrypoint.sh: Configuration complete; ready for start up"
fi
exec "$@"
`

// treeLayers holds the contents of the file-tree layers.
func treeLayers() map[string][]entry {
	crt, key := localhostCert()
	return map[string][]entry{
		layerToolsConfig: {
			file("/entrypoint.sh", 0o755, curlEntrypoint),
			file("/usr/local/bin/apk", 0o755, apkShim),
			file(busyboxAppletDir+"/wget", 0o755, busyboxWget),
		},
		layerAgnhost: {
			symlink("/agnhost", svclabPath),
			symlink("/agnhost-2", "agnhost"),
			symlink("/pause", svclabPath), // registry.k8s.io/pause's program
			dir("/uploads"),
			{path: "/localhost.crt", mode: 0o644, data: "generated: self-signed localhost certificate v1", generate: crt},
			{path: "/localhost.key", mode: 0o600, data: "generated: self-signed localhost key v1", generate: key},
		},
		layerWeb: {
			file("/docker-entrypoint.sh", 0o755, nginxEntrypoint),
			symlink("/usr/sbin/nginx", svclabPath),
			symlink("/usr/local/apache2/bin/httpd", svclabPath),
			symlink("/usr/local/bin/httpd-foreground", svclabPath),
			file("/usr/share/nginx/html/index.html", 0o644, webserver.NginxIndex),
			file("/usr/share/nginx/html/50x.html", 0o644, webserver.Nginx50x),
			file("/usr/local/apache2/htdocs/index.html", 0o644, webserver.HTTPDIndex),
			file("/etc/nginx/nginx.conf", 0o644, webserver.NginxConf),
			file("/etc/nginx/conf.d/default.conf", 0o644, webserver.NginxDefaultConf),
			dir("/var/log/nginx"),
			dir("/var/cache/nginx"),
		},
		layerCoreDNS: {
			symlink("/coredns", KubePath),
			dir("/etc/coredns"),
		},
		layerProxier: {
			symlink("/usr/local/bin/kube-proxy", svclabPath),
			dir("/var/lib/kube-proxy"),
		},
		layerKubeBin: {
			symlink("/usr/local/bin/kube-apiserver", KubePath),
			symlink("/usr/local/bin/kube-controller-manager", KubePath),
			symlink("/usr/local/bin/kube-scheduler", KubePath),
			symlink("/usr/local/bin/kube-proxy", KubePath),
			symlink("/usr/local/bin/etcd", KubePath),
			symlink("/usr/local/bin/kubectl", KubePath),
			symlink("/bin/kindnetd", KubePath),
			symlink("/pause", KubePath),
			dir("/var/lib/etcd"),
			dir("/var/lib/kube-proxy"),
		},
	}
}

// treeKey hashes a file-tree layer's entries.
func treeKey(entries []entry) string {
	sorted := append([]entry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].path < sorted[j].path })
	h := sha256.New()
	fmt.Fprintf(h, "layer-format=%d\n", layerFormat)
	for _, e := range sorted {
		fmt.Fprintf(h, "%s %o %q %d\n", e.path, uint32(e.mode), e.link, len(e.data))
		io.WriteString(h, e.data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// layerFormat changes when the way layers are laid out changes, so that
// every layer is rebuilt.
const layerFormat = 1

// writeTree writes entries under root.
func writeTree(root string, entries []entry) error {
	for _, e := range entries {
		p := filepath.Join(root, filepath.FromSlash(e.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		switch {
		case e.link != "":
			if err := os.Symlink(e.link, p); err != nil {
				return err
			}
		case e.mode.IsDir():
			if err := os.MkdirAll(p, e.mode.Perm()); err != nil {
				return err
			}
		default:
			data := []byte(e.data)
			if e.generate != nil {
				var err error
				if data, err = e.generate(); err != nil {
					return fmt.Errorf("generating %s: %w", e.path, err)
				}
			}
			if err := os.WriteFile(p, data, e.mode.Perm()); err != nil {
				return err
			}
			// WriteFile's mode is filtered by the umask.
			if err := os.Chmod(p, e.mode.Perm()); err != nil {
				return err
			}
		}
	}
	return nil
}

// localhostCert returns generators for a self-signed certificate for
// localhost, 127.0.0.1 and ::1 and its key, like the ones in upstream's
// agnhost image (used by porter's SERVE_TLS_PORT_* and netexec's TLS
// mode). Both generators return parts of the same pair.
func localhostCert() (crt, key func() ([]byte, error)) {
	var certPEM, keyPEM []byte
	generate := func() error {
		if certPEM != nil {
			return nil
		}
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber:          big.NewInt(1),
			Subject:               pkix.Name{Organization: []string{"svclab agnhost"}, CommonName: "localhost"},
			NotBefore:             time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
			NotAfter:              time.Date(2084, 1, 29, 16, 0, 0, 0, time.UTC),
			KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
			ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			BasicConstraintsValid: true,
			IsCA:                  true,
			DNSNames:              []string{"localhost", "example.com"},
			IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
		if err != nil {
			return err
		}
		kder, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return err
		}
		certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
		return nil
	}
	return func() ([]byte, error) {
			if err := generate(); err != nil {
				return nil, err
			}
			return certPEM, nil
		}, func() ([]byte, error) {
			if err := generate(); err != nil {
				return nil, err
			}
			return keyPEM, nil
		}
}
