package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeCert writes a self-signed certificate for 127.0.0.1 named cn.
func writeCert(t *testing.T, certFile, keyFile, cn string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	// A later mtime than the last pair, whatever the file system's clock.
	later := time.Now().Add(time.Duration(len(cn)) * time.Second)
	os.Chtimes(certFile, later, later)
	os.Chtimes(keyFile, later, later)
}

func TestServeTLSReloadsAndSendsHSTS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if _, err := NewCertReloader(certFile, keyFile); err == nil {
		t.Error("a missing certificate was accepted")
	}
	writeCert(t, certFile, keyFile, "first")
	cr, err := NewCertReloader(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Log: slog.New(slog.DiscardHandler), Access: &Access{Secure: true}}
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, s.Handler(), s.Log, cr.TLSConfig()) }()
	defer func() { cancel(); <-done }()
	get := func() (string, http.Header) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}
		resp, err := (&http.Client{Transport: tr}).Get("https://" + l.Addr().String() + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0].Subject.CommonName, resp.Header
	}
	cn, h := get()
	if cn != "first" || h.Get("Strict-Transport-Security") == "" {
		t.Errorf("served %q, HSTS %q", cn, h.Get("Strict-Transport-Security"))
	}
	writeCert(t, certFile, keyFile, "renewed")
	time.Sleep(1100 * time.Millisecond)
	if cn, _ := get(); cn != "renewed" {
		t.Errorf("after a renewal the server serves %q", cn)
	}
	// A half-written renewal keeps the last good pair.
	os.WriteFile(certFile, []byte("garbage"), 0o644)
	later := time.Now().Add(time.Minute)
	os.Chtimes(certFile, later, later)
	time.Sleep(1100 * time.Millisecond)
	if cn, _ := get(); cn != "renewed" {
		t.Errorf("after a broken renewal the server serves %q", cn)
	}
}
