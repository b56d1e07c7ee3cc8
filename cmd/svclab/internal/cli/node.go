package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/cluster"
)

func newNodeCommand(e *env) *cobra.Command {
	var name string
	c := &cobra.Command{
		Use:   "node",
		Short: "Run commands on a cluster's nodes (in the node's network namespace and filesystem)",
	}
	c.PersistentFlags().StringVar(&name, "name", "lab", "cluster name")
	run := func(cmd *cobra.Command, node string, argv []string) error {
		cl, err := e.findCluster(cmd.Context(), name)
		if err != nil {
			return err
		}
		err = cl.NodeExec(cmd.Context(), node, argv, cluster.Stdio{Stdin: os.Stdin, Stdout: e.out, Stderr: e.errOut})
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return &ExitError{Code: ee.ExitCode()}
		}
		return err
	}
	c.AddCommand(&cobra.Command{
		Use:     "exec NODE -- COMMAND [ARGS...]",
		Short:   "Run a command on a node, e.g. svclab node exec lab-worker -- nft list table ip kube-proxy",
		Args:    cobra.MinimumNArgs(2),
		Example: "  svclab node exec lab-worker -- conntrack -L -p udp",
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, args[0], args[1:])
		},
	}, &cobra.Command{
		Use:   "shell NODE",
		Short: "Open a root shell on a node",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if fi, err := os.Stdin.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
				return fmt.Errorf("node shell needs a terminal; use 'svclab node exec %s -- COMMAND' otherwise", args[0])
			}
			return run(cmd, args[0], []string{"bash", "-l"})
		},
	})
	return c
}
