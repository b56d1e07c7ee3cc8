package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cmdenv"
	"github.com/svclab/svclab/lab/embedded"
	"github.com/svclab/svclab/lab/kind"
	"github.com/svclab/svclab/lab/kind/nodeimage"
)

// backendsToSearch are the backends where commands look for a cluster by
// name: the one --backend (or SVCLAB_BACKEND) names, else every one.
func (o *options) backendsToSearch() []string {
	if o.env.BackendGiven {
		return []string{o.env.Backend}
	}
	return cmdenv.Backends
}

// findCluster returns the cluster called name from whichever backend has
// it (or the one --backend names), so that kubectl and node commands work
// on kind clusters too.
func (o *options) findCluster(ctx context.Context, name string) (cluster.Cluster, error) {
	var first error
	for _, b := range o.backendsToSearch() {
		p, err := o.env.ProviderOf(b)
		if err != nil {
			return nil, err
		}
		c, err := p.Get(ctx, name)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, cluster.ErrNotFound) {
			return nil, err
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// nameTaken refuses a name that a cluster of the other backend has, so
// that kubectl, node and kubeconfig commands, which find a cluster on
// either backend by name, never have to choose.
func (o *options) nameTaken(ctx context.Context, backend, name string) error {
	for _, b := range cmdenv.Backends {
		if b == backend {
			continue
		}
		p, err := o.env.ProviderOf(b)
		if err != nil {
			return err
		}
		if _, err := p.Get(ctx, name); err == nil {
			return fmt.Errorf("a cluster named %q exists already on the %s backend: choose another --name, or delete it with 'svclab cluster delete --backend %s --name %s': %w", name, b, b, name, cluster.ErrExists)
		}
	}
	return nil
}

// kindFlags are cluster create's kind-only flags.
type kindFlags struct {
	config, nodeImage string
}

func (k *kindFlags) add(c *cobra.Command) {
	c.Flags().StringVar(&k.config, "kind-config", "", "kind backend: a cluster shape from kind-configs (nftables, iptables, three-zones, upstream-kube-proxy) or a kind configuration file; its node count unless --nodes is given")
	c.Flags().StringVar(&k.nodeImage, "node-image", "", "kind backend: the node image (default: svclab's own, "+nodeimage.DefaultImage+", built offline by 'svclab kind node-image build')")
}

// prepare applies the kind flags to p and checks Docker before anything is
// printed, so that a missing Docker is one line. It returns the number of
// workers to create.
func (k *kindFlags) prepare(cmd *cobra.Command, p cluster.Provider, workers int) (int, error) {
	kp, ok := p.(*kind.Provider)
	if !ok {
		if k.config != "" || k.nodeImage != "" {
			return 0, errors.New("--kind-config and --node-image are for --backend kind")
		}
		return workers, nil
	}
	if k.config != "" {
		if _, err := kind.LoadShape(k.config, ""); err != nil {
			return 0, err
		}
	}
	kp.Shape, kp.NodeImage = k.config, k.nodeImage
	if k.config != "" && !cmd.Flags().Changed("nodes") {
		workers = -1 // the shape's
	}
	if _, err := kp.Preflight(cmd.Context()); err != nil {
		return 0, err
	}
	return workers, nil
}

func newImagesLoad(o *options) *cobra.Command {
	var (
		name  string
		extra []string
	)
	c := &cobra.Command{
		Use:   "load",
		Short: "Load the lab's images into the nodes of a kind cluster (embedded clusters use them directly)",
		Long: `Pack the lab's images (the tools image as busybox, ubuntu, curl..., agnhost,
nginx/httpd, the bundled proxier) into an image archive and import it into
every node of kind cluster --cluster, with kind's loader: no registry, no
docker build. Images are tagged "latest" and with the tags the built-in
scenarios use; --image adds more (nginx:1.25). When the bundled proxier's
image changed, the kube-proxy DaemonSet moves to the new one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := o.env.ProviderOf(kind.BackendName)
			if err != nil {
				return err
			}
			kp := p.(*kind.Provider)
			if _, err := kp.Get(cmd.Context(), name); errors.Is(err, cluster.ErrNotFound) {
				if ep, perr := o.env.ProviderOf(embedded.BackendName); perr == nil {
					if _, eerr := ep.Get(cmd.Context(), name); eerr == nil {
						fmt.Fprintf(o.out, "Cluster %q is an embedded cluster: its pods use the lab's images directly, there is nothing to load.\n", name)
						return nil
					}
				}
			}
			if err := kp.LoadImages(cmd.Context(), name, extra, cluster.NewTextProgress(o.out)); err != nil {
				return err
			}
			fmt.Fprintf(o.out, "Images loaded into the nodes of cluster %q.\n", name)
			return nil
		},
	}
	c.Flags().StringVar(&name, "cluster", "lab", "the kind cluster")
	c.Flags().StringArrayVar(&extra, "image", nil, "another reference to tag (repeatable), e.g. nginx:1.25")
	return c
}
