package dockerd

import (
	"context"
	"os"
	"testing"
)

func TestEnsureFindsTheUsersEngine(t *testing.T) {
	engines := Engines("/Users/ann", "/run/user/1000")
	for _, tc := range []struct {
		name       string
		answering  []string
		wantHost   string
		wantEngine string
	}{
		{name: "Docker Desktop on a Mac", answering: []string{"unix:///Users/ann/.docker/run/docker.sock"},
			wantHost: "unix:///Users/ann/.docker/run/docker.sock", wantEngine: "Docker Desktop"},
		{name: "colima", answering: []string{"unix:///Users/ann/.colima/default/docker.sock"},
			wantHost: "unix:///Users/ann/.colima/default/docker.sock", wantEngine: "colima"},
		{name: "OrbStack", answering: []string{"unix:///Users/ann/.orbstack/run/docker.sock"},
			wantHost: "unix:///Users/ann/.orbstack/run/docker.sock", wantEngine: "OrbStack"},
		{name: "rootless Docker", answering: []string{"unix:///run/user/1000/docker.sock"},
			wantHost: "unix:///run/user/1000/docker.sock", wantEngine: "rootless Docker"},
		{name: "the machine's engine comes first", answering: []string{"unix:///Users/ann/.colima/default/docker.sock", DefaultSocket},
			wantHost: DefaultSocket, wantEngine: "the machine's Docker engine"},
		{name: "Docker Desktop before colima", answering: []string{"unix:///Users/ann/.colima/default/docker.sock", "unix:///Users/ann/.docker/run/docker.sock"},
			wantHost: "unix:///Users/ann/.docker/run/docker.sock", wantEngine: "Docker Desktop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			for _, a := range tc.answering {
				f.answering[a] = true
			}
			d, err := Ensure(context.Background(), Options{Dir: t.TempDir(), System: f, Engines: engines, Svclab: os.Args[0]})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Release(context.Background())
			if d.Host != tc.wantHost || d.Engine != tc.wantEngine || d.Own {
				t.Errorf("got %s (%q, own %v), want %s (%q)", d.Host, d.Engine, d.Own, tc.wantHost, tc.wantEngine)
			}
			if len(f.started) > 0 || f.installs > 0 {
				t.Errorf("started %v, installed %d times, with an engine answering", f.started, f.installs)
			}
		})
	}
}

func TestEnginesWithoutHome(t *testing.T) {
	if got := Engines("", ""); len(got) != 1 || got[0].Host != DefaultSocket {
		t.Errorf("Engines with no home: %v, want only %s", got, DefaultSocket)
	}
}
