package cli

import (
	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/hostsetup"
)

func newSetupCommand(o *options) *cobra.Command {
	var check bool
	c := &cobra.Command{
		Use:   "setup",
		Short: "Install the system packages svclab needs (as root on Debian), or say what to install",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return hostsetup.Ensure(cmd.Context(), hostsetup.System{}, o.out, check)
		},
	}
	c.Flags().BoolVar(&check, "check", false, "only check; never install")
	return c
}
