package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded"
	"github.com/svclab/svclab/lab/images"
	"github.com/svclab/svclab/lab/kind"
	"github.com/svclab/svclab/lab/kubebin"
)

func newImagesCommand(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "images",
		Short: "The local images pods and node shells run from (no registry needed)",
	}
	c.AddCommand(newImagesLoad(e), &cobra.Command{
		Use:   "build",
		Short: "Build the images that are missing (the Debian tools image takes a few minutes the first time)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return buildImages(cmd.Context(), e)
		},
	}, &cobra.Command{
		Use:   "list",
		Short: "List the image names pods can use",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			dir, err := images.DefaultDir()
			if err != nil {
				return err
			}
			for _, name := range images.NewStore(dir, images.Options{}).Available() {
				fmt.Fprintln(e.out, name)
			}
			return nil
		},
	})
	return c
}

func newImagesLoad(e *env) *cobra.Command {
	var (
		name  string
		extra []string
	)
	c := &cobra.Command{
		Use:   "load",
		Short: "Load the lab's images into the nodes of a kind cluster (embedded clusters use them directly)",
		Long: `Pack the lab's images (the tools image as busybox, ubuntu, curl..., agnhost,
nginx/httpd, the bundled proxier) into an image archive and import it into
every node of kind cluster --cluster, with kind's loader: no registry, no
docker build. Images are tagged "latest" and with the tags the built-in
scenarios use; --image adds more (nginx:1.25). When the bundled proxier's
image changed, the kube-proxy DaemonSet moves to the new one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := e.providerOf(kind.BackendName)
			if err != nil {
				return err
			}
			kp := p.(*kind.Provider)
			if _, err := kp.Get(cmd.Context(), name); errors.Is(err, cluster.ErrNotFound) {
				if ep, perr := e.providerOf(embedded.BackendName); perr == nil {
					if _, eerr := ep.Get(cmd.Context(), name); eerr == nil {
						fmt.Fprintf(e.out, "Cluster %q is an embedded cluster: its pods use the lab's images directly, there is nothing to load.\n", name)
						return nil
					}
				}
			}
			if err := kp.LoadImages(cmd.Context(), name, extra, cluster.NewTextProgress(e.out)); err != nil {
				return err
			}
			fmt.Fprintf(e.out, "Images loaded into the nodes of cluster %q.\n", name)
			return nil
		},
	}
	c.Flags().StringVar(&name, "cluster", "lab", "the kind cluster")
	c.Flags().StringArrayVar(&extra, "image", nil, "another reference to tag (repeatable), e.g. nginx:1.25")
	return c
}

// buildImages builds the image store's missing layers, with progress.
func buildImages(ctx context.Context, e *env) error {
	progress := cluster.NewTextProgress(e.out)
	kube, err := kubebin.Locate(ctx, progress)
	if err != nil {
		return err
	}
	dir, err := images.DefaultDir()
	if err != nil {
		return err
	}
	store := images.NewStore(dir, images.Options{KubeBin: kube, Logger: e.log})
	if err := store.Build(ctx, progress); err != nil {
		return err
	}
	fmt.Fprintf(e.out, "images: ready in %s\n", dir)
	return nil
}
