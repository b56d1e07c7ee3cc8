//go:build linux

package nodeagent

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/svclab/svclab/lab/embedded/userns"
	"github.com/svclab/svclab/lab/flock"
	"github.com/svclab/svclab/lab/mounts"
)

// Isolation is what every container and node command of a lab shares: the
// lab's user namespace, the host ids it maps from 0, and the directory
// where the runtime mounts the containers' root filesystems and the
// idmapped image layers under them. runc's init resolves a root filesystem's
// path from inside the user namespace, so RunDir and its parents must be
// searchable by the lab's ids; the state directory need not be.
type Isolation struct {
	// Userns is the pin of the lab's user namespace.
	Userns string `json:"userns"`
	// IDs are the host ids it maps.
	IDs userns.Range `json:"ids"`
	// RunDir holds layers/ and roots/NODE/CONTAINER.
	RunDir string `json:"runDir"`
}

// Validate checks that iso names a user namespace and ids.
func (iso Isolation) Validate() error {
	if iso.Userns == "" || !iso.IDs.Valid() || iso.RunDir == "" {
		return errors.New("the lab's user namespace, ids or runtime directory is not set")
	}
	return nil
}

// RootUID is the host id of root in the lab.
func (iso Isolation) RootUID() int { return int(iso.IDs.Base) }

// Rootfs is where container id of node has its root filesystem mounted.
func (iso Isolation) Rootfs(node, id string) string {
	return filepath.Join(iso.RunDir, "roots", node, id)
}

// NodeRoots is where node's containers have their root filesystems.
func (iso Isolation) NodeRoots(node string) string { return filepath.Join(iso.RunDir, "roots", node) }

// staging is where a mount of container id that runc makes itself (under
// /dev, /proc or /sys, which runc mounts over) waits, mounted from the
// file svclab resolved, so that runc never resolves a path a container
// could change.
func (iso Isolation) staging(node, id string) string {
	return filepath.Join(iso.RunDir, "staging", node, id)
}

// layerMounts serialises the idmapped mounts of image layers within this
// process; an flock does so between processes (the create command and the
// node agents mount layers of the same lab).
var layerMounts sync.Mutex

// Layer returns the idmapped mount of image layer dir in the lab, making
// it on first use: the layer's files, owned by host root, appear owned by
// root in the lab, while every lab shares the layer's one copy on disk.
func (iso Isolation) Layer(dir string) (string, error) {
	// One mount per layer and user namespace (a Pod's own maps other ids),
	// in the user namespace's own directory of layers.
	sum := sha256.Sum256([]byte(filepath.Clean(dir)))
	target := filepath.Join(iso.layersDir(), hex.EncodeToString(sum[:12]))
	layerMounts.Lock()
	defer layerMounts.Unlock()
	if userns.IsMountPoint(target) {
		return target, nil
	}
	if err := os.MkdirAll(iso.layersDir(), 0o711); err != nil {
		return "", err
	}
	unlock, err := flock.Lock(filepath.Join(iso.RunDir, "layers.lock"), 0o600)
	if err != nil {
		return "", err
	}
	defer unlock()
	if userns.IsMountPoint(target) {
		return target, nil
	}
	if err := userns.IDMapMount(iso.Userns, dir, target); err != nil {
		return "", fmt.Errorf("mapping an image layer into the lab: %w", err)
	}
	return target, nil
}

// layersDir holds the image layers mapped into iso's user namespace: the
// lab's own, or a Pod's (hostUsers: false), whose go when the Pod does
// (dropLayers).
func (iso Isolation) layersDir() string {
	sum := sha256.Sum256([]byte(iso.Userns))
	return filepath.Join(iso.RunDir, "layers", hex.EncodeToString(sum[:8]))
}

// dropLayers detaches and removes the layers mapped into iso's user
// namespace, once no container of it runs.
func (iso Isolation) dropLayers() error {
	layerMounts.Lock()
	defer layerMounts.Unlock()
	dir := iso.layersDir()
	if err := mounts.DetachMatching(mounts.Beneath(dir)); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// PrepareRunDir makes dir, a lab's runtime directory below base,
// searchable by the lab's ids: base and everything from it down to dir
// get the search bit for others; base's parents must have it already.
func PrepareRunDir(base, dir string) error {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return err
	}
	rel, err := filepath.Rel(base, dir)
	if err != nil || rel == ".." || filepath.IsAbs(rel) || len(rel) > 1 && rel[:2] == ".." {
		return fmt.Errorf("%s is not below %s", dir, base)
	}
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		mine := len(d) >= len(base)
		if fi.Mode().Perm()&0o001 == 0 {
			if !mine {
				return fmt.Errorf("%s is not searchable by other users (mode %v): the lab's containers run as unprivileged ids and must reach %s (chmod o+x %s)", d, fi.Mode().Perm(), dir, d)
			}
			if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
				return fmt.Errorf("making %s searchable by the lab's ids: %w", d, err)
			}
		}
		if d == "/" || d == "." {
			return nil
		}
	}
}
