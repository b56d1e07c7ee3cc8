package server

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"
)

// CertReloader serves the certificate in a pair of PEM files, read again
// whenever either changes (a renewal by certbot or an ACME client needs no
// restart).
type CertReloader struct {
	CertFile, KeyFile string

	mu       sync.Mutex
	cert     *tls.Certificate
	modified time.Time
	checked  time.Time
}

// NewCertReloader reads the pair once, so that a bad one is an error at
// start, not at the first handshake.
func NewCertReloader(certFile, keyFile string) (*CertReloader, error) {
	r := &CertReloader{CertFile: certFile, KeyFile: keyFile}
	if _, err := r.GetCertificate(nil); err != nil {
		return nil, err
	}
	return r, nil
}

// GetCertificate is tls.Config's: the pair, reloaded when it changed (the
// files are looked at most once a second).
func (r *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cert != nil && time.Since(r.checked) < time.Second {
		return r.cert, nil
	}
	r.checked = time.Now()
	mod := time.Time{}
	for _, f := range []string{r.CertFile, r.KeyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			if r.cert != nil {
				return r.cert, nil // keep serving the last good pair
			}
			return nil, fmt.Errorf("the TLS certificate: %w", err)
		}
		if fi.ModTime().After(mod) {
			mod = fi.ModTime()
		}
	}
	if r.cert != nil && !mod.After(r.modified) {
		return r.cert, nil
	}
	c, err := tls.LoadX509KeyPair(r.CertFile, r.KeyFile)
	if err != nil {
		if r.cert != nil {
			return r.cert, nil // a renewal half written: the next look takes it
		}
		return nil, fmt.Errorf("the TLS certificate %s and key %s: %w", r.CertFile, r.KeyFile, err)
	}
	r.cert, r.modified = &c, mod
	return r.cert, nil
}

// TLSConfig is the server's TLS with this reloader's certificate.
func (r *CertReloader) TLSConfig() *tls.Config {
	return &tls.Config{GetCertificate: r.GetCertificate, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
}

// hsts tells browsers to come back over HTTPS only, when the server is
// reached over it (directly or behind --public-url https).
func (a *Access) hsts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil || a.Secure {
			w.Header().Set("Strict-Transport-Security", "max-age=31536000")
		}
		next.ServeHTTP(w, r)
	})
}
