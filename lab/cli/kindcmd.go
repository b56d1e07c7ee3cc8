package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/kind/dockerd"
)

// newKindCommand is "svclab kind": what the kind backend needs besides
// clusters — its Docker engine and its offline node image.
func newKindCommand(o *options) *cobra.Command {
	c := &cobra.Command{
		Use:   "kind",
		Short: "The kind backend's Docker engine and offline node image",
	}
	c.AddCommand(newKindEngineCommand(o))
	return c
}

func newKindEngineCommand(o *options) *cobra.Command {
	c := &cobra.Command{
		Use:   "engine",
		Short: "svclab's own Docker engine, which the kind backend starts when no Docker daemon answers",
	}
	var force bool
	stop := &cobra.Command{
		Use:   "stop",
		Short: "Stop svclab's own Docker engine when no svclab process uses it and it has no container (--force: regardless)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stopped, err := dockerd.Stop(cmd.Context(), dockerd.Options{Progress: cluster.NewTextProgress(o.out), Log: o.logger()}, force)
			if err != nil {
				return err
			}
			if !stopped {
				st, _ := dockerd.OwnStatus(cmd.Context(), dockerd.Options{})
				if st.Running {
					fmt.Fprintln(o.out, "svclab's Docker engine is in use (a svclab process, or containers: see 'svclab cluster list --backend kind'); it keeps running")
					return nil
				}
				fmt.Fprintln(o.out, "svclab's Docker engine is not running")
			}
			return nil
		},
	}
	stop.Flags().BoolVar(&force, "force", false, "stop it even when it has containers or another svclab process uses it")
	start := &cobra.Command{
		Use:   "start",
		Short: "Start svclab's own Docker engine unless a Docker daemon answers already, and print its address",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := dockerd.Ensure(cmd.Context(), o.engineOptions())
			if err != nil {
				return err
			}
			fmt.Fprintf(o.out, "DOCKER_HOST=%s (Docker %s)\n", d.Host, d.Version)
			return nil
		},
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "Say whether svclab's own Docker engine runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := dockerd.OwnStatus(cmd.Context(), dockerd.Options{})
			if err != nil {
				return err
			}
			if !st.Running {
				fmt.Fprintln(o.out, "svclab's Docker engine is not running")
				return nil
			}
			fmt.Fprintf(o.out, "svclab's Docker engine runs (pid %d, Docker %s): DOCKER_HOST=%s\n", st.Pid, st.Version, st.Host)
			return nil
		},
	}
	c.AddCommand(start, status, stop)
	return c
}
