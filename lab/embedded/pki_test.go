package embedded

import (
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

func TestPKI(t *testing.T) {
	now := time.Now()
	ip, svcIP := net.ParseIP("172.29.1.253"), net.ParseIP("10.96.0.1")
	p, err := NewPKI(ip, svcIP, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AddNode("lab-worker", net.ParseIP("172.29.1.3"), now); err != nil {
		t.Fatal(err)
	}
	roots := func(ca KeyPair) *x509.CertPool {
		pool := x509.NewCertPool()
		pool.AddCert(ca.Cert)
		return pool
	}
	for _, tc := range []struct {
		leaf    string
		ca      KeyPair
		usage   x509.ExtKeyUsage
		cn      string
		org     []string
		dnsName string // verified as a server name when set
		ip      string
	}{
		{leaf: "apiserver", ca: p.ServerCA, usage: x509.ExtKeyUsageServerAuth, cn: "kube-apiserver", dnsName: "kubernetes.default.svc.cluster.local"},
		{leaf: "apiserver", ca: p.ServerCA, usage: x509.ExtKeyUsageServerAuth, cn: "kube-apiserver", ip: "10.96.0.1"},
		{leaf: "apiserver", ca: p.ServerCA, usage: x509.ExtKeyUsageServerAuth, cn: "kube-apiserver", ip: "172.29.1.253"},
		{leaf: "apiserver", ca: p.ServerCA, usage: x509.ExtKeyUsageServerAuth, cn: "kube-apiserver", ip: "127.0.0.1"},
		{leaf: "admin", ca: p.CA, usage: x509.ExtKeyUsageClientAuth, cn: "kubernetes-admin", org: []string{"system:masters"}},
		{leaf: "controller-manager", ca: p.CA, usage: x509.ExtKeyUsageClientAuth, cn: "system:kube-controller-manager"},
		{leaf: "scheduler", ca: p.CA, usage: x509.ExtKeyUsageClientAuth, cn: "system:kube-scheduler"},
		{leaf: "apiserver-kubelet-client", ca: p.KubeletCA, usage: x509.ExtKeyUsageClientAuth, cn: "kube-apiserver-kubelet-client", org: []string{"system:masters"}},
		{leaf: "controller-manager-serving", ca: p.ServerCA, usage: x509.ExtKeyUsageServerAuth, cn: "kube-controller-manager", ip: "127.0.0.1"},
		{leaf: "scheduler-serving", ca: p.ServerCA, usage: x509.ExtKeyUsageServerAuth, cn: "kube-scheduler", ip: "127.0.0.1"},
		{leaf: "etcd-server", ca: p.EtcdCA, usage: x509.ExtKeyUsageServerAuth, cn: "etcd", ip: "127.0.0.1"},
		{leaf: "apiserver-etcd-client", ca: p.EtcdCA, usage: x509.ExtKeyUsageClientAuth, cn: "kube-apiserver-etcd-client"},
		{leaf: "node-lab-worker", ca: p.CA, usage: x509.ExtKeyUsageClientAuth, cn: "system:node:lab-worker", org: []string{"system:nodes"}},
		{leaf: "node-lab-worker-serving", ca: p.KubeletCA, usage: x509.ExtKeyUsageServerAuth, cn: "lab-worker", ip: "172.29.1.3"},
		{leaf: "front-proxy-client", ca: p.FrontProxyCA, usage: x509.ExtKeyUsageClientAuth, cn: "front-proxy-client"},
	} {
		t.Run(tc.leaf+"/"+tc.dnsName+tc.ip, func(t *testing.T) {
			kp, ok := p.Leaves[tc.leaf]
			if !ok {
				t.Fatalf("no leaf %s", tc.leaf)
			}
			name := tc.dnsName
			if tc.ip != "" {
				name = tc.ip
			}
			if _, err := kp.Cert.Verify(x509.VerifyOptions{Roots: roots(tc.ca), KeyUsages: []x509.ExtKeyUsage{tc.usage}, DNSName: name, CurrentTime: now}); err != nil {
				t.Errorf("verify: %v", err)
			}
			if kp.Cert.Subject.CommonName != tc.cn {
				t.Errorf("CN %q, want %q", kp.Cert.Subject.CommonName, tc.cn)
			}
			if tc.org != nil && !slices.Equal(kp.Cert.Subject.Organization, tc.org) {
				t.Errorf("O %v, want %v", kp.Cert.Subject.Organization, tc.org)
			}
			if kp.Cert.NotAfter.Before(now.Add(300 * 24 * time.Hour)) {
				t.Errorf("expires too soon: %v", kp.Cert.NotAfter)
			}
		})
	}
	// A client certificate must not verify against another CA.
	if _, err := p.Leaves["apiserver-etcd-client"].Cert.Verify(x509.VerifyOptions{Roots: roots(p.CA), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("etcd client certificate verifies against the cluster CA")
	}
	if _, err := p.Leaves["apiserver"].Cert.Verify(x509.VerifyOptions{Roots: roots(p.ServerCA), DNSName: "example.com"}); err == nil {
		t.Error("apiserver certificate verifies for a name it should not carry")
	}
	// What the lab's CSRs are signed with (ca) must sign nothing svclab
	// trusts a server for, and the authorities svclab trusts must sign
	// nothing the lab can get.
	forged, err := p.CA.Sign(CertSpec{File: "forged", CommonName: "kube-apiserver", Server: true, Client: true,
		DNSNames: []string{"kubernetes", "localhost", "lab-worker"}, IPs: []net.IP{ip, svcIP, net.ParseIP("127.0.0.1"), net.ParseIP("172.29.1.3")}}, now)
	if err != nil {
		t.Fatal(err)
	}
	for name, ca := range map[string]KeyPair{"server-ca": p.ServerCA, "kubelet-ca": p.KubeletCA, "etcd-ca": p.EtcdCA, "front-proxy-ca": p.FrontProxyCA} {
		if _, err := forged.Cert.Verify(x509.VerifyOptions{Roots: roots(ca), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}, CurrentTime: now}); err == nil {
			t.Errorf("a certificate signed by the lab's CSR signer verifies against %s", name)
		}
	}
	for name, kp := range p.Leaves {
		if kp.Cert.Equal(p.CA.Cert) {
			continue
		}
		if _, err := kp.Cert.Verify(x509.VerifyOptions{Roots: roots(p.CA), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, CurrentTime: now}); err == nil {
			t.Errorf("serving certificate %s is signed by the lab's CSR signer", name)
		}
	}

	dir := t.TempDir()
	if err := p.Write(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.crt", "ca.key", "server-ca.crt", "server-ca.key", "kubelet-ca.crt", "etcd-ca.crt", "front-proxy-ca.crt", "apiserver.crt", "apiserver.key", "sa.key", "sa.pub"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("missing %s: %v", f, err)
		}
		if filepath.Ext(f) == ".key" && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
}

func TestKubeconfig(t *testing.T) {
	now := time.Now()
	p, err := NewPKI(net.ParseIP("172.29.1.253"), net.ParseIP("10.96.0.1"), now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Kubeconfig("lab", "https://172.29.1.2:6443", p.CA.CertPEM(), "kubernetes-admin", p.Leaves["admin"])
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(b)
	if err != nil {
		t.Fatalf("kubeconfig does not parse: %v\n%s", err, b)
	}
	if cfg.CurrentContext != "svclab-lab" {
		t.Errorf("current context %q", cfg.CurrentContext)
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != "https://172.29.1.2:6443" || rc.Insecure || len(rc.CAData) == 0 || len(rc.CertData) == 0 || len(rc.KeyData) == 0 || rc.BearerToken != "" {
		t.Errorf("kubeconfig must verify the server and use a client certificate, got host=%s insecure=%v ca=%d cert=%d key=%d token=%q",
			rc.Host, rc.Insecure, len(rc.CAData), len(rc.CertData), len(rc.KeyData), rc.BearerToken)
	}
}
