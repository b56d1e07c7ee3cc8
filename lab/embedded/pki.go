package embedded

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CertSpec describes one certificate signed by a CA.
type CertSpec struct {
	// File is the base name: File.crt and File.key are written.
	File         string
	CommonName   string
	Organization []string
	DNSNames     []string
	IPs          []net.IP
	Server       bool
	Client       bool
}

// KeyPair is a certificate and its private key.
type KeyPair struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// CertPEM returns the PEM encoding of the certificate.
func (kp KeyPair) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.Cert.Raw})
}

// KeyPEM returns the PEM encoding of the private key.
func (kp KeyPair) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(kp.Key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
)

func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func serial() (*big.Int, error) { return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126)) }

// NewCA creates a self-signed certificate authority.
func NewCA(commonName string, now time.Time) (KeyPair, error) {
	key, err := newKey()
	if err != nil {
		return KeyPair{}, err
	}
	sn, err := serial()
	if err != nil {
		return KeyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("creating CA %q: %w", commonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{Cert: cert, Key: key}, nil
}

// Sign issues a certificate for spec signed by ca.
func (ca KeyPair) Sign(spec CertSpec, now time.Time) (KeyPair, error) {
	key, err := newKey()
	if err != nil {
		return KeyPair{}, err
	}
	sn, err := serial()
	if err != nil {
		return KeyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: spec.CommonName, Organization: spec.Organization},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     spec.DNSNames,
		IPAddresses:  spec.IPs,
	}
	if spec.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if spec.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("signing %q: %w", spec.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{Cert: cert, Key: key}, nil
}

// WriteFiles writes dir/base.crt and dir/base.key (the key readable by the
// owner only).
func (kp KeyPair) WriteFiles(dir, base string) error {
	keyPEM, err := kp.KeyPEM()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, base+".crt"), kp.CertPEM(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, base+".key"), keyPEM, 0o600)
}

// PKI is the set of certificates a cluster's control plane uses, laid out
// as kubeadm lays out /etc/kubernetes/pki, with one difference that makes
// the lab's own PKI harmless to svclab: kubeadm's cluster CA signs the API
// server's serving certificate, the clients' certificates and whatever
// certificate signing request an administrator approves, so a learner with
// cluster-admin can have a certificate for the API server's address
// signed and pass for it. Here each authority signs one kind of thing:
//
//	ca              clients of the API server and every CSR the lab's
//	                controller-manager signs (the learner's to use)
//	server-ca       the serving certificates of svclab's control plane
//	                (API server, controller-manager, scheduler); never
//	                reachable through the API, and the only authority a
//	                client of the API server trusts for it (kubeconfigs,
//	                the Pods' kube-root-ca.crt, svclab's own clients)
//	kubelet-ca      the node agents' serving certificates and the API
//	                server's client certificate towards them: they trust
//	                each other through it alone
//	etcd-ca         etcd and its one client, the API server
//	front-proxy-ca  the aggregation layer's client
type PKI struct {
	CA, ServerCA, KubeletCA, EtcdCA, FrontProxyCA KeyPair
	// Leaves by file name (for example "apiserver").
	Leaves map[string]KeyPair
	// ServiceAccount signs service account tokens.
	ServiceAccount *ecdsa.PrivateKey
}

// The authorities' file base names (File.crt and File.key in pki/).
const (
	caFile           = "ca"
	serverCAFile     = "server-ca"
	kubeletCAFile    = "kubelet-ca"
	etcdCAFile       = "etcd-ca"
	frontProxyCAFile = "front-proxy-ca"
)

