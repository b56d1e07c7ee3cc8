//go:build linux

package nodeagent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
)

// labUID stands for the lab's root on the host in these tests: a file of
// the host that ends up owned by it was chowned through a link.
const labUID = 54321

// attackRoot is a directory with the node's state directory (state) and,
// beside it, what the lab must never reach through the agent (outside: a
// file and a directory of root's).
func attackRoot(t *testing.T) (state, outside string) {
	t.Helper()
	root := t.TempDir()
	state, outside = filepath.Join(root, "state"), filepath.Join(root, "outside")
	for _, d := range []string{state, filepath.Join(outside, "dir")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	return state, outside
}

// fileState is what a tree holds: each path's type, mode, owner, size,
// content and link target.
func fileState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			out[p] = "error " + err.Error()
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			out[p] = "error " + err.Error()
			return nil
		}
		v := fmt.Sprintf("mode=%o uid=%d gid=%d size=%d nlink=%d", st.Mode, st.Uid, st.Gid, st.Size, st.Nlink)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			b, _ := os.ReadFile(p)
			v += " content=" + string(b)
		case unix.S_IFLNK:
			l, _ := os.Readlink(p)
			v += " link=" + l
		}
		out[p] = v
		return nil
	})
	return out
}

// unchanged fails t if dir differs from what fileState found before.
func unchanged(t *testing.T, dir string, before map[string]string) {
	t.Helper()
	after := fileState(t, dir)
	for p, v := range before {
		if after[p] != v {
			t.Errorf("%s changed: %s → %s", p, v, after[p])
		}
	}
	for p, v := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s appeared: %s", p, v)
		}
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestStateTreeFollowsNoLink plants, where the lab's ids could, links to
// outside the state directory at every kind of place the agent writes,
// chowns, chmods or removes: each operation refuses or works on the link
// itself, and nothing outside changes.
func TestStateTreeFollowsNoLink(t *testing.T) {
	uid := string(testUID(1))
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, state, outside string)
		do    func(tr stateTree) error
		// ok: the operation succeeds (on the agent's own files, the link
		// removed or replaced); else it must fail.
		ok bool
	}{
		{"pod directory a link to a directory outside", func(t *testing.T, state, outside string) {
			mustSymlink(t, filepath.Join(outside, "dir"), filepath.Join(state, "pods", uid))
		}, func(tr stateTree) error { return tr.mkdirAll("pods/"+uid+"/logs/c", 0o755) }, false},
		{"pods a relative link up", func(t *testing.T, state, outside string) {
			mustSymlink(t, "../outside/dir", filepath.Join(state, "pods"))
		}, func(tr stateTree) error {
			return tr.writeFile("pods/"+uid+"/hosts", []byte("x"), 0o644, labUID, labUID)
		}, false},
		{"hosts a link to a file outside", func(t *testing.T, state, outside string) {
			mustSymlink(t, filepath.Join(outside, "secret"), filepath.Join(state, "pods", uid, "hosts"))
		}, func(tr stateTree) error {
			return tr.writeFile("pods/"+uid+"/hosts", []byte("x"), 0o644, labUID, labUID)
		}, false},
		{"hosts a hard link to a file outside", func(t *testing.T, state, outside string) {
			os.MkdirAll(filepath.Join(state, "pods", uid), 0o755)
			if err := os.Link(filepath.Join(outside, "secret"), filepath.Join(state, "pods", uid, "hosts")); err != nil {
				t.Fatal(err)
			}
		}, func(tr stateTree) error {
			return tr.writeFile("pods/"+uid+"/hosts", []byte("x"), 0o644, labUID, labUID)
		}, false},
		{"hosts a FIFO", func(t *testing.T, state, outside string) {
			os.MkdirAll(filepath.Join(state, "pods", uid), 0o755)
			if err := unix.Mkfifo(filepath.Join(state, "pods", uid, "hosts"), 0o666); err != nil {
				t.Fatal(err)
			}
		}, func(tr stateTree) error {
			return tr.writeFile("pods/"+uid+"/hosts", []byte("x"), 0o644, labUID, labUID)
		}, false},
		{"an emptyDir a link to a directory outside", func(t *testing.T, state, outside string) {
			mustSymlink(t, filepath.Join(outside, "dir"), filepath.Join(state, "pods", uid, "volumes", "v"))
		}, func(tr stateTree) error { return tr.ownedDir("pods/"+uid+"/volumes/v", 0o777, labUID, labUID) }, false},
		{"an emptyDir a link to a file outside", func(t *testing.T, state, outside string) {
			mustSymlink(t, filepath.Join(outside, "secret"), filepath.Join(state, "pods", uid, "volumes", "v"))
		}, func(tr stateTree) error { return tr.ownedDir("pods/"+uid+"/volumes/v", 0o777, labUID, labUID) }, false},
		{"state.json's temporary file a link outside", func(t *testing.T, state, outside string) {
			mustSymlink(t, filepath.Join(outside, "secret"), filepath.Join(state, "pods", uid, "state.json.tmp"))
		}, func(tr stateTree) error { return tr.replaceFile("pods/"+uid+"/state.json", []byte("{}"), 0o644) }, true},
		{"state.json a link outside", func(t *testing.T, state, outside string) {
			mustSymlink(t, filepath.Join(outside, "secret"), filepath.Join(state, "pods", uid, "state.json"))
		}, func(tr stateTree) error { _, err := tr.readFile("pods/"+uid+"/state.json", 1<<20); return err }, false},
		{"a log directory a link outside", func(t *testing.T, state, outside string) {
			mustSymlink(t, filepath.Join(outside, "dir"), filepath.Join(state, "pods", uid, "logs", "c"))
		}, func(tr stateTree) error {
			l, err := openContainerLog(tr, "pods/"+uid+"/logs/c/0.log", DefaultLogLimits)
			if err == nil {
				l.Close()
			}
			return err
		}, false},
		{"a log a link outside", func(t *testing.T, state, outside string) {
			mustSymlink(t, filepath.Join(outside, "secret"), filepath.Join(state, "pods", uid, "logs", "c", "0.log"))
		}, func(tr stateTree) error {
			_, err := readLog(t.Context(), tr, "pods/"+uid+"/logs/c/0.log", api.ContainerLogOpts{}, fromStart, func() bool { return true })
			return err
		}, false},
		{"a pod directory full of links, removed", func(t *testing.T, state, outside string) {
			mustSymlink(t, filepath.Join(outside, "dir"), filepath.Join(state, "pods", uid, "volumes", "v", "to-dir"))
			mustSymlink(t, filepath.Join(outside, "secret"), filepath.Join(state, "pods", uid, "volumes", "v", "deep", "to-file"))
			mustSymlink(t, "../../../../../outside", filepath.Join(state, "pods", uid, "up"))
		}, func(tr stateTree) error { return tr.removeAll("pods/" + uid) }, true},
		{"a removal through a link", func(t *testing.T, state, outside string) {
			mustSymlink(t, filepath.Join(outside), filepath.Join(state, "pods"))
		}, func(tr stateTree) error { return tr.removeAll("pods/dir") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, outside := attackRoot(t)
			tc.plant(t, state, outside)
			before := fileState(t, outside)
			done := make(chan error, 1)
			go func() { done <- tc.do(stateTree{state}) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("the operation blocked")
			}
			if tc.ok && err != nil {
				t.Errorf("failed: %v", err)
			}
			if !tc.ok && err == nil {
				t.Error("succeeded through the planted link")
			}
			unchanged(t, outside, before)
		})
	}
}

