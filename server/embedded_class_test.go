package server

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/svclab/svclab/lab/attempt"
	"github.com/svclab/svclab/lab/class"
	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/kubebin"
	"github.com/svclab/svclab/lab/store"
	"github.com/svclab/svclab/lab/views"
)

// embeddedClass is a server of one class on embedded clusters, wired as
// "svclab serve --classes" wires it. Everything ends with the test, which
// then fails if a cluster is left.
type embeddedClass struct {
	p       *embedded.Provider
	hub     *class.Hub
	created class.Created
	url     string
}

func newEmbeddedClass(t *testing.T, spec class.Spec) *embeddedClass {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stateDir := t.TempDir()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p := embedded.New(stateDir, log)
	st, err := store.Open(ctx, store.DefaultPath(stateDir), store.Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m, err := attempt.New(attempt.Options{Store: st, Provider: p, Log: log, StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	db, err := class.OpenDB(ctx, class.DefaultDBPath(stateDir), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := spec.Normalize(m.Catalog()); err != nil {
		t.Fatal(err)
	}
	created, err := db.CreateClass(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	hub := class.NewHub(class.Options{DB: db, Provider: p, Catalog: m.Catalog(), Attempts: m, Store: st, Log: log})
	t.Cleanup(func() {
		if err := hub.Shutdown(context.Background()); err != nil {
			t.Errorf("ending the class's labs: %v", err)
		}
		if left, _ := p.List(context.Background()); len(left) > 0 {
			t.Errorf("clusters left after the class ended: %+v", left)
		}
	})
	if err := hub.OpenAll(ctx); err != nil {
		t.Fatal(err)
	}
	s := &Server{
		Clusters: p, Log: log, Background: ctx, Catalog: m.Catalog(), Classes: hub, ClassesOnly: true, Timeline: st,
		KubeBin: func(ctx context.Context) (string, error) { return kubebin.Locate(ctx, nil) },
		PodExec: func(c cluster.Cluster) (views.PodExecutor, error) { return grade.NewPodExecutor(c) },
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { ts.Close(); cancel(); s.Wait() })
	return &embeddedClass{p: p, hub: hub, created: created, url: ts.URL}
}
