package cli

import (
	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/hostsetup"
)

func newSetupCommand(e *env) *cobra.Command {
	var check, skipImages, withKind bool
	c := &cobra.Command{
		Use:   "setup",
		Short: "Install the system packages svclab needs (as root on Debian) and build the images pods run from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
