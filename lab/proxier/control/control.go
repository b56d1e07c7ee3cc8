package control

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Headers of a guarded request, and the nonce endpoint.
const (
	NonceHeader     = "X-Svclab-Nonce"
	SignatureHeader = "X-Svclab-Signature"
	NoncePath       = "/control/nonce"
)

// NonceLifetime is how long a nonce may wait for its request.
const NonceLifetime = 30 * time.Second

// maxNonces bounds the nonces waiting for their request.
const maxNonces = 256

// GenerateKey makes a new control key pair.
func GenerateKey() (ed25519.PublicKey, ed25519.PrivateKey, error) {
	return ed25519.GenerateKey(rand.Reader)
}

// EncodePublic and EncodePrivate write a key as one line of base64.
func EncodePublic(k ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(k) + "\n" }
func EncodePrivate(k ed25519.PrivateKey) string {
	return base64.StdEncoding.EncodeToString(k.Seed()) + "\n"
}

// ParsePublic reads what EncodePublic wrote.
func ParsePublic(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, errors.New("not an svclab control key (one line of base64, 32 bytes)")
	}
	return ed25519.PublicKey(b), nil
}

// ParsePrivate reads what EncodePrivate wrote.
func ParsePrivate(s string) (ed25519.PrivateKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != ed25519.SeedSize {
		return nil, errors.New("not an svclab control private key (one line of base64, 32 bytes)")
	}
	return ed25519.NewKeyFromSeed(b), nil
}

// ReadPublicFile reads a public key file.
func ReadPublicFile(path string) (ed25519.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := ParsePublic(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// ReadPrivateFile reads a private key file.
func ReadPrivateFile(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := ParsePrivate(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// WriteKeyPair makes a new key pair and writes its private half to path
// (mode 0600) and its public half to path.pub; it returns the public half.
func WriteKeyPair(path string) (ed25519.PublicKey, error) {
	pub, priv, err := GenerateKey()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(EncodePrivate(priv)), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path+".pub", []byte(EncodePublic(pub)), 0o644); err != nil {
		return nil, err
	}
	return pub, nil
}

// message is what a signature covers.
func message(nonce, method, target string, body []byte) []byte {
	sum := sha256.Sum256(body)
	return []byte("svclab-proxier-control\n" + nonce + "\n" + method + " " + target + "\n" + hex.EncodeToString(sum[:]))
}

// Sign signs a request: target is its path and query.
func Sign(k ed25519.PrivateKey, nonce, method, target string, body []byte) string {
	return base64.StdEncoding.EncodeToString(ed25519.Sign(k, message(nonce, method, target, body)))
}

// Guard checks guarded requests against a public key.
type Guard struct {
	key ed25519.PublicKey
	now func() time.Time

	mu     sync.Mutex
	nonces map[string]time.Time
}

// NewGuard returns a Guard for key.
func NewGuard(key ed25519.PublicKey) *Guard {
	return &Guard{key: key, now: time.Now, nonces: map[string]time.Time{}}
}

// NonceHandler hands out nonces (POST).
func (g *Guard) NonceHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "use POST", http.StatusMethodNotAllowed)
			return
		}
		b := make([]byte, 24)
		rand.Read(b)
		nonce := base64.RawURLEncoding.EncodeToString(b)
		g.mu.Lock()
		now := g.now()
		for n, t := range g.nonces {
			if now.Sub(t) > NonceLifetime {
				delete(g.nonces, n)
			}
		}
		if len(g.nonces) >= maxNonces {
			// The oldest goes: a flood of nonce requests cannot keep
			// svclab's own from being handed out.
			oldest, at := "", now
			for n, t := range g.nonces {
				if t.Before(at) {
					oldest, at = n, t
				}
			}
			delete(g.nonces, oldest)
		}
		g.nonces[nonce] = now
		g.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"nonce": nonce})
	})
}

// Wrap lets through to h only requests signed with the key on a nonce
// handed out and not used yet.
func (g *Guard) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "reading the request", http.StatusBadRequest)
			return
		}
		if err := g.check(r, body); err != nil {
			http.Error(w, "forbidden: this teaching hook is svclab's own ("+err.Error()+")", http.StatusForbidden)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}

func (g *Guard) check(r *http.Request, body []byte) error {
	nonce, sig := r.Header.Get(NonceHeader), r.Header.Get(SignatureHeader)
	if nonce == "" || sig == "" {
		return errors.New("the request is not signed")
	}
	g.mu.Lock()
	issued, ok := g.nonces[nonce]
	delete(g.nonces, nonce) // good for one try, whatever its outcome
	g.mu.Unlock()
	if !ok || g.now().Sub(issued) > NonceLifetime {
		return errors.New("unknown or expired nonce")
	}
	s, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || !ed25519.Verify(g.key, message(nonce, r.Method, r.URL.RequestURI(), body), s) {
		return errors.New("bad signature")
	}
	return nil
}

// Do sends a guarded request to base (http://127.0.0.1:10249) with client:
// it asks for a nonce, signs, and returns the answer's body; an answer
// other than 200 is an error.
func Do(ctx context.Context, client *http.Client, key ed25519.PrivateKey, base, method, target string, body []byte) ([]byte, error) {
	nreq, err := http.NewRequestWithContext(ctx, http.MethodPost, base+NoncePath, nil)
	if err != nil {
		return nil, err
	}
	b, err := Send(client, nreq)
	if err != nil {
		return nil, fmt.Errorf("asking the proxier for a nonce: %w", err)
	}
	var n struct{ Nonce string }
	if err := json.Unmarshal(b, &n); err != nil || n.Nonce == "" {
		return nil, fmt.Errorf("the proxier's nonce is unreadable: %q", b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(NonceHeader, n.Nonce)
	req.Header.Set(SignatureHeader, Sign(key, n.Nonce, method, req.URL.RequestURI(), body))
	return Send(client, req)
}

// Send sends req with client and returns the answer's body (at most
// 1 MiB); an answer other than 200 is an error that quotes it.
func Send(client *http.Client, req *http.Request) ([]byte, error) {
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s answered %s: %s", req.Method, req.URL.Path, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// Keyed is implemented by clusters whose bundled proxiers run with a
// control key: ProxierControlKey returns the private half.
type Keyed interface {
	ProxierControlKey() (ed25519.PrivateKey, error)
}
