package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/cluster"
)

type fakeLister struct {
	list []cluster.Summary
	err  error
}

func (f fakeLister) List(context.Context) ([]cluster.Summary, error) { return f.list, f.err }

func (f fakeLister) Get(_ context.Context, name string) (cluster.Cluster, error) {
	return nil, cluster.ErrNotFound
}
func (f fakeLister) Create(context.Context, cluster.CreateOptions) (cluster.Cluster, error) {
	return nil, errors.New("not used")
}
func (f fakeLister) Delete(context.Context, string) error { return errors.New("not used") }

func TestRoutes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		lister     fakeLister
		path       string
		wantStatus int
		want       []string
	}{
		{name: "health", path: "/healthz", wantStatus: 200, want: []string{"ok"}},
		{name: "no clusters", path: "/", wantStatus: 200, want: []string{`id="no-clusters"`, "svclab cluster create"}},
		{name: "clusters", path: "/", lister: fakeLister{list: []cluster.Summary{
			{Name: "lab", Backend: "embedded", State: "running", Server: "https://172.29.1.2:6443"},
			{Name: "b<x>", Backend: "embedded", State: "degraded", Detail: "kube-scheduler restarting"},
		}}, wantStatus: 200, want: []string{"<td>lab</td>", "https://172.29.1.2:6443", `class="state-degraded"`, "b&lt;x&gt;", "kube-scheduler restarting"}},
		{name: "list error", path: "/", lister: fakeLister{err: errors.New("disk on fire")}, wantStatus: 500, want: []string{"disk on fire"}},
		{name: "unknown page", path: "/nope", wantStatus: 404, want: []string{"no such page: /nope"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{Clusters: tc.lister, Log: slog.New(slog.DiscardHandler)}
			ts := httptest.NewServer(s.Handler())
			defer ts.Close()
			resp, err := http.Get(ts.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("status %d, want %d; body %s", resp.StatusCode, tc.wantStatus, body)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(body), w) {
					t.Errorf("body lacks %q:\n%s", w, body)
				}
			}
		})
	}
}

func TestListenPortInUse(t *testing.T) {
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = Listen(l.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "choose another --addr") {
		t.Fatalf("second Listen on %s: err = %v, want a port-in-use error naming the fix", l.Addr(), err)
	}
}

func TestServeShutsDownWithContext(t *testing.T) {
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, http.NotFoundHandler(), slog.New(slog.DiscardHandler)) }()
	resp, err := http.Get("http://" + l.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve returned %v after cancel", err)
	}
	if _, err := http.Get("http://" + l.Addr().String() + "/"); err == nil {
		t.Fatal("server still answers after shutdown")
	}
}
