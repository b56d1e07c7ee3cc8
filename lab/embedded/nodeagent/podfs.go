//go:build linux

package nodeagent

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
)

// The node's state directory (Config.StateDir) holds what the agent keeps
// of each Pod, under pods/UID:
//
//	resolv.conf, hosts, hostname   the files the kubelet manages for a Pod
//	state.json                     what a restarted agent adopts (adopt.go)
//	volumes/NAME/                  emptyDir and ConfigMap, Secret, projected
//	                               and downward API volumes
//	logs/CONTAINER/RUN.log         each container run's output
//	containers/ID/                 each run's bundle (config.json, the
//	                               writable layer)
//	userns                         the pin of a Pod's own user namespace
//
// The agent is root on the host; the lab's ids own parts of these trees
// (volumes, writable layers, the Pod's files). So everything the agent
// makes, writes, chmods, chowns or removes there it reaches from a
// descriptor of the state directory, with openat2 resolving beneath it and
// through no symlink (noLinks), and then by descriptor: a name that slipped
// past validatePod cannot lead out of the state directory, and a link the
// lab planted cannot turn a host-root write, chown or chmod elsewhere.
// Paths of a Pod are built by podDir.sub, which takes single names only.

// stateTree is the node's state directory, as the agent changes it.
type stateTree struct{ dir string }

// tree is the node's state directory.
func (c Config) tree() stateTree { return stateTree{dir: c.StateDir} }

// at runs f with a descriptor (O_PATH) of rel inside the state directory.
func (t stateTree) at(rel string, f func(fd int) error) error {
	root, err := openDir(t.dir)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	if rel == "" || rel == "." {
		return f(root)
	}
	fd, err := openIn(root, rel, noLinks)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return f(fd)
}

// root runs f with a descriptor (O_PATH) of the state directory itself.
func (t stateTree) root(f func(root int) error) error {
	root, err := openDir(t.dir)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	return f(root)
}

// mkdirAll makes the directory rel and its parents, the agent's own, with
// mode.
func (t stateTree) mkdirAll(rel string, mode uint32) error {
	return t.root(func(root int) error {
		fd, err := mkdirAllIn(root, rel, noLinks, mode, -1, -1)
		if err == nil {
			unix.Close(fd)
		}
		return err
	})
}

// ownedDir makes the directory rel (its parents the agent's own), or takes
// the one there, with mode and owned by uid:gid.
func (t stateTree) ownedDir(rel string, mode uint32, uid, gid int) error {
	return t.root(func(root int) error {
		parent, err := mkdirAllIn(root, path.Dir(rel), noLinks, 0o755, -1, -1)
		if err != nil {
			return err
		}
		defer unix.Close(parent)
		return ownDir(parent, path.Base(rel), mode, uid, gid)
	})
}

// writeFile makes the file rel hold data, in place (see writeFileIn).
func (t stateTree) writeFile(rel string, data []byte, mode uint32, uid, gid int) error {
	return t.root(func(root int) error { return writeFileIn(root, rel, noLinks, data, mode, uid, gid) })
}

// replaceFile makes the file rel hold data, replaced in one rename (see
// replaceFileIn).
func (t stateTree) replaceFile(rel string, data []byte, mode uint32) error {
	return t.root(func(root int) error { return replaceFileIn(root, rel, noLinks, data, mode) })
}

// readFile reads the file rel, of at most max bytes.
func (t stateTree) readFile(rel string, max int64) ([]byte, error) {
	var b []byte
	err := t.root(func(root int) error {
		var err error
		b, err = readFileIn(root, rel, noLinks, max)
		return err
	})
	return b, err
}

// open opens the regular file rel for reading.
func (t stateTree) open(rel string) (*os.File, error) {
	var f *os.File
	err := t.root(func(root int) error {
		var err error
		f, err = openReadIn(root, rel, noLinks)
		return err
	})
	return f, err
}

// removeAll removes rel and everything under it; a missing rel is not an
// error.
func (t stateTree) removeAll(rel string) error {
	err := t.at(path.Dir(rel), func(parent int) error { return removeAllIn(parent, path.Base(rel)) })
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// podDir is one Pod's directory, pods/UID, in the node's state directory.
// Its zero value is no directory: a Pod that failed validation has none,
// and every method refuses to name anything for it.
type podDir struct {
	tree stateTree
	rel  string
}

// newPodDir is the directory of the Pod with uid, which must be a
// canonical UUID (validUID).
func newPodDir(t stateTree, uid types.UID) (podDir, error) {
	if err := validUID(uid); err != nil {
		return podDir{}, fmt.Errorf("the Pod's UID %q: %w", uid, err)
	}
	return podDir{tree: t, rel: "pods/" + string(uid)}, nil
}

// valid tells whether d names a directory.
func (d podDir) valid() bool { return d.rel != "" }

// sub is names below the Pod's directory, relative to the state
// directory; each name must be a single file name.
func (d podDir) sub(names ...string) (string, error) {
	if !d.valid() {
		return "", errors.New("the Pod has no directory on the node")
	}
	for _, n := range names {
		if err := fileName(n); err != nil {
			return "", err
		}
	}
	return path.Join(append([]string{d.rel}, names...)...), nil
}

// path is sub as an absolute path, for what takes paths (runc, mounts,
// the Pod's own user namespace); "" when d or a name is not valid.
func (d podDir) path(names ...string) string {
	rel, err := d.sub(names...)
	if err != nil {
		return ""
	}
	return filepath.Join(d.tree.dir, rel)
}

// fileName checks that n is one file name: not empty, ".", or "..", no
// slash or NUL, at most NAME_MAX bytes.
func fileName(n string) error {
	switch {
	case n == "" || n == "." || n == "..":
		return fmt.Errorf("%q is not a file name", n)
	case strings.ContainsAny(n, "/\x00"):
		return fmt.Errorf("%q is not a single file name", n)
	case len(n) > unix.NAME_MAX:
		return fmt.Errorf("file name of %d bytes is longer than %d", len(n), unix.NAME_MAX)
	}
	return nil
}

// localPath checks that p is a path of files under a directory: relative,
// its elements file names (no "..", no empty element), not starting with
// ".." (the atomic writer's own names do).
func localPath(p string) error {
	if strings.HasPrefix(p, "..") {
		return fmt.Errorf("%q starts with '..'", p)
	}
	for _, el := range strings.Split(p, "/") {
		if err := fileName(el); err != nil {
			return fmt.Errorf("path %q: %w", p, err)
		}
	}
	return nil
}
