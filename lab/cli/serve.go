package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/server"
)

func newServeCommand(o *options) *cobra.Command {
	var addr, backend string
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the lab's web UI",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := o.provider(backend)
			if err != nil {
				return err
			}
			l, err := server.Listen(addr)
			if err != nil {
				return err
			}
			log := o.logger()
			fmt.Fprintf(o.out, "svclab is serving on http://%s/ (Ctrl-C stops it)\n", l.Addr())
			s := &server.Server{Clusters: p, Log: log, Background: cmd.Context()}
			err = server.Serve(cmd.Context(), l, s.Handler(), log)
			// A cluster being created when the server stops rolls back.
			s.Wait()
			return err
		},
	}
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "address to listen on")
	c.Flags().StringVar(&backend, "backend", "embedded", "the backend of the clusters the UI lists and creates: embedded or kind")
	return c
}
