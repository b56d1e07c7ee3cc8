package ociimage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/images"
)

// Builder makes images and image archives from lab/images images, caching
// packed layers and written archives in Dir.
type Builder struct {
	// Dir holds layers/ (packed layer blobs) and archives/.
	Dir string
	// Progress receives a step per layer packed; nil discards them.
	Progress cluster.Progress
	// Log receives what the builder removes; nil discards it.
	Log *slog.Logger
}

func (b *Builder) layersDir() string   { return filepath.Join(b.Dir, "layers") }
func (b *Builder) archivesDir() string { return filepath.Join(b.Dir, "archives") }
func (b *Builder) progress() cluster.Progress {
	return cluster.OrNop(b.Progress)
}
func (b *Builder) log() *slog.Logger {
	if b.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return b.Log
}

// LabelImage is the image label naming the lab image an image is made from
// (svclab/agnhost, ...).
const LabelImage = "dev.svclab.image"

// Image returns img as a container image: one layer per layer directory,
// lowest first, and img's entrypoint, command, environment, working
// directory and stop signal in its configuration.
func (b *Builder) Image(ctx context.Context, img images.Image) (v1.Image, error) {
	if len(img.Layers) == 0 {
		return nil, fmt.Errorf("image %s has no layers", img.Name)
	}
	var adds []mutate.Addendum
	for _, dir := range img.Layers {
		l, err := b.layer(ctx, dir)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", img.Name, err)
		}
		adds = append(adds, mutate.Addendum{Layer: l, History: v1.History{CreatedBy: "svclab: " + displayLayer(dir), Created: v1.Time{Time: epoch}}})
	}
	base, err := mutate.Append(empty.Image, adds...)
	if err != nil {
		return nil, err
	}
	cf, err := base.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = runtime.GOARCH, "linux"
	cf.Created = v1.Time{Time: epoch}
	cf.Config = v1.Config{
		Entrypoint: img.Entrypoint,
		Cmd:        img.Cmd,
		Env:        img.Env,
		WorkingDir: img.WorkingDir,
		StopSignal: img.StopSignal,
		Labels:     map[string]string{LabelImage: img.Name},
	}
	return mutate.ConfigFile(base, cf)
}

// epoch is every image's creation time, so that the same layers and
// configuration give the same image ID.
var epoch = time.Unix(0, 0).UTC()

// Entry is one image of an archive and the references it is tagged with
// (as a pod names them: "busybox:1.36",
// "registry.k8s.io/e2e-test-images/agnhost:2.53").
type Entry struct {
	Image images.Image
	Tags  []string
}

// Archive writes an image archive (docker save format, which
// "ctr images import" and "docker load" read) holding entries, and returns
// its path. Archives are cached by content: asking again for the same
// images and tags returns the same file without writing it again.
func (b *Builder) Archive(ctx context.Context, entries []Entry) (string, error) {
	refs := map[name.Reference]v1.Image{}
	var keyParts []string
	for _, e := range entries {
		if len(e.Tags) == 0 {
			return "", fmt.Errorf("image %s has no tags", e.Image.Name)
		}
		img, err := b.Image(ctx, e.Image)
		if err != nil {
			return "", err
		}
		digest, err := img.Digest()
		if err != nil {
			return "", err
		}
		for _, t := range e.Tags {
			tag, err := name.NewTag(t)
			if err == nil && strings.LastIndex(t, ":") < strings.LastIndex(t, "/")+1 {
				err = errors.New("it has no tag")
			}
			if err != nil {
				return "", fmt.Errorf("image reference %q: %w (write a name and a tag, as in nginx:1.27)", t, err)
			}
			if _, dup := refs[tag]; dup {
				return "", fmt.Errorf("image reference %q is given twice", t)
			}
			refs[tag] = img
			keyParts = append(keyParts, t+"="+digest.String())
		}
	}
	if len(refs) == 0 {
		return "", errors.New("no images to write")
	}
	sort.Strings(keyParts)
	h := sha256.Sum256([]byte(strings.Join(keyParts, "\n")))
	path := filepath.Join(b.archivesDir(), "images-"+hex.EncodeToString(h[:])[:20]+".tar")
	if _, err := os.Stat(path); err == nil {
		now := time.Now()
		os.Chtimes(path, now, now) // recently used: not pruned
		return path, nil
	}
	if err := os.MkdirAll(b.archivesDir(), 0o755); err != nil {
		return "", fmt.Errorf("the image archive cache %s is not writable: %w", b.Dir, err)
	}
	done := b.progress().Start(fmt.Sprintf("Writing the image archive (%d images, %d tags)", len(entries), len(refs)))
	err := writeArchive(path, refs)
	done(err)
	if err != nil {
		return "", err
	}
	b.prune(path)
	return path, nil
}

func writeArchive(path string, refs map[name.Reference]v1.Image) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".partial-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tarball.MultiRefWrite(refs, tmp); err != nil {
		return fmt.Errorf("writing the image archive: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// keepArchives is how long an archive that another one superseded is
// kept: a load from another process may still be reading it.
const keepArchives = time.Hour

// prune removes archives other than keep that were not used for an hour,
// and packed layers whose directories lab/images has removed.
func (b *Builder) prune(keep string) {
	if entries, err := os.ReadDir(b.archivesDir()); err == nil {
		for _, e := range entries {
			p := filepath.Join(b.archivesDir(), e.Name())
			if info, err := e.Info(); err == nil && p != keep && time.Since(info.ModTime()) > keepArchives {
				b.remove(p)
			}
		}
	}
	metas, _ := filepath.Glob(filepath.Join(b.layersDir(), "*.tar.gz.json"))
	for _, m := range metas {
		data, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		var lm layerMeta
		if json.Unmarshal(data, &lm) != nil || lm.Source == "" {
			continue
		}
		if _, err := os.Stat(lm.Source); errors.Is(err, os.ErrNotExist) {
			b.remove(strings.TrimSuffix(m, ".json"))
			b.remove(m)
		}
	}
}

func (b *Builder) remove(path string) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		b.log().Warn("removing a cached image file", "path", path, "err", err)
		return
	}
	b.log().Debug("removed a cached image file", "path", path)
}
