package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/session"
)

// Execute runs svclab's command line (os.Args) writing to out and errOut.
// A scenario that was not passed (its grade printed already) is exit
// status 1 and nothing more.
func Execute(ctx context.Context, out, errOut io.Writer) error {
	err := newRoot(out, errOut).ExecuteContext(ctx)
	if errors.Is(err, session.ErrNotPassed) {
		return &ExitError{Code: 1}
	}
	return err
}

// newRoot returns the svclab command tree writing to out and errOut.
func newRoot(out, errOut io.Writer) *cobra.Command {
	e := &env{out: out, errOut: errOut}
	root := &cobra.Command{
		Use:           "svclab",
		Short:         "A lab for Kubernetes Service networking: real clusters, real kernel rules, graded fixes",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return e.read(cmd)
		},
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())
	})
	root.SetOut(out)
	root.SetErr(errOut)
	addSharedFlags(root.PersistentFlags())
	root.AddCommand(newClusterCommand(e), newConformanceCommand(e), newKubeCommand(e), newKubectlCommand(e), newProxierCommand(), newNodeCommand(e), newImagesCommand(e), newKindCommand(e), newSetupCommand(e), newServeCommand(e), newVersionCommand(e),
		newScenarioCommand(e), newExerciseCommand(e), newClassCommand(e))
	return root
}

func newVersionCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print svclab's version and the Kubernetes version it runs",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintf(e.out, "svclab (Kubernetes %s)\n", cluster.KubernetesVersion)
			return nil
		},
	}
}
