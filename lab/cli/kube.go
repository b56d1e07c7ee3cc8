package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/kubebin"
)

func newKubeCommand(o *options) *cobra.Command {
	c := &cobra.Command{
		Use:   "kube",
		Short: "Build and find svclab-kube, the Kubernetes components built from source",
	}
	var cold bool
	build := &cobra.Command{
		Use:   "build",
		Short: "Build svclab-kube into the cache unless it is there already, and print its path",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			wd, err := os.Getwd()
			if err != nil {
				return err
			}
			src, err := kubebin.FindSource(wd)
			if err != nil {
				return fmt.Errorf("%w: run this inside the svclab source tree", err)
			}
			cache, err := kubebin.DefaultCacheDir()
			if err != nil {
				return err
			}
			b := &kubebin.Builder{Source: src, CacheDir: cache, Progress: cluster.NewTextProgress(o.err)}
			if cold {
				info, err := b.MeasureCold(cmd.Context())
				if err != nil {
					return err
				}
				fmt.Fprintf(o.out, "cold build: %s (%d packages compiled)\n", info.Duration.Round(time.Second), info.Packages)
				return nil
			}
			bin, err := b.Ensure(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintln(o.out, bin)
			return nil
		},
	}
	build.Flags().BoolVar(&cold, "cold", false, "measure a cold build: compile everything with an empty Go build cache, keep the cached binary")
	c.AddCommand(build)
	c.AddCommand(&cobra.Command{
		Use:   "info",
		Short: "Print what is known about the cached svclab-kube builds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cache, err := kubebin.DefaultCacheDir()
			if err != nil {
				return err
			}
			bin := filepath.Join(cache, "current", kubebin.BinaryName)
			if info, err := kubebin.Info(bin); err == nil {
				fmt.Fprintf(o.out, "current:         %s (%s, built %s in %s, %d packages compiled)\n", bin, info.Key, info.Built.Format(time.RFC3339), info.Duration.Round(time.Second), info.Packages)
			} else {
				fmt.Fprintf(o.out, "current:         none built yet (go tool task build)\n")
			}
			if info, err := kubebin.LastColdBuild(cache); err == nil {
				fmt.Fprintf(o.out, "last cold build: %s (%d packages compiled, %s, on %s)\n", info.Duration.Round(time.Second), info.Packages, info.GoVersion, info.Built.Format(time.RFC3339))
			} else {
				fmt.Fprintf(o.out, "last cold build: none recorded (builds so far reused Go's build cache)\n")
			}
			return nil
		},
	})
	c.AddCommand(&cobra.Command{
		Use:   "path",
		Short: "Print the path of svclab-kube (building it when run in the source tree)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := kubebin.Locate(cmd.Context(), cluster.NewTextProgress(o.err))
			if err != nil {
				return err
			}
			fmt.Fprintln(o.out, bin)
			return nil
		},
	})
	return c
}

func newKubectlCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "kubectl [--name NAME] [--state-dir DIR] KUBECTL-ARGS...",
		Short: "Run kubectl " + cluster.KubernetesVersion + " against a lab cluster (default --name lab)",
		// kubectl's own flags pass through untouched.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			name, args, err := splitNameFlag(args, o)
			if err != nil {
				return err
			}
			c, err := o.findCluster(cmd.Context(), name)
			if err != nil {
				return err
			}
			kp, ok := c.(interface{ KubeconfigPath() string })
			if !ok {
				return fmt.Errorf("cluster %s has no kubeconfig file", name)
			}
			bin, err := kubebin.Locate(cmd.Context(), cluster.NewTextProgress(o.err))
			if err != nil {
				return err
			}
			x := exec.CommandContext(cmd.Context(), bin, append([]string{"kubectl"}, args...)...)
			x.Env = append(os.Environ(), "KUBECONFIG="+kp.KubeconfigPath())
			x.Stdin, x.Stdout, x.Stderr = os.Stdin, o.out, o.err
			if err := x.Run(); err != nil {
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					return exitError{code: ee.ExitCode()}
				}
				return err
			}
			return nil
		},
	}
}

// splitNameFlag takes svclab's own leading flags (--name, --state-dir, in
// either order, as "--flag value" or "--flag=value") off args; the rest is
// kubectl's.
func splitNameFlag(args []string, o *options) (string, []string, error) {
	name := "lab"
	for len(args) > 0 {
		flag, value, hasValue := strings.Cut(args[0], "=")
		var dst *string
		switch flag {
		case "--name":
			dst = &name
		case "--state-dir":
			dst = &o.env.StateDir
		default:
			return name, args, nil
		}
		if !hasValue {
			if len(args) < 2 {
				return "", nil, fmt.Errorf("%s needs a value", flag)
			}
			value, args = args[1], args[1:]
		}
		*dst = value
		args = args[1:]
	}
	return name, args, nil
}

// exitError carries a child's exit code up to main without a message of
// its own (the child printed its error already).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// ExitCode returns the code the process should exit with.
func (e exitError) ExitCode() int { return e.code }
