package cli

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/proxier/render"
	"github.com/svclab/svclab/lab/proxier/run"
)

func newProxierCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "proxier",
		Short: "The bundled Service proxier (a kube-proxy v1.37 replacement)",
	}
	// run is the proxier's own program (the kube-proxy role of the
	// binary), with upstream kube-proxy's command line.
	c.AddCommand(newProxierRenderCommand(), run.NewRunCommand())
	return c
}

// newProxierRenderCommand returns "proxier render": print the rules
// kube-proxy would program for the Services, EndpointSlices and Nodes in a
// file.
func newProxierRenderCommand() *cobra.Command {
	var opts render.Options
	var file string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "render --mode nftables|iptables --node NAME -f FILE",
		Short: "Print the rules kube-proxy v1.37 would program for a set of Services",
		Long: `Render reads Services, EndpointSlices and Nodes from a multi-document YAML
file (or "-" for stdin) and prints exactly what kube-proxy v1.37 would program
on the given node: "nft -f" input for nftables mode, "iptables-restore" input
(filter and nat tables) for iptables mode. Nothing is applied.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelDebug
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			return render.RenderFile(cmd.Context(), logger, opts, file, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	opts.AddFlags(fl)
	fl.StringVarP(&file, "file", "f", "", `manifest file ("-" for stdin)`)
	fl.BoolVarP(&verbose, "verbose", "v", false, "log skipped objects to stderr")
	return cmd
}