// certGroups are the leaves of a control plane whose API server answers on
// apiIP and on the first address of the service range serviceIP (the
// kubernetes Service's ClusterIP), by the authority that signs them. The
// control plane's other ports listen on its loopback only.
func certGroups(apiIP, serviceIP net.IP) map[string][]CertSpec {
	loopback := net.ParseIP("127.0.0.1")
	return map[string][]CertSpec{
		caFile: {
			{File: "admin", CommonName: "kubernetes-admin", Organization: []string{"system:masters"}, Client: true},
			{File: "controller-manager", CommonName: "system:kube-controller-manager", Client: true},
			{File: "scheduler", CommonName: "system:kube-scheduler", Client: true},
		},
		serverCAFile: {
			{File: "apiserver", CommonName: "kube-apiserver", Server: true,
				DNSNames: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
				IPs:      []net.IP{serviceIP, apiIP, loopback}},
			{File: "controller-manager-serving", CommonName: "kube-controller-manager", Server: true, DNSNames: []string{"localhost"}, IPs: []net.IP{loopback}},
			{File: "scheduler-serving", CommonName: "kube-scheduler", Server: true, DNSNames: []string{"localhost"}, IPs: []net.IP{loopback}},
		},
		kubeletCAFile: {
			{File: "apiserver-kubelet-client", CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}, Client: true},
		},
		etcdCAFile: {
			{File: "etcd-server", CommonName: "etcd", Server: true, Client: true, DNSNames: []string{"localhost"}, IPs: []net.IP{loopback}},
			{File: "apiserver-etcd-client", CommonName: "kube-apiserver-etcd-client", Client: true},
		},
		frontProxyCAFile: {
			{File: "front-proxy-client", CommonName: "front-proxy-client", Client: true},
		},
	}
}

// NodeCerts lists the certificates of a node's agent (its kubelet): a
// client certificate in the system:nodes group, which the Node authorizer
// and NodeRestriction admission recognise (signed by ca), and a serving
// certificate for its kubelet endpoint (signed by kubelet-ca).
func NodeCerts(nodeName string, ip net.IP) (client, serving CertSpec) {
	return CertSpec{File: "node-" + nodeName, CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}, Client: true},
		CertSpec{File: "node-" + nodeName + "-serving", CommonName: nodeName, Server: true, DNSNames: []string{nodeName}, IPs: []net.IP{ip}}
}

// AddNode issues a node's certificates (see NodeCerts).
func (p *PKI) AddNode(nodeName string, ip net.IP, now time.Time) error {
	client, serving := NodeCerts(nodeName, ip)
	for _, s := range []struct {
		ca   KeyPair
		spec CertSpec
	}{{p.CA, client}, {p.KubeletCA, serving}} {
		kp, err := s.ca.Sign(s.spec, now)
		if err != nil {
			return err
		}
		p.Leaves[s.spec.File] = kp
	}
	return nil
}

// authorities are p's CAs by file base name.
func (p *PKI) authorities() map[string]*KeyPair {
	return map[string]*KeyPair{caFile: &p.CA, serverCAFile: &p.ServerCA, kubeletCAFile: &p.KubeletCA, etcdCAFile: &p.EtcdCA, frontProxyCAFile: &p.FrontProxyCA}
}

// NewPKI generates the whole PKI of a control plane whose API server
// answers on apiIP and serviceIP (see certGroups).
func NewPKI(apiIP, serviceIP net.IP, now time.Time) (*PKI, error) {
	p := &PKI{Leaves: map[string]KeyPair{}}
	cas := p.authorities()
	for file, cn := range map[string]string{caFile: "kubernetes", serverCAFile: "kubernetes-server", kubeletCAFile: "kubelet", etcdCAFile: "etcd-ca", frontProxyCAFile: "front-proxy-ca"} {
		ca, err := NewCA(cn, now)
		if err != nil {
			return nil, err
		}
		*cas[file] = ca
	}
	for file, specs := range certGroups(apiIP, serviceIP) {
		for _, spec := range specs {
			kp, err := cas[file].Sign(spec, now)
			if err != nil {
				return nil, err
			}
			p.Leaves[spec.File] = kp
		}
	}
	var err error
	if p.ServiceAccount, err = newKey(); err != nil {
		return nil, err
	}
	return p, nil
}

// Write writes the PKI into dir: each authority, each leaf, and
// sa.key/sa.pub.
func (p *PKI) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for file, ca := range p.authorities() {
		if err := ca.WriteFiles(dir, file); err != nil {
			return err
		}
	}
	for name, kp := range p.Leaves {
		if err := kp.WriteFiles(dir, name); err != nil {
			return err
		}
	}
	der, err := x509.MarshalPKCS8PrivateKey(p.ServiceAccount)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(p.ServiceAccount.Public())
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}
