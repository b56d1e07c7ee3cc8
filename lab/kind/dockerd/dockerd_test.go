package dockerd

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnsure(t *testing.T) {
	const own = "own" // stands for the own daemon's address
	for _, tc := range []struct {
		name        string
		env         string
		answering   []string
		notRoot     bool
		noOwn       bool
		notInstall  bool
		noSysRes    bool
		wantHost    string
		wantOwn     bool
		wantWrapped bool
		wantInstall bool
		wantErr     error
		wantErrText string
	}{
		{name: "the machine's daemon", answering: []string{DefaultSocket}, wantHost: DefaultSocket},
		{name: "DOCKER_HOST's daemon", env: "tcp://10.0.0.1:2375", answering: []string{"tcp://10.0.0.1:2375", DefaultSocket}, wantHost: "tcp://10.0.0.1:2375"},
		{name: "DOCKER_HOST's daemon is down", env: "tcp://10.0.0.1:2375", answering: []string{DefaultSocket}, wantErrText: "does not answer at DOCKER_HOST=tcp://10.0.0.1:2375"},
		{name: "none answers: svclab's own", wantHost: own, wantOwn: true},
		{name: "none answers, missing capability: wrapped", noSysRes: true, wantHost: own, wantOwn: true, wantWrapped: true},
		{name: "docker.io missing: installed", notInstall: true, wantHost: own, wantOwn: true, wantInstall: true},
		{name: "not root", notRoot: true, wantErr: ErrNeedRoot},
		{name: "not root, Docker missing: nothing installed", notRoot: true, notInstall: true, wantErr: ErrNeedRoot},
		{name: "own engine not wanted", noOwn: true, wantErr: ErrNoOwn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			for _, a := range tc.answering {
				f.answering[a] = true
			}
			f.root = !tc.notRoot
			f.installed = !tc.notInstall
			if tc.noSysRes {
				f.bounding &^= 1 << 24
			}
			dir := t.TempDir()
			d, err := Ensure(context.Background(), Options{Dir: dir, Env: tc.env, NoOwn: tc.noOwn, System: f, Svclab: os.Args[0]})
			if f.installs > 0 && !tc.wantInstall {
				t.Errorf("installed Docker")
			}
			if tc.wantErr != nil || tc.wantErrText != "" {
				if err == nil || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) || !strings.Contains(err.Error(), tc.wantErrText) {
					t.Fatalf("error %v, want %v %q", err, tc.wantErr, tc.wantErrText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer d.Release(context.Background())
			want := tc.wantHost
			if want == own {
				want = OwnHost(dir)
			}
			if d.Host != want || d.Own != tc.wantOwn || d.Wrapped != tc.wantWrapped {
				t.Errorf("got %s own=%v wrapped=%v, want %s own=%v wrapped=%v", d.Host, d.Own, d.Wrapped, want, tc.wantOwn, tc.wantWrapped)
			}
			if (f.installs > 0) != tc.wantInstall {
				t.Errorf("installs %d, want install %v", f.installs, tc.wantInstall)
			}
			if !tc.wantOwn {
				if len(f.started) > 0 {
					t.Errorf("started %v with a daemon answering", f.started)
				}
				return
			}
			var cfg map[string]any
			data, err := os.ReadFile(filepath.Join(dir, "daemon.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &cfg); err != nil {
				t.Fatal(err)
			}
			if cfg["iptables"] != false || cfg["ip-masq"] != false || cfg["bridge"] != "none" || cfg["data-root"] != filepath.Join(dir, "data") {
				t.Errorf("daemon.json changes the host's network or lives elsewhere:\n%s", data)
			}
			_, hasRuntime := cfg["default-runtime"]
			if hasRuntime != tc.wantWrapped {
				t.Errorf("default-runtime set %v, want %v:\n%s", hasRuntime, tc.wantWrapped, data)
			}
			if _, err := os.Stat(filepath.Join(dir, "bin", RuntimeName)); (err == nil) != tc.wantWrapped {
				t.Errorf("wrapper installed: %v, want %v", err == nil, tc.wantWrapped)
			}
		})
	}
}

// A second Ensure uses the running daemon; Release stops it only when no
// other user holds it and no container is left.
func TestReleaseStopsWhenIdle(t *testing.T) {
	f := newFake()
	dir := t.TempDir()
	o := Options{Dir: dir, System: f}
	ctx := context.Background()
	a, err := Ensure(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Ensure(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.started) != 1 {
		t.Fatalf("started %d daemons, want 1", len(f.started))
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := OwnStatus(ctx, o); !st.Running {
		t.Fatal("stopped while another user held it")
	}
	f.containers[OwnHost(dir)] = []string{"c1"}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := OwnStatus(ctx, o); !st.Running {
		t.Fatal("stopped while it had a container")
	}
	delete(f.containers, OwnHost(dir))
	if err := StopIdle(ctx, o); err != nil {
		t.Fatal(err)
	}
	if st, _ := OwnStatus(ctx, o); st.Running {
		t.Fatal("still running with no user and no container")
	}
	for _, p := range []string{"dockerd.pid", "exec", "docker.sock"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s left behind", p)
		}
	}
}

// A daemon that crashed left its pid file: the next Ensure starts a new
// one.
func TestEnsureAfterCrash(t *testing.T) {
	f := newFake()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dockerd.pid"), []byte("4242"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "exec", "containerd"), 0o700)
	d, err := Ensure(context.Background(), Options{Dir: dir, System: f})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release(context.Background())
	if len(f.started) != 1 || !d.Own {
		t.Fatalf("started %v, own %v", f.started, d.Own)
	}
	if _, err := os.Stat(filepath.Join(dir, "exec", "containerd")); err == nil {
		t.Error("the crashed daemon's exec-root was not cleaned")
	}
}
