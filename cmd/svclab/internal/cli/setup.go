package cli

import (
	"context"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/hostsetup"
	"github.com/svclab/svclab/lab/kind"
	"github.com/svclab/svclab/lab/kind/dockerd"
)

func newSetupCommand(e *env) *cobra.Command {
	var check, skipImages, withKind bool
	c := &cobra.Command{
		Use:   "setup",
		Short: "Install the system packages svclab needs (as root on Debian) and build the images pods run from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runtime.GOOS != "linux" {
				return setupElsewhere(cmd.Context(), e)
			}
			if err := hostsetup.Ensure(cmd.Context(), hostsetup.System{}, e.out, check); err != nil {
				return err
			}
			if withKind {
				if err := hostsetup.EnsureOf(cmd.Context(), hostsetup.System{}, e.out, hostsetup.KindRequirements, check); err != nil {
					return err
				}
			}
			if check || skipImages {
				return nil
			}
			return buildImages(cmd.Context(), e)
		},
	}
	c.Flags().BoolVar(&check, "check", false, "only check; never install")
	c.Flags().BoolVar(&skipImages, "skip-images", false, "do not build the images pods run from")
	c.Flags().BoolVar(&withKind, "kind", false, "also install what the kind backend's own Docker engine needs (Debian's docker.io), for machines with no Docker daemon")
	return c
}

// setupElsewhere is setup on a machine other than Linux (macOS): no Debian
// packages to install; the kind backend needs a Docker engine, so setup
// says which one answers or what to install.
func setupElsewhere(ctx context.Context, e *env) error {
	o := e.engineOptions()
	o.NoOwn = true // svclab's own engine runs on Linux only
	d, err := dockerd.Ensure(ctx, o)
	if err != nil {
		return fmt.Errorf("setup: the kind backend needs a Docker engine and none answers: install and start Docker Desktop, colima (colima start) or OrbStack, or set %s: %w", dockerd.EnvHost, err)
	}
	defer d.Release(ctx)
	name := d.Engine
	if name == "" {
		name = dockerd.EnvHost + "'s engine"
	}
	fmt.Fprintf(e.out, "setup: %s answers at %s (Docker %s)\n", name, d.Host, d.Version)
	return kind.ErrImagesNeedLinux
}
