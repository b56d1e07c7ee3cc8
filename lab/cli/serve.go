package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/attempt"
	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/grade"
	"github.com/svclab/svclab/lab/kubebin"
	"github.com/svclab/svclab/lab/store"
	"github.com/svclab/svclab/lab/views"
	"github.com/svclab/svclab/server"
)

func newServeCommand(o *options) *cobra.Command {
	var addr string
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the lab's web UI",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := o.provider("")
			if err != nil {
				return err
			}
			log := o.logger()
			st, err := store.Open(cmd.Context(), store.Location(o.stateDir, o.databaseURL), store.Options{Log: log})
			if err != nil {
				return err
			}
			defer st.Close()
			m, err := attempt.New(attempt.Options{Store: st, Provider: p, Log: log, StateDir: o.stateDir})
			if err != nil {
				return err
			}
			l, err := server.Listen(addr)
			if err != nil {
				return err
			}
			fmt.Fprintf(o.out, "svclab is serving on http://%s/ (Ctrl-C stops it)\n", l.Addr())
			s := &server.Server{
				Clusters: p, Log: log, Background: cmd.Context(),
				Catalog: m.Catalog(), Attempts: server.AttemptManager{M: m}, Learner: store.LocalLearner,
				KubeBin: func(ctx context.Context) (string, error) { return kubebin.Locate(ctx, nil) },
				PodExec: func(c cluster.Cluster) (views.PodExecutor, error) { return grade.NewPodExecutor(c) },
			}
			err = server.Serve(cmd.Context(), l, s.Handler(), log)
			// A cluster being created when the server stops rolls back.
			s.Wait()
			return err
		},
	}
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "address to listen on")
	return c
}
