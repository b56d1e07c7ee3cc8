package ociimage

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/svclab/svclab/lab/images"
)

// benchTree makes a root filesystem like a small Debian: many small files
// and a few large ones (32 MB in all, half of it incompressible).
func benchTree(b *testing.B) string {
	b.Helper()
	root := filepath.Join(b.TempDir(), "rootfs")
	small := make([]byte, 4<<10)
	for i := range small {
		small[i] = byte(i % 61)
	}
	for d := 0; d < 40; d++ {
		dir := filepath.Join(root, "usr", "share", fmt.Sprintf("pkg%d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := 0; f < 100; f++ {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", f)), small, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	big := make([]byte, 4<<20)
	for i := 0; i < 4; i++ {
		rand.Read(big)
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("bin%d", i)), big, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	return root
}

// BenchmarkPackLayer packs a layer directory (tar + gzip + digests), what
// the first archive after a new svclab binary or tools image pays.
func BenchmarkPackLayer(b *testing.B) {
	root := benchTree(b)
	b.SetBytes(diskUsage(root))
	for b.Loop() {
		dir := b.TempDir()
		if _, err := packLayer(context.Background(), root, filepath.Join(dir, "l.tar.gz")); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkArchiveCached asks again for an archive that is cached: what
// every create after the first pays.
func BenchmarkArchiveCached(b *testing.B) {
	root := benchTree(b)
	bl := &Builder{Dir: b.TempDir()}
	entries := []Entry{{Image: images.Image{Name: "svclab/tools", Layers: []string{root}, Cmd: []string{"sh"}}, Tags: []string{"busybox:1.36", "busybox:latest"}}}
	if _, err := bl.Archive(context.Background(), entries); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := bl.Archive(context.Background(), entries); err != nil {
			b.Fatal(err)
		}
	}
}

func diskUsage(root string) int64 {
	var n int64
	filepath.Walk(root, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
