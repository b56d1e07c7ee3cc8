package cli

import (
	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/proxier/render"
	"github.com/svclab/svclab/lab/proxier/run"
)

func newProxierCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "proxier",
		Short: "The bundled Service proxier (a kube-proxy v1.37 replacement)",
	}
	c.AddCommand(render.NewRenderCommand(), run.NewRunCommand())
	return c
}
