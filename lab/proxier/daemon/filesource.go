package daemon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/svclab/svclab/lab/proxier/manifest"
)

// ObjectsFile feeds a Proxier from a YAML file of Services, EndpointSlices
// and Nodes (no apiserver): "svclab proxier run --objects FILE".
type ObjectsFile struct {
	Path     string
	NodeName string
	Proxier  *Proxier
	Logger   *slog.Logger
	// Interval is how often the file is checked for changes (default 1s).
	Interval time.Duration

	last [sha256.Size]byte
	// stat is the file as it was when it was last read: while it looks
	// the same, checking for changes does not read it again.
	stat os.FileInfo
}

// Load reads the file and replaces the proxier's objects with its
// content. A file that cannot be read or decoded changes nothing.
func (f *ObjectsFile) Load(ctx context.Context) error {
	st, _ := os.Stat(f.Path)
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return fmt.Errorf("read objects: %w", err)
	}
	f.stat = st
	objs, err := manifest.Decode(bytes.NewReader(data), f.Path)
	if err != nil {
		return err
	}
	f.last = sha256.Sum256(data)
	data = nil
	// Decoding a large file leaves far more garbage than objects; collect
	// it now rather than during the sync this load starts, where the
	// collector would compete with nft or iptables-restore for the CPUs,
	// and give the memory back to the system instead of keeping it as
	// headroom for the next reload.
	debug.FreeOSMemory()
	node := objs.Node(f.NodeName)
	if node == nil {
		f.logger().WarnContext(ctx, "no Node object for this node in the objects file: /healthz will report the node ineligible", "node", f.NodeName, "file", f.Path)
	}
	f.Proxier.ReplaceAll(objs.Services, objs.EndpointSlices, node)
	f.logger().InfoContext(ctx, "loaded objects", "file", f.Path, "services", len(objs.Services), "endpointSlices", len(objs.EndpointSlices), "nodes", len(objs.Nodes))
	return nil
}

func (f *ObjectsFile) logger() *slog.Logger {
	if f.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return f.Logger
}

// changed reports whether the file's content differs from the last load.
// A file with the same size, modification time and inode as then is not
// read again (a large file would cost a read and a hash every interval).
func (f *ObjectsFile) changed() bool {
	st, err := os.Stat(f.Path)
	if err != nil {
		return false
	}
	if f.stat != nil && os.SameFile(st, f.stat) && st.Size() == f.stat.Size() && st.ModTime().Equal(f.stat.ModTime()) {
		return false
	}
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return false
	}
	if sha256.Sum256(data) == f.last {
		f.stat = st
		return false
	}
	return true
}

// Watch reloads the file when it changes or when reload receives (SIGHUP),
// until ctx is done. Reload errors are logged and counted; the previous
// objects stay.
func (f *ObjectsFile) Watch(ctx context.Context, reload <-chan os.Signal) {
	interval := f.Interval
	if interval <= 0 {
		interval = time.Second
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload:
			f.logger().InfoContext(ctx, "reloading objects (SIGHUP)", "file", f.Path)
		case <-tick.C:
			if !f.changed() {
				continue
			}
			f.logger().InfoContext(ctx, "objects file changed; reloading", "file", f.Path)
		}
		result := "ok"
		if err := f.Load(ctx); err != nil {
			result = "error"
			f.logger().ErrorContext(ctx, "failed to reload objects; keeping the previous ones", "file", f.Path, "err", err)
			// Do not retry the same broken content every tick.
			st, _ := os.Stat(f.Path)
			if data, rerr := os.ReadFile(f.Path); rerr == nil {
				f.last, f.stat = sha256.Sum256(data), st
			}
		}
		f.Proxier.Metrics().ObjectsFileReloads.WithLabelValues(result).Inc()
	}
}
