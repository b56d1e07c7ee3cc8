//go:build linux

package embedded

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/embedded/hostexec"
)

// A lab's disk is one filesystem of its own, of the lab's DiskBytes: a
// sparse file in its state directory (disk.img) holding an ext4
// filesystem, mounted (loop, nosuid, nodev) on nodes/, where everything
// the lab's nodes write lives — the nodes' own filesystems, their Pods'
// writable layers, emptyDirs and container logs. A lab that fills it gets
// "no space left on device" in its own files; the host's disk and the
// other labs' are untouched. The file takes on the host only what the lab
// has written (discard gives deleted blocks back), and 2% of the
// filesystem is kept for root on the host (the node agent's own state:
// the lab's ids cannot use it), so that the agent can still run the lab's
// Pods down when the lab has filled the rest.

// disk is the lab's disk image.
func (p paths) disk() string { return filepath.Join(p.dir, "disk.img") }

// nodes is where the lab's disk is mounted.
func (p paths) nodes() string { return filepath.Join(p.dir, "nodes") }

// mountDisk makes the lab's disk of size bytes and mounts it on
// paths.nodes.
func mountDisk(ctx context.Context, r hostexec.Runner, pa paths, size int64) error {
	if err := os.MkdirAll(pa.nodes(), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(pa.disk(), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("making the lab's disk: %w", err)
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		return fmt.Errorf("making the lab's disk of %d MiB: %w", size>>20, err)
	}
	// No journal: a lab's files do not outlive a crash of the machine
	// anyway, and the lab writes less.
	if _, err := r.Run(ctx, nil, "mkfs.ext4", "-q", "-F", "-m", "2", "-O", "^has_journal", "-E", "lazy_itable_init=1,nodiscard", "-L", "svclab-lab", pa.disk()); err != nil {
		return fmt.Errorf("making the lab's disk: %w", err)
	}
	if _, err := r.Run(ctx, nil, "mount", "-t", "ext4", "-o", "loop,nosuid,nodev,discard", pa.disk(), pa.nodes()); err != nil {
		return fmt.Errorf("mounting the lab's disk: %w", err)
	}
	return os.Chmod(pa.nodes(), 0o755)
}

// DiskUsage is what the lab's disk holds.
type DiskUsage struct {
	UsedBytes, SizeBytes int64
}

// Full tells whether the lab's own part of the disk (all but root's
// reserve) is used up, or nearly.
func (u DiskUsage) Full() bool {
	return u.SizeBytes > 0 && u.UsedBytes >= u.SizeBytes*97/100
}

// readDisk reports the lab's disk in dir; zero when it is not mounted.
func readDisk(pa paths) DiskUsage {
	var st unix.Statfs_t
	if err := unix.Statfs(pa.nodes(), &st); err != nil || st.Type != unix.EXT4_SUPER_MAGIC {
		return DiskUsage{}
	}
	bs := int64(st.Bsize)
	// What the lab may use: the blocks not reserved for root.
	size := (int64(st.Blocks) - (int64(st.Bfree) - int64(st.Bavail))) * bs
	return DiskUsage{UsedBytes: size - int64(st.Bavail)*bs, SizeBytes: size}
}

// String is the size in MiB or GiB, as the README writes limits.
func size(b int64) string {
	if b >= 1<<30 && b%(1<<30) == 0 {
		return strconv.FormatInt(b>>30, 10) + " GiB"
	}
	return strconv.FormatInt(b>>20, 10) + " MiB"
}
