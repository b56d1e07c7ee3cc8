package mounts

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/a/b`:           "/a/b",
		`/vol/a\040b/x`:  "/vol/a b/x",
		`/t\011ab\012nl`: "/t\tab\nnl",
		`/back\134slash`: `/back\slash`,
		`/trail\04`:      `/trail\04`,
		`/not\999octal`:  `/not\999octal`,
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParse(t *testing.T) {
	info := []byte(`22 1 0:21 / /lab rw - tmpfs tmpfs rw
23 22 0:22 / /lab/a rw - tmpfs tmpfs rw
24 23 0:23 / /lab/a/b\040c rw - tmpfs tmpfs rw
25 22 0:24 / /lab/a rw - tmpfs tmpfs rw
26 1 0:25 / /labx rw - tmpfs tmpfs rw
short line
`)
	got := parse(info, Beneath("/lab"))
	if want := []string{"/lab/a/b c", "/lab/a", "/lab"}; !slices.Equal(got, want) {
		t.Errorf("Beneath: %q, want %q", got, want)
	}
	got = parse(info, Below("/lab/"))
	if want := []string{"/lab/a/b c", "/lab/a"}; !slices.Equal(got, want) {
		t.Errorf("Below: %q, want %q", got, want)
	}
}

// A Pod plants a symlink where a mount point's path goes (the escaped
// name, and a directory replaced by a link): Detach unmounts what the
// path really leads to, or nothing, never the link's target.
func TestDetachFollowsNoLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := t.TempDir()
	target := filepath.Join(dir, "host-mount")
	lab := filepath.Join(dir, "lab")
	for _, d := range []string{filepath.Join(target, "x"), filepath.Join(lab, "vol", "a b", "x")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mount := func(at string) {
		t.Helper()
		if err := unix.Mount("tmpfs", at, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Unmount(at, unix.MNT_DETACH) })
	}
	mounted := func(at string) bool {
		mps, err := List(func(mp string) bool { return mp == at })
		if err != nil {
			t.Fatal(err)
		}
		return len(mps) > 0
	}
	// The host's mount, which the lab points at.
	mount(filepath.Join(target, "x"))
	// The lab's mount, stacked twice, with a link named as mountinfo
	// escapes its path.
	labMount := filepath.Join(lab, "vol", "a b", "x")
	mount(labMount)
	mount(labMount)
	if err := os.Symlink(target, filepath.Join(lab, "vol", `a\040b`)); err != nil {
		t.Fatal(err)
	}
	if err := DetachMatching(Beneath(lab)); err != nil {
		t.Fatal(err)
	}
	if mounted(labMount) {
		t.Error("the lab's mount is still there")
	}
	if !mounted(filepath.Join(target, "x")) {
		t.Fatal("the host's mount was unmounted")
	}
	// The directory on the path replaced by a link after the mount.
	mount(labMount)
	moved := filepath.Join(lab, "vol", "moved")
	if err := os.Rename(filepath.Join(lab, "vol", "a b"), moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(lab, "vol", "a b")); err != nil {
		t.Fatal(err)
	}
	if err := Detach(labMount); !errors.Is(err, ErrLink) {
		t.Errorf("Detach through a link: %v", err)
	}
	if !mounted(filepath.Join(target, "x")) {
		t.Fatal("the host's mount was unmounted through the link")
	}
	if err := Detach(filepath.Join(moved, "x")); err != nil || mounted(filepath.Join(moved, "x")) {
		t.Errorf("Detach at the real path: %v", err)
	}
	if err := Detach("relative/path"); err == nil {
		t.Error("a relative path was accepted")
	}
}
