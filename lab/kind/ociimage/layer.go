package ociimage

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
	"golang.org/x/sys/unix"
)

// layerFormat changes when the way directories are packed changes, so that
// every cached layer is packed again.
const layerFormat = 1

// layerMeta is stored next to each cached layer blob.
type layerMeta struct {
	Format int       `json:"format"`
	Source string    `json:"source"`
	Digest string    `json:"digest"`
	DiffID string    `json:"diffID"`
	Size   int64     `json:"size"`
	Packed time.Time `json:"packed"`
}

// cachedLayer is a layer packed into a gzip-compressed tar file.
type cachedLayer struct {
	path           string
	digest, diffID v1.Hash
	size           int64
}

var _ v1.Layer = (*cachedLayer)(nil)

func (l *cachedLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *cachedLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *cachedLayer) Size() (int64, error)                { return l.size, nil }
func (l *cachedLayer) MediaType() (types.MediaType, error) { return types.DockerLayer, nil }
func (l *cachedLayer) Compressed() (io.ReadCloser, error)  { return os.Open(l.path) }

func (l *cachedLayer) Uncompressed() (io.ReadCloser, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, err
	}
	z, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("layer %s: %w", l.path, err)
	}
	return readCloser{z, func() error { z.Close(); return f.Close() }}, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

// layerKey names the cached blob of a layer directory.
func layerKey(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("layer directory: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("layer %s is not a directory", abs)
	}
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	h := sha256.Sum256(fmt.Appendf(nil, "format=%d dir=%s ino=%d mtime=%d", layerFormat, abs, ino, fi.ModTime().UnixNano()))
	return hex.EncodeToString(h[:])[:20], nil
}

// layer returns the layer made of dir, packing it unless it is cached.
func (b *Builder) layer(ctx context.Context, dir string) (*cachedLayer, error) {
	key, err := layerKey(dir)
	if err != nil {
		return nil, err
	}
	blob := filepath.Join(b.layersDir(), key+".tar.gz")
	if l, err := readLayerMeta(blob); err == nil {
		return l, nil
	}
	if err := os.MkdirAll(b.layersDir(), 0o755); err != nil {
		return nil, fmt.Errorf("the image archive cache %s is not writable: %w", b.Dir, err)
	}
	done := b.progress().Start("Packing layer " + displayLayer(dir))
	l, err := packLayer(ctx, dir, blob)
	done(err)
	return l, err
}

// displayLayer names a layer directory for progress lines: lab/images
// keeps them in NAME-KEY/rootfs.
func displayLayer(dir string) string {
	if filepath.Base(dir) == "rootfs" {
		return filepath.Base(filepath.Dir(dir))
	}
	return dir
}

func readLayerMeta(blob string) (*cachedLayer, error) {
	data, err := os.ReadFile(blob + ".json")
	if err != nil {
		return nil, err
	}
	var m layerMeta
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	if m.Format != layerFormat {
		return nil, errors.New("old format")
	}
	fi, err := os.Stat(blob)
	if err != nil || fi.Size() != m.Size {
		return nil, fmt.Errorf("blob missing or truncated")
	}
	digest, err := v1.NewHash(m.Digest)
	if err != nil {
		return nil, err
	}
	diffID, err := v1.NewHash(m.DiffID)
	if err != nil {
		return nil, err
	}
	return &cachedLayer{path: blob, digest: digest, diffID: diffID, size: m.Size}, nil
}

// packLayer writes dir as a gzip-compressed tar to blob, with the metadata
// next to it; both appear complete or not at all.
func packLayer(ctx context.Context, dir, blob string) (_ *cachedLayer, err error) {
	tmp, err := os.CreateTemp(filepath.Dir(blob), filepath.Base(blob)+".partial-*")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	compressed := sha256.New()
	uncompressed := sha256.New()
	counter := &countingWriter{w: io.MultiWriter(tmp, compressed)}
	z, err := gzip.NewWriterLevel(counter, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if err := writeTar(ctx, io.MultiWriter(z, uncompressed), dir); err != nil {
		return nil, fmt.Errorf("packing %s: %w", dir, err)
	}
	if err := z.Close(); err != nil {
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	l := &cachedLayer{path: blob, digest: sum(compressed), diffID: sum(uncompressed), size: counter.n}
	abs, _ := filepath.Abs(dir)
	meta, _ := json.MarshalIndent(layerMeta{Format: layerFormat, Source: abs, Digest: l.digest.String(), DiffID: l.diffID.String(), Size: l.size, Packed: time.Now().UTC()}, "", "  ")
	if err := os.Rename(tmp.Name(), blob); err != nil {
		return nil, err
	}
	if err := writeFileAtomic(blob+".json", meta); err != nil {
		os.Remove(blob)
		return nil, err
	}
	return l, nil
}

func sum(h hash.Hash) v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".partial"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// writeTar writes the tree under root as a layer tar: paths relative to
// root in lexical order, owners as numbers, hard links as links, file
// capabilities kept (ping's cap_net_raw), access and change times left out
// so that the same tree gives the same bytes.
func writeTar(ctx context.Context, w io.Writer, root string) error {
	tw := tar.NewWriter(w)
	links := map[[2]uint64]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSocket != 0 {
			return nil // a socket cannot be in a tar, and means nothing in an image
		}
		var target string
		if fi.Mode()&fs.ModeSymlink != 0 {
			if target, err = os.Readlink(path); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, target)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		hdr.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		hdr.AccessTime, hdr.ChangeTime = time.Time{}, time.Time{}
		hdr.ModTime = fi.ModTime().Truncate(time.Second)
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
			if fi.Mode().IsRegular() && st.Nlink > 1 {
				id := [2]uint64{uint64(st.Dev), st.Ino}
				if first, ok := links[id]; ok {
					hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
				} else {
					links[id] = hdr.Name
				}
			}
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if capability, err := getxattr(path, "security.capability"); err == nil && len(capability) > 0 {
				hdr.PAXRecords = map[string]string{"SCHILY.xattr.security.capability": string(capability)}
				hdr.Format = tar.FormatPAX
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.CopyN(tw, f, hdr.Size); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func getxattr(path, attr string) ([]byte, error) {
	buf := make([]byte, 256)
	n, err := unix.Lgetxattr(path, attr, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}
