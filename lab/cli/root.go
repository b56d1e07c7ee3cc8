package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/owner"
	"github.com/svclab/svclab/lab/cmdenv"
	"github.com/svclab/svclab/lab/kind/dockerd"
	"github.com/svclab/svclab/lab/session"
)

// options are what every command shares: the shared flags (read by the
// root command before any command runs) and the outputs.
type options struct {
	env      *cmdenv.Env
	out, err io.Writer
}

// engineOptions are the kind backend's Docker engine options: the
// environment's DOCKER_HOST, progress on the command's output.
func (o *options) engineOptions() dockerd.Options {
	return dockerd.Options{Env: os.Getenv(dockerd.EnvHost), NoOwn: os.Getenv(dockerd.EnvOwn) == "no", Progress: cluster.NewTextProgress(o.out), Log: o.env.Log}
}

// owners is the machine's record of which process or attempt holds which
// cluster, with cmd as this process's name in its claims.
func (o *options) owners(cmd *cobra.Command) (*owner.Registry, error) {
	return owner.New(owner.Options{Command: cmd.CommandPath(), StateDir: o.env.StateDir})
}

// Execute runs svclab's command line (os.Args) writing to out and errOut.
// A scenario that was not passed (its grade printed already) is exit
// status 1 and nothing more.
func Execute(ctx context.Context, out, errOut io.Writer) error {
	err := NewRoot(out, errOut).ExecuteContext(ctx)
	if errors.Is(err, session.ErrNotPassed) {
		return &ExitError{Code: 1}
	}
	return err
}

// NewRoot returns the svclab command tree writing to out and errOut.
func NewRoot(out, errOut io.Writer) *cobra.Command {
	o := &options{out: out, err: errOut}
	root := &cobra.Command{
		Use:           "svclab",
		Short:         "A lab for Kubernetes Service networking: real clusters, real kernel rules, graded fixes",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) (err error) {
			o.env, err = cmdenv.Of(cmd)
			return err
		},
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())
	})
	root.SetOut(out)
	root.SetErr(errOut)
	cmdenv.AddFlags(root.PersistentFlags())
	root.AddCommand(newClusterCommand(o), newConformanceCommand(o), newKubeCommand(o), newKubectlCommand(o), newProxierCommand(), newNodeCommand(o), newImagesCommand(o), newKindCommand(o), newSetupCommand(o), newServeCommand(o), newVersionCommand(o))
	root.AddCommand(newScenarioCommand(o))
	root.AddCommand(newExerciseCommand(o))
	root.AddCommand(newClassCommand(o))
	return root
}

func newVersionCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print svclab's version and the Kubernetes version it runs",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintf(o.out, "svclab (Kubernetes %s)\n", cluster.KubernetesVersion)
			return nil
		},
	}
}

// parseNodeLabels turns NODE:KEY=VALUE flags into per-node labels.
func parseNodeLabels(flags []string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for _, f := range flags {
		node, kv, ok := strings.Cut(f, ":")
		k, v, ok2 := strings.Cut(kv, "=")
		if !ok || !ok2 || node == "" || k == "" {
			return nil, fmt.Errorf("--node-label %q: use NODE:KEY=VALUE, for example lab-worker:topology.kubernetes.io/zone=zone-a", f)
		}
		if out[node] == nil {
			out[node] = map[string]string{}
		}
		out[node][k] = v
	}
	return out, nil
}
