package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/kind"
	"github.com/svclab/svclab/lab/kind/dockerd"
	"github.com/svclab/svclab/lab/kind/nodeimage"
)

// newKindCommand is "svclab kind": what the kind backend needs besides
// clusters — its Docker engine and its offline node image.
func newKindCommand(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "kind",
		Short: "The kind backend's Docker engine and offline node image",
	}
	c.AddCommand(newKindEngineCommand(e), newKindNodeImageCommand(e))
	return c
}

func newKindEngineCommand(e *env) *cobra.Command {
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
			stopped, err := dockerd.Stop(cmd.Context(), dockerd.Options{Progress: cluster.NewTextProgress(e.out), Log: e.log}, force)
			if err != nil {
				return err
			}
			if !stopped {
				st, _ := dockerd.OwnStatus(cmd.Context(), dockerd.Options{})
				if st.Running {
					fmt.Fprintln(e.out, "svclab's Docker engine is in use (a svclab process, or containers: see 'svclab cluster list --backend kind'); it keeps running")
					return nil
				}
				fmt.Fprintln(e.out, "svclab's Docker engine is not running")
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
			d, err := dockerd.Ensure(cmd.Context(), e.engineOptions())
			if err != nil {
				return err
			}
			fmt.Fprintf(e.out, "DOCKER_HOST=%s (Docker %s)\n", d.Host, d.Version)
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
				fmt.Fprintln(e.out, "svclab's Docker engine is not running")
				return nil
			}
			fmt.Fprintf(e.out, "svclab's Docker engine runs (pid %d, Docker %s): DOCKER_HOST=%s\n", st.Pid, st.Version, st.Host)
			return nil
		},
	}
	c.AddCommand(start, status, stop)
	return c
}

func newKindNodeImageCommand(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "node-image",
		Short: "svclab's offline kind node image (Kubernetes " + cluster.KubernetesVersion + " from svclab-kube, Debian's systemd and containerd)",
	}
	var image string
	build := &cobra.Command{
		Use:   "build",
		Short: "Build the kind node image without a registry and load it into the Docker engine (cached by its inputs)",
		Long: `Build svclab's kind node image from Debian packages and svclab-kube (kubelet,
kubeadm, kubectl and the control-plane, etcd, CoreDNS, pause and kindnetd
images kubeadm asks for, preloaded in the node's containerd), with no
registry and no docker build, and load it into the Docker engine (svclab's
own when no Docker daemon answers). The image is cached by its inputs: a
second build only loads it, or does nothing when the engine has it.

  svclab kind node-image build
  kind create cluster --image ` + nodeimage.DefaultImage,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			progress := cluster.NewTextProgress(e.out)
			opts := e.engineOptions()
			opts.Progress = progress
			// The engine keeps running afterwards, for kind create cluster
			// --image (svclab kind engine stop stops it).
			d, err := dockerd.Ensure(ctx, opts)
			if err != nil {
				return err
			}
			if err := os.Setenv(dockerd.EnvHost, d.Host); err != nil {
				return err
			}
			res, err := kind.LabNodeImage{Log: e.log}.Build(ctx, progress, image)
			if err != nil {
				return err
			}
			how := "the engine had it already"
			switch {
			case res.Built:
				how = "built and loaded"
			case res.Loaded:
				how = "loaded from the cache"
			}
			fmt.Fprintf(e.out, "Node image %s (key %s): %s in %s.\n", res.Image, res.Key, how, res.Duration.Round(time.Second))
			if d.Own {
				fmt.Fprintf(e.out, "It is in svclab's Docker engine, which keeps running ('svclab kind engine stop' stops it):\n  DOCKER_HOST=%s kind create cluster --image %s\n", d.Host, res.Image)
			}
			return nil
		},
	}
	build.Flags().StringVar(&image, "image", nodeimage.DefaultImage, "the node image's name")
	c.AddCommand(build)
	return c
}
