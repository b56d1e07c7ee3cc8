package hostsetup

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/svclab/svclab/internal/pgtest"
)

// fakeHost is a hand-written Host: commands in have are present; Run
// records calls and, for apt-get install, makes the packages' commands
// appear.
type fakeHost struct {
	have   map[string]bool
	root   bool
	debian bool
	calls  []string
	fail   bool
}

func (f *fakeHost) LookPath(cmd string) error {
	if f.have[cmd] {
		return nil
	}
	return exec.ErrNotFound
}
func (f *fakeHost) IsRoot() bool   { return f.root }
func (f *fakeHost) IsDebian() bool { return f.debian }
func (f *fakeHost) Run(_ context.Context, _ io.Writer, name string, args ...string) error {
	f.calls = append(f.calls, name+" "+strings.Join(args, " "))
	if f.fail {
		return errors.New("exit status 100")
	}
	if name == "apt-get" && args[0] == "install" {
		for _, r := range append(Requirements, KindRequirements...) {
			for _, a := range args {
				if a == r.Package {
					f.have[r.Command] = true
				}
			}
		}
	}
	return nil
}

func all() map[string]bool {
	m := map[string]bool{}
	for _, r := range append(Requirements, KindRequirements...) {
		m[r.Command] = true
	}
	return m
}

func TestEnsure(t *testing.T) {
	for _, tc := range []struct {
		name      string
		missing   []string
		root      bool
		debian    bool
		checkOnly bool
		fail      bool
		wantErr   string
		wantCalls []string
	}{
		{name: "nothing missing", root: true, debian: true},
		{name: "root on debian installs", missing: []string{"nft", "conntrack"}, root: true, debian: true,
			wantCalls: []string{"apt-get update -qq", "apt-get install -y -qq --no-install-recommends nftables conntrack"}},
		{name: "the PostgreSQL server", missing: []string{"postgres"}, root: true, debian: true,
			wantCalls: []string{"apt-get update -qq", "apt-get install -y -qq --no-install-recommends postgresql"}},
		{name: "not root says sudo", missing: []string{"runc"}, debian: true, wantErr: "Install them with: sudo apt-get install -y runc"},
		{name: "check only never installs", missing: []string{"runc"}, root: true, debian: true, checkOnly: true, wantErr: "sudo apt-get install -y runc"},
		{name: "not debian names the packages", missing: []string{"ip"}, root: true, wantErr: "Debian packages iproute2"},
		{name: "apt failure is reported", missing: []string{"nft"}, root: true, debian: true, fail: true, wantErr: "apt-get update: exit status 100",
			wantCalls: []string{"apt-get update -qq"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &fakeHost{have: all(), root: tc.root, debian: tc.debian, fail: tc.fail}
			for _, m := range tc.missing {
				delete(h.have, m)
			}
			var out bytes.Buffer
			err := Ensure(context.Background(), h, &out, tc.checkOnly)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Ensure error = %v, want it to contain %q", err, tc.wantErr)
			}
			if strings.Join(h.calls, "\n") != strings.Join(tc.wantCalls, "\n") {
				t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(h.calls, "\n"), strings.Join(tc.wantCalls, "\n"))
			}
			if tc.wantErr == "" && len(Missing(h)) != 0 {
				t.Errorf("still missing after Ensure: %v", Missing(h))
			}
		})
	}
}

// The kind backend's Docker engine is its own group: svclab setup --kind
// and the kind backend install it, plain setup does not.
func TestEnsureKind(t *testing.T) {
	h := &fakeHost{have: all(), root: true, debian: true}
	delete(h.have, "dockerd")
	delete(h.have, "containerd")
	var out bytes.Buffer
	if err := Ensure(context.Background(), h, &out, false); err != nil || len(h.calls) != 0 {
		t.Fatalf("plain setup: err %v, calls %q; want nothing installed", err, h.calls)
	}
	if err := EnsureOf(context.Background(), h, &out, KindRequirements, false); err != nil {
		t.Fatal(err)
	}
	want := "apt-get update -qq\napt-get install -y -qq --no-install-recommends docker.io containerd"
	if got := strings.Join(h.calls, "\n"); got != want {
		t.Errorf("calls:\n%s\nwant:\n%s", got, want)
	}
	if m := MissingOf(h, KindRequirements); len(m) != 0 {
		t.Errorf("still missing: %v", m)
	}
}

// The PostgreSQL server's binaries are not on PATH (Debian keeps them in
// /usr/lib/postgresql/VERSION/bin): setup still finds them.
func TestSystemFindsPostgres(t *testing.T) {
	if _, err := pgtest.BinDir(); err != nil {
		t.Skip(err)
	}
	if err := (System{}).LookPath("postgres"); err != nil {
		t.Errorf("postgres not found: %v", err)
	}
}
