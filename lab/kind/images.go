package kind

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/images"
	"github.com/svclab/svclab/lab/kind/ociimage"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/scenarios"
)

// ImageSource makes the image archive that a cluster's nodes import.
type ImageSource interface {
	// Archive returns the path of an image archive holding the lab's
	// images, tagged as pods name them (plus the extra references), and
	// the reference of the bundled proxier's image in it.
	Archive(ctx context.Context, p cluster.Progress, extra []string) (path, proxierRef string, err error)
}

// LabImages is the real ImageSource: lab/images' store (built when layers
// are missing, as for the embedded backend) packed by package ociimage.
type LabImages struct {
	// Dir is lab/images' directory; images.DefaultDir() when empty.
	Dir string
	// SvclabBin is the svclab binary the agnhost, web and proxier images
	// run; os.Executable() when empty.
	SvclabBin string
	Options   images.Options
}

// ErrImagesNeedLinux is why kind labs cannot be made from a machine other
// than Linux yet.
var ErrImagesNeedLinux = errors.New("kind labs cannot be created from this machine yet: the images svclab loads into the nodes (its proxier, agnhost, the tools) and its node image are built from Debian packages and a Linux build of svclab, on Linux; run svclab on a Linux machine or VM (whose embedded backend needs no Docker at all)")

// Archive builds the store's missing layers and packs the archive.
func (l LabImages) Archive(ctx context.Context, p cluster.Progress, extra []string) (string, string, error) {
	if runtime.GOOS != "linux" {
		return "", "", ErrImagesNeedLinux
	}
	dir := l.Dir
	if dir == "" {
		var err error
		if dir, err = images.DefaultDir(); err != nil {
			return "", "", err
		}
	}
	opts := l.Options
	opts.SvclabBin = l.SvclabBin
	opts.KubeBin = "" // kind's node image brings CoreDNS
	store := images.NewStore(dir, opts)
	if err := store.Build(ctx, p); err != nil {
		return "", "", err
	}
	entries, proxier, err := archiveEntries(store, extra)
	if err != nil {
		return "", "", err
	}
	b := &ociimage.Builder{Dir: filepath.Join(filepath.Dir(dir), "oci"), Progress: p, Log: opts.Logger}
	path, err := b.Archive(ctx, entries)
	return path, proxier, err
}

// resolver is the part of images.Store archiveEntries uses.
type resolver interface {
	Available() []string
	Resolve(ref string) (images.Image, error)
}

// Images the kind node image brings itself: svclab does not replace them
// (the upstream kube-proxy shape runs kind's kube-proxy).
var nodeImageNames = []string{"registry.k8s.io/coredns/coredns", "coredns/coredns", "registry.k8s.io/kube-proxy"}

// NodeToolsImage is the tools image the nodes' tools containers run.
const NodeToolsImage = "svclab/tools:latest"

// ProxierRepository is the repository of the bundled proxier's image in
// kind clusters; its tag is a hash of the image's layers, so a new svclab
// binary rolls the DaemonSet.
const ProxierRepository = "svclab/proxier"

// archiveEntries lists the archive's images: every upstream name lab/images
// serves (but those the node image brings), tagged "latest" and with every
// tag the built-in scenarios use, plus the extra references, and the
// bundled proxier as svclab/proxier:HASH, and the tools image for the
// nodes' tools containers.
func archiveEntries(res resolver, extra []string) ([]ociimage.Entry, string, error) {
	tags := map[string][]string{}
	var order []string
	add := func(name, ref string) {
		if _, ok := tags[name]; !ok {
			order = append(order, name)
		}
		if !slices.Contains(tags[name], ref) {
			tags[name] = append(tags[name], ref)
		}
	}
	for _, name := range res.Available() {
		if slices.Contains(nodeImageNames, name) {
			continue
		}
		add(name, name+":latest")
	}
	cat, _ := scenarios.Load(scenario.Options{})
	for _, ref := range cat.Images() {
		r, err := images.ParseReference(ref)
		if err != nil || r.Tag == "" {
			continue
		}
		if _, ok := tags[r.Name]; ok {
			add(r.Name, ref)
		}
	}
	for _, ref := range extra {
		r, err := images.ParseReference(ref)
		if err != nil {
			return nil, "", err
		}
		if r.Tag == "" || r.Digest != "" {
			return nil, "", fmt.Errorf("image %q: give a tag and no digest, as in %s:1.0 (the archive tags images, it cannot make digests match)", ref, r.Name)
		}
		if slices.Contains(nodeImageNames, r.Name) {
			return nil, "", fmt.Errorf("image %q: kind's node image brings %s itself; svclab does not replace it", ref, r.Name)
		}
		if _, err := res.Resolve(ref); err != nil {
			return nil, "", err
		}
		add(r.Name, ref)
	}
	var entries []ociimage.Entry
	for _, name := range order {
		img, err := res.Resolve(tags[name][0])
		if err != nil {
			return nil, "", err
		}
		entries = append(entries, ociimage.Entry{Image: img, Tags: tags[name]})
	}
	proxier, err := res.Resolve(images.ImageProxier)
	if err != nil {
		return nil, "", err
	}
	h := sha256.New()
	for _, l := range proxier.Layers {
		fi, err := os.Stat(l)
		if err != nil {
			return nil, "", err
		}
		fmt.Fprintf(h, "%s %d\n", l, fi.ModTime().UnixNano())
	}
	proxierRef := ProxierRepository + ":" + hex.EncodeToString(h.Sum(nil))[:12]
	entries = append(entries, ociimage.Entry{Image: proxier, Tags: []string{proxierRef}})
	tools, err := res.Resolve(images.ImageTools)
	if err != nil {
		return nil, "", err
	}
	entries = append(entries, ociimage.Entry{Image: tools, Tags: []string{NodeToolsImage}})
	return entries, proxierRef, nil
}
