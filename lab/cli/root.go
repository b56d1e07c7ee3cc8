package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/attempt"
	"github.com/svclab/svclab/lab/class"
	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/owner"
	"github.com/svclab/svclab/lab/embedded"
	"github.com/svclab/svclab/lab/kind"
	"github.com/svclab/svclab/lab/kind/dockerd"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/session"
	"github.com/svclab/svclab/lab/store"
)

// options are the flags every command shares.
type options struct {
	stateDir string
	// databaseURL, when set, is the PostgreSQL database svclab keeps its
	// data in instead of svclab.db in stateDir.
	databaseURL string
	logLevel    string
	// limits bound each embedded lab this process creates.
	limits   embedded.Limits
	out, err io.Writer
}

// engineOptions are the kind backend's Docker engine options: the
// environment's DOCKER_HOST, progress on the command's output.
func (o *options) engineOptions() dockerd.Options {
	return dockerd.Options{Env: os.Getenv(dockerd.EnvHost), NoOwn: os.Getenv(dockerd.EnvOwn) == "no", Progress: cluster.NewTextProgress(o.out), Log: o.logger()}
}

func (o *options) logger() *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(o.err, &slog.HandlerOptions{Level: level}))
}

func (o *options) provider(backend string) (cluster.Provider, error) {
	switch backend {
	case "", embedded.BackendName:
		p := embedded.New(o.stateDir, o.logger())
		p.Limits = o.limits
		return p, nil
	case kind.BackendName:
		return kind.New(o.stateDir, o.logger()), nil
	default:
		return nil, fmt.Errorf("unknown backend %q: use embedded or kind", backend)
	}
}

// owners is the machine's record of which process or attempt holds which
// cluster, with cmd as this process's name in its claims.
func (o *options) owners(cmd *cobra.Command) (*owner.Registry, error) {
	return owner.New(owner.Options{Command: cmd.CommandPath(), StateDir: o.stateDir})
}

// NewRoot returns the svclab command tree writing to out and errOut.
func NewRoot(out, errOut io.Writer) *cobra.Command {
	o := &options{out: out, err: errOut, limits: embedded.DefaultLimits()}
	root := &cobra.Command{
		Use:           "svclab",
		Short:         "A lab for Kubernetes Service networking: real clusters, real kernel rules, graded fixes",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())
	})
	root.SetOut(out)
	root.SetErr(errOut)
	root.PersistentFlags().StringVar(&o.stateDir, "state-dir", embedded.DefaultStateDir(), "where svclab keeps its clusters' state (env "+embedded.EnvStateDir+")")
	root.PersistentFlags().StringVar(&o.databaseURL, "database-url", os.Getenv(store.EnvDatabaseURL),
		"keep learners, attempts and classes in this PostgreSQL database (postgres://USER:PASSWORD@HOST:PORT/DATABASE) instead of svclab.db in the state directory (env "+store.EnvDatabaseURL+")")
	root.PersistentFlags().StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	o.limits.AddFlags(root.PersistentFlags())
	root.AddCommand(newClusterCommand(o), newConformanceCommand(o), newKubeCommand(o), newKubectlCommand(o), newProxierCommand(), newNodeCommand(o), newImagesCommand(o), newKindCommand(o), newSetupCommand(o), newServeCommand(o), newVersionCommand(o))
	scenarioCmd := scenario.NewCommand()
	attempt.AddCommands(scenarioCmd, attempt.Env{StateDir: func() string { return o.stateDir }, DatabaseURL: func() string { return o.databaseURL }, Provider: func() (cluster.Provider, error) { return o.provider("") }, Log: o.logger})
	root.AddCommand(scenarioCmd)
	root.AddCommand(session.NewCommand())
	root.AddCommand(class.NewCommand())
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
