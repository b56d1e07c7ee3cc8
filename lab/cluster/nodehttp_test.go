package cluster_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/clustertest"
	"github.com/svclab/svclab/lab/proxier/control"
)

// NodeHTTP on a cluster without network namespaces (kind) sends requests
// with the node's curl: here the host's real curl stands for the node's,
// against a server that guards a hook as the proxier does. The answers'
// status and body come through, bodies starting with @ are data, and a
// signed request of control.Do passes the guard through it.
func TestNodeHTTPWithCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl on this machine")
	}
	pub, key, err := control.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	g := control.NewGuard(pub)
	mux := http.NewServeMux()
	mux.Handle(control.NoncePath, g.NonceHandler())
	mux.Handle("/faults", g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(append([]byte("got "), b...))
	})))
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write([]byte(r.Method + " " + r.Header.Get("Content-Type") + " " + string(b)))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := clustertest.NewCluster("lab", clustertest.WithBackend("kind"), clustertest.WithExec(func(ctx context.Context, node string, cmd []string, stdio cluster.Stdio) error {
		x := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
		x.Stdout, x.Stderr = stdio.Stdout, stdio.Stderr
		return x.Run()
	}))
	tr, err := cluster.NodeHTTP(c, "lab-worker")
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: tr}
	ctx := context.Background()

	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/echo", strings.NewReader("@/etc/passwd"))
	req.Header.Set("Content-Type", "application/json")
	b, err := control.Send(client, req)
	if err != nil || string(b) != "POST application/json @/etc/passwd" {
		t.Errorf("echo: %q %v", b, err)
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/missing", nil)
	if b, err := control.Send(client, req); err == nil || !strings.Contains(err.Error(), "404 Not Found: 404 page not found") {
		t.Errorf("a 404 came through as %q %v", b, err)
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/faults", strings.NewReader(`{"stopSyncing":true}`))
	if b, err := control.Send(client, req); err == nil || !strings.Contains(err.Error(), "403 Forbidden") {
		t.Errorf("an unsigned request came through as %q %v", b, err)
	}
	if b, err := control.Do(ctx, client, key, srv.URL, http.MethodPost, "/faults", []byte(`{"stopSyncing":true}`)); err != nil || string(b) != `got {"stopSyncing":true}` {
		t.Errorf("signed: %q %v", b, err)
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:1/nothing", nil)
	if _, err := client.Do(req); err == nil || !strings.Contains(err.Error(), "curl") {
		t.Errorf("nothing listening: %v", err)
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/echo", nil)
	req.Header.Set("X-Evil", "a\r\nHost: elsewhere")
	if _, err := client.Do(req); err == nil || !strings.Contains(err.Error(), "line break") {
		t.Errorf("a header with a line break: %v", err)
	}
}