// TestAtomicWriteInALabVolume writes a ConfigMap volume whose directory
// the lab has filled with links and leftovers of its own: the volume ends
// up holding the files, and nothing outside it changes.
func TestAtomicWriteInALabVolume(t *testing.T) {
	state, outside := attackRoot(t)
	vol := filepath.Join(state, "vol")
	mustSymlink(t, "/", filepath.Join(vol, "..data"))
	mustSymlink(t, filepath.Join(outside, "secret"), filepath.Join(vol, "a"))
	mustSymlink(t, filepath.Join(outside, "dir"), filepath.Join(vol, "gone"))
	mustSymlink(t, filepath.Join(outside, "secret"), filepath.Join(vol, "..data_2000_01_01_00_00_00.000000000"))
	os.MkdirAll(filepath.Join(vol, "..data_tmp", "x"), 0o755)
	before := fileState(t, outside)
	files := map[string]fileData{"a": {[]byte("1"), 0o600}, "sub/b": {[]byte("2"), 0o644}}
	changed, err := atomicWrite(stateTree{state}, "vol", files, labUID)
	if err != nil || !changed {
		t.Fatalf("atomicWrite: %v %v", changed, err)
	}
	unchanged(t, outside, before)
	if b, err := os.ReadFile(filepath.Join(vol, "sub", "b")); err != nil || string(b) != "2" {
		t.Errorf("sub/b: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(vol, "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the lab's link was left: %v", err)
	}
	// The lab's a is replaced by the writer's link.
	if l, err := os.Readlink(filepath.Join(vol, "a")); err != nil || l != "..data/a" {
		t.Errorf("a links to %q (%v)", l, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(vol, "..data", "a"), &st); err != nil || st.Uid != labUID || st.Mode&0o777 != 0o600 {
		t.Errorf("..data/a: %+v %v", st, err)
	}

	// Paths that lead out of the volume are refused before anything is
	// written.
	for _, p := range []string{"../x", "/abs", "a/../../x", "..data", "..data_x/y", "", "a//b", "./a", "a\x00b"} {
		if _, err := atomicWrite(stateTree{state}, "vol", map[string]fileData{p: {[]byte("x"), 0o644}}, labUID); err == nil {
			t.Errorf("path %q was written", p)
		}
	}
	unchanged(t, outside, before)
}

// TestMakeBundleFollowsNoLink plants the bundle's writable layer as a
// link to a directory of the host: it is never chowned to the lab.
func TestMakeBundleFollowsNoLink(t *testing.T) {
	state, outside := attackRoot(t)
	bundle := filepath.Join(state, "containers", "id")
	mustSymlink(t, filepath.Join(outside, "dir"), filepath.Join(bundle, "upper"))
	before := fileState(t, outside)
	if fd, err := makeBundle(bundle, labUID); err == nil {
		unix.Close(fd)
		t.Error("made a bundle over a link")
	}
	unchanged(t, outside, before)
	os.Remove(filepath.Join(bundle, "upper"))
	fd, err := makeBundle(bundle, labUID)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(bundle, "upper"), &st); err != nil || st.Uid != labUID {
		t.Errorf("upper: owner %d, %v", st.Uid, err)
	}
}

// TestRemoveAllInManyEntries removes a directory of more entries than one
// read returns, and one with entries that cannot go.
func TestRemoveAllInManyEntries(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "big", "sub"), 0o755)
	for i := 0; i < 2500; i++ {
		if err := os.WriteFile(filepath.Join(dir, "big", fmt.Sprint(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tr := stateTree{dir}
	if err := tr.removeAll("big"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "big")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("big is still there: %v", err)
	}
	if err := tr.removeAll("missing"); err != nil {
		t.Errorf("removing what is not there: %v", err)
	}
	for _, bad := range []string{"", ".", "..", "../x", "a/../.."} {
		if err := tr.root(func(root int) error { return removeAllIn(root, bad) }); err == nil {
			t.Errorf("removeAllIn(%q) succeeded", bad)
		}
	}
}

// TestPodDirNames: a Pod's directory and the names below it are single
// file names, for a UID as the API server makes them only.
func TestPodDirNames(t *testing.T) {
	tr := stateTree{"/state"}
	for _, uid := range []string{"", "..", "../../etc", "abc", "0123456789abcdef", string(testUID(1)) + "/x", "6BA7B810-9DAD-11D1-80B4-00C04FD430C8"} {
		if _, err := newPodDir(tr, types.UID(uid)); err == nil {
			t.Errorf("UID %q gave a directory", uid)
		}
	}
	var none podDir
	if p := none.path(); p != "" {
		t.Errorf("no directory has path %q", p)
	}
	d, err := newPodDir(tr, testUID(7))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.path("logs", "c", "0.log"); got != "/state/pods/"+string(testUID(7))+"/logs/c/0.log" {
		t.Errorf("path %q", got)
	}
	for _, names := range [][]string{{".."}, {"a/b"}, {""}, {"."}, {"a\x00"}, {"logs", "../../../etc"}, {strings.Repeat("a", 256)}} {
		if _, err := d.sub(names...); err == nil {
			t.Errorf("sub(%q) accepted", names)
		}
		if p := d.path(names...); p != "" {
			t.Errorf("path(%q) = %q", names, p)
		}
	}
}

// TestOwnDirTakesADirectoryOfItsOwn: an emptyDir that exists already is
// taken as it is, whatever its mode.
func TestOwnDirTakesADirectoryOfItsOwn(t *testing.T) {
	state, _ := attackRoot(t)
	tr := stateTree{state}
	if err := tr.ownedDir("pods/x/volumes/v", 0o777, labUID, labUID); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(state, "pods/x/volumes/v"), 0o700)
	if err := tr.ownedDir("pods/x/volumes/v", 0o777, labUID, labUID); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	unix.Stat(filepath.Join(state, "pods/x/volumes/v"), &st)
	if st.Mode&0o777 != 0o777 || st.Uid != labUID {
		t.Errorf("emptyDir mode %o owner %d", st.Mode&0o777, st.Uid)
	}
	unix.Stat(filepath.Join(state, "pods/x/volumes"), &st)
	if st.Uid != uint32(os.Geteuid()) || st.Mode&0o777 != 0o755 {
		t.Errorf("volumes/ is the lab's or open: mode %o owner %d", st.Mode&0o777, st.Uid)
	}
	if err := syscall.Access(filepath.Join(state, "pods/x/volumes/v"), 0); err != nil {
		t.Error(err)
	}
}
