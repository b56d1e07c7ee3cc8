package control

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// guarded is a hook behind a Guard that echoes what reached it.
func guarded(t *testing.T) (*httptest.Server, *Guard, func() []string) {
	t.Helper()
	pub, _, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	g := NewGuard(pub)
	var got []string
	mux := http.NewServeMux()
	mux.Handle(NoncePath, g.NonceHandler())
	mux.Handle("/faults", g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+string(b))
		w.Write([]byte("ok"))
	})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, g, func() []string { return got }
}

func TestGuard(t *testing.T) {
	srv, g, got := guarded(t)
	ctx := context.Background()
	pub, priv, _ := GenerateKey()
	g.key = pub

	// svclab's signed request passes, its body intact.
	b, err := Do(ctx, srv.Client(), priv, srv.URL, http.MethodPost, "/faults", []byte(`{"stopSyncing":false}`))
	if err != nil || string(b) != "ok" {
		t.Fatalf("a signed request: %q, %v", b, err)
	}
	if g := got(); len(g) != 1 || g[0] != `POST {"stopSyncing":false}` {
		t.Fatalf("the hook saw %q", g)
	}

	nonce := func() string {
		resp, err := srv.Client().Post(srv.URL+NoncePath, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Split(string(b), `"`)[3]
	}
	send := func(method, target, nonce, sig string, body string) int {
		req, _ := http.NewRequest(method, srv.URL+target, strings.NewReader(body))
		if nonce != "" {
			req.Header.Set(NonceHeader, nonce)
		}
		if sig != "" {
			req.Header.Set(SignatureHeader, sig)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	_, other, _ := GenerateKey()
	body := `{"stopSyncing":false}`
	for _, tc := range []struct {
		name string
		code func() int
	}{
		{"unsigned, as a learner's curl", func() int { return send("POST", "/faults", "", "", body) }},
		{"a GET of the fault state", func() int { return send("GET", "/faults", "", "", "") }},
		{"signed with another key", func() int {
			n := nonce()
			return send("POST", "/faults", n, Sign(other, n, "POST", "/faults", []byte(body)), body)
		}},
		{"a nonce the proxier never gave", func() int {
			return send("POST", "/faults", "made-up", Sign(priv, "made-up", "POST", "/faults", []byte(body)), body)
		}},
		{"another body than the one signed", func() int {
			n := nonce()
			return send("POST", "/faults", n, Sign(priv, n, "POST", "/faults", []byte(`{"stopSyncing":true}`)), body)
		}},
		{"another method than the one signed", func() int {
			n := nonce()
			return send("DELETE", "/faults", n, Sign(priv, n, "POST", "/faults", []byte(body)), body)
		}},
		{"another query than the one signed", func() int {
			n := nonce()
			return send("POST", "/faults?x=1", n, Sign(priv, n, "POST", "/faults", []byte(body)), body)
		}},
		{"a replay of a request that passed", func() int {
			n := nonce()
			sig := Sign(priv, n, "POST", "/faults", []byte(body))
			if c := send("POST", "/faults", n, sig, body); c != http.StatusOK {
				t.Fatalf("the first use of a nonce: %d", c)
			}
			return send("POST", "/faults", n, sig, body)
		}},
		{"an expired nonce", func() int {
			n := nonce()
			g.now = func() time.Time { return time.Now().Add(NonceLifetime + time.Second) }
			defer func() { g.now = time.Now }()
			return send("POST", "/faults", n, Sign(priv, n, "POST", "/faults", []byte(body)), body)
		}},
	} {
		if code := tc.code(); code != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", tc.name, code)
		}
	}
	if n := len(got()); n != 2 { // the first Do and the replay's first use
		t.Errorf("the hook was reached %d times, want 2", n)
	}

	// A flood of nonce requests cannot crowd svclab's out.
	for i := 0; i < 3*maxNonces; i++ {
		nonce()
	}
	if _, err := Do(ctx, srv.Client(), priv, srv.URL, http.MethodPost, "/faults", nil); err != nil {
		t.Errorf("after a flood of nonces: %v", err)
	}
	if len(g.nonces) > maxNonces {
		t.Errorf("%d nonces kept, at most %d", len(g.nonces), maxNonces)
	}
}

func TestKeyEncoding(t *testing.T) {
	pub, priv, _ := GenerateKey()
	p2, err := ParsePublic(EncodePublic(pub))
	if err != nil || !bytes.Equal(p2, pub) {
		t.Errorf("public key round trip: %v", err)
	}
	k2, err := ParsePrivate(EncodePrivate(priv))
	if err != nil || !bytes.Equal(k2, priv) {
		t.Errorf("private key round trip: %v", err)
	}
	for _, bad := range []string{"", "not base64!", "c2hvcnQ="} {
		if _, err := ParsePublic(bad); err == nil {
			t.Errorf("ParsePublic(%q) accepted", bad)
		}
		if _, err := ParsePrivate(bad); err == nil {
			t.Errorf("ParsePrivate(%q) accepted", bad)
		}
	}
}
