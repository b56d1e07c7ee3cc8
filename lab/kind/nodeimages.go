package kind

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/images"
	"github.com/svclab/svclab/lab/kind/dockerd"
	"github.com/svclab/svclab/lab/kind/nodeimage"
	"github.com/svclab/svclab/lab/kubebin"
)

// NodeImageSource makes svclab's node image available in the engine.
type NodeImageSource interface {
	EnsureNodeImage(ctx context.Context, p cluster.Progress, image string) error
}

// LabNodeImage is the real NodeImageSource: package nodeimage, with the
// lab's image store and svclab-kube.
type LabNodeImage struct {
	// KubeBin is svclab-kube; kubebin.Locate's when empty.
	KubeBin string
	// SvclabBin is the svclab binary the lab's images carry;
	// os.Executable() when empty.
	SvclabBin string
	Log       *slog.Logger
}

// EnsureNodeImage builds (cached) and loads the node image.
func (l LabNodeImage) EnsureNodeImage(ctx context.Context, p cluster.Progress, image string) error {
	res, err := l.Build(ctx, p, image)
	if err == nil && (res.Built || res.Loaded) {
		cluster.OrNop(p).Infof("node image %s ready in %s", image, res.Duration.Round(time.Second))
	}
	return err
}

// Build makes image available in the engine DOCKER_HOST names (building
// it when the cache has no archive of its inputs) and says what it did.
func (l LabNodeImage) Build(ctx context.Context, p cluster.Progress, image string) (nodeimage.Result, error) {
	if runtime.GOOS != "linux" {
		return nodeimage.Result{}, ErrImagesNeedLinux
	}
	kube := l.KubeBin
	if kube == "" {
		var err error
		if kube, err = kubebin.Locate(ctx, p); err != nil {
			return nodeimage.Result{}, err
		}
	}
	dir, err := images.DefaultDir()
	if err != nil {
		return nodeimage.Result{}, err
	}
	log := l.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cache := filepath.Join(filepath.Dir(dir), "kind-node")
	b := &nodeimage.Builder{
		Image:    image,
		Store:    images.NewStore(dir, images.Options{KubeBin: kube, SvclabBin: l.SvclabBin, Logger: log}),
		Layers:   images.NewStore(filepath.Join(cache, "store"), images.Options{Logger: log}),
		Kube:     nodeimage.KubeBin{Path: kube},
		CacheDir: cache,
		Docker:   nodeimage.CLI{Host: os.Getenv(dockerd.EnvHost)},
		Progress: p,
		Log:      log,
	}
	res, err := b.Ensure(ctx)
	if err != nil {
		return res, fmt.Errorf("the node image %s: %w", image, err)
	}
	return res, nil
}
