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
// as kubeadm lays out /etc/kubernetes/pki.
type PKI struct {
	CA, EtcdCA, FrontProxyCA KeyPair
	// Leaves by file name (for example "apiserver").
	Leaves map[string]KeyPair
	// ServiceAccount signs service account tokens.
	ServiceAccount *ecdsa.PrivateKey
}

// ControlPlaneCerts lists the leaf certificates of a control-plane node with
// name nodeName at address ip, and the first address of the service range
// (the kubernetes Service's ClusterIP).
func ControlPlaneCerts(nodeName string, ip, serviceIP net.IP) (kube, etcd, frontProxy []CertSpec) {
	loopback := net.ParseIP("127.0.0.1")
	kube = []CertSpec{
		{File: "apiserver", CommonName: "kube-apiserver", Server: true,
			DNSNames: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", nodeName, "localhost"},
			IPs:      []net.IP{serviceIP, ip, loopback}},
		{File: "apiserver-kubelet-client", CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}, Client: true},
		{File: "admin", CommonName: "kubernetes-admin", Organization: []string{"system:masters"}, Client: true},
		{File: "controller-manager", CommonName: "system:kube-controller-manager", Client: true},
		{File: "scheduler", CommonName: "system:kube-scheduler", Client: true},
		{File: "controller-manager-serving", CommonName: "kube-controller-manager", Server: true, DNSNames: []string{nodeName, "localhost"}, IPs: []net.IP{ip, loopback}},
		{File: "scheduler-serving", CommonName: "kube-scheduler", Server: true, DNSNames: []string{nodeName, "localhost"}, IPs: []net.IP{ip, loopback}},
	}
	etcd = []CertSpec{
		{File: "etcd-server", CommonName: nodeName, Server: true, Client: true, DNSNames: []string{nodeName, "localhost"}, IPs: []net.IP{ip, loopback}},
		{File: "apiserver-etcd-client", CommonName: "kube-apiserver-etcd-client", Client: true},
	}
	frontProxy = []CertSpec{
		{File: "front-proxy-client", CommonName: "front-proxy-client", Client: true},
	}
	return kube, etcd, frontProxy
}

// NodeCerts lists the certificates of a node's agent (its kubelet): a
// client certificate in the system:nodes group, which the Node authorizer
// and NodeRestriction admission recognise, and a serving certificate for
// its kubelet endpoint.
func NodeCerts(nodeName string, ip net.IP) []CertSpec {
	return []CertSpec{
		{File: "node-" + nodeName, CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}, Client: true},
		{File: "node-" + nodeName + "-serving", CommonName: nodeName, Server: true, DNSNames: []string{nodeName}, IPs: []net.IP{ip}},
	}
}

// AddNode issues a node's certificates (see NodeCerts).
func (p *PKI) AddNode(nodeName string, ip net.IP, now time.Time) error {
	for _, spec := range NodeCerts(nodeName, ip) {
		kp, err := p.CA.Sign(spec, now)
		if err != nil {
			return err
		}
		p.Leaves[spec.File] = kp
	}
	return nil
}

// NewPKI generates the whole PKI of a control-plane node.
func NewPKI(nodeName string, ip, serviceIP net.IP, now time.Time) (*PKI, error) {
	ca, err := NewCA("kubernetes", now)
	if err != nil {
		return nil, err
	}
	etcdCA, err := NewCA("etcd-ca", now)
	if err != nil {
		return nil, err
	}
	frontProxyCA, err := NewCA("front-proxy-ca", now)
	if err != nil {
		return nil, err
	}
	p := &PKI{CA: ca, EtcdCA: etcdCA, FrontProxyCA: frontProxyCA, Leaves: map[string]KeyPair{}}
	kube, etcd, frontProxy := ControlPlaneCerts(nodeName, ip, serviceIP)
	for _, group := range []struct {
		ca    KeyPair
		specs []CertSpec
	}{{ca, kube}, {etcdCA, etcd}, {frontProxyCA, frontProxy}} {
		for _, spec := range group.specs {
			kp, err := group.ca.Sign(spec, now)
			if err != nil {
				return nil, err
			}
			p.Leaves[spec.File] = kp
		}
	}
	if p.ServiceAccount, err = newKey(); err != nil {
		return nil, err
	}
	return p, nil
}

// Write writes the PKI into dir: ca, etcd-ca and front-proxy-ca, each leaf,
// and sa.key/sa.pub.
func (p *PKI) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := p.CA.WriteFiles(dir, "ca"); err != nil {
		return err
	}
	if err := p.EtcdCA.WriteFiles(dir, "etcd-ca"); err != nil {
		return err
	}
	if err := p.FrontProxyCA.WriteFiles(dir, "front-proxy-ca"); err != nil {
		return err
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
