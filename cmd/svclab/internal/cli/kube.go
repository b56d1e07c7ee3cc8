package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/kubebin"
)

func newKubeCommand(e *env) *cobra.Command {
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
			b := &kubebin.Builder{Source: src, CacheDir: cache, Progress: cluster.NewTextProgress(e.errOut)}
			if cold {
				info, err := b.MeasureCold(cmd.Context())
				if err != nil {
					return err
				}
				fmt.Fprintf(e.out, "cold build: %s (%d packages compiled)\n", info.Duration.Round(time.Second), info.Packages)
				return nil
			}
			bin, err := b.Ensure(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintln(e.out, bin)
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
				fmt.Fprintf(e.out, "current:         %s (%s, built %s in %s, %d packages compiled)\n", bin, info.Key, info.Built.Format(time.RFC3339), info.Duration.Round(time.Second), info.Packages)
			} else {
				fmt.Fprintf(e.out, "current:         none built yet (go tool task build)\n")
			}
			if info, err := kubebin.LastColdBuild(cache); err == nil {
				fmt.Fprintf(e.out, "last cold build: %s (%d packages compiled, %s, on %s)\n", info.Duration.Round(time.Second), info.Packages, info.GoVersion, info.Built.Format(time.RFC3339))
			} else {
				fmt.Fprintf(e.out, "last cold build: none recorded (builds so far reused Go's build cache)\n")
			}
			return nil
		},
	})
	c.AddCommand(&cobra.Command{
		Use:   "path",
		Short: "Print the path of svclab-kube (building it when run in the source tree)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := kubebin.Locate(cmd.Context(), cluster.NewTextProgress(e.errOut))
			if err != nil {
				return err
			}
			fmt.Fprintln(e.out, bin)
			return nil
		},
	})
	return c
}
