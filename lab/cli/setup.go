package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/hostsetup"
	"github.com/svclab/svclab/lab/images"
	"github.com/svclab/svclab/lab/kubebin"
)

func newSetupCommand(o *options) *cobra.Command {
	var check, skipImages, withKind bool
	c := &cobra.Command{
		Use:   "setup",
		Short: "Install the system packages svclab needs (as root on Debian) and build the images pods run from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := hostsetup.Ensure(cmd.Context(), hostsetup.System{}, o.out, check); err != nil {
				return err
			}
			if withKind {
				if err := hostsetup.EnsureOf(cmd.Context(), hostsetup.System{}, o.out, hostsetup.KindRequirements, check); err != nil {
					return err
				}
			}
			if check || skipImages {
				return nil
			}
			return buildImages(cmd.Context(), o)
		},
	}
	c.Flags().BoolVar(&check, "check", false, "only check; never install")
	c.Flags().BoolVar(&skipImages, "skip-images", false, "do not build the images pods run from")
	c.Flags().BoolVar(&withKind, "kind", false, "also install what the kind backend's own Docker engine needs (Debian's docker.io), for machines with no Docker daemon")
	return c
}

func newImagesCommand(o *options) *cobra.Command {
	c := &cobra.Command{
		Use:   "images",
		Short: "The local images pods and node shells run from (no registry needed)",
	}
	c.AddCommand(newImagesLoad(o), &cobra.Command{
		Use:   "build",
		Short: "Build the images that are missing (the Debian tools image takes a few minutes the first time)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return buildImages(cmd.Context(), o)
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
				fmt.Fprintln(o.out, name)
			}
			return nil
		},
	})
	return c
}

// buildImages builds the image store's missing layers, with progress.
func buildImages(ctx context.Context, o *options) error {
	progress := cluster.NewTextProgress(o.out)
	kube, err := kubebin.Locate(ctx, progress)
	if err != nil {
		return err
	}
	dir, err := images.DefaultDir()
	if err != nil {
		return err
	}
	store := images.NewStore(dir, images.Options{KubeBin: kube, Logger: o.env.Log})
	if err := store.Build(ctx, progress); err != nil {
		return err
	}
	fmt.Fprintf(o.out, "images: ready in %s\n", dir)
	return nil
}
