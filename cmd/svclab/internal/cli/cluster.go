package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/owner"
	"github.com/svclab/svclab/lab/kind"
	"github.com/svclab/svclab/lab/kind/nodeimage"
)

func newClusterCommand(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "cluster",
		Short: "Create, list and delete lab clusters",
	}
	c.AddCommand(newClusterCreate(e), newClusterDelete(e), newClusterList(e), newClusterKubeconfig(e))
	return c
}

func newClusterCreate(e *env) *cobra.Command {
	var (
		name, proxyMode string
		nodes           int
		labels          []string
		kf              kindFlags
	)
	c := &cobra.Command{
		Use:   "create",
		Short: "Create a cluster, named and laid out like a kind cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cluster.ValidateName(name); err != nil {
				return err
			}
			if err := cluster.ValidateProxyMode(proxyMode); err != nil {
				return err
			}
			if nodes < 1 {
				return fmt.Errorf("--nodes %d: a cluster needs at least 1 node (the control plane)", nodes)
			}
			nodeLabels, err := parseNodeLabels(labels)
			if err != nil {
				return err
			}
			backend := e.backend
			p, err := e.provider()
			if err != nil {
				return err
			}
			if err := e.nameTaken(cmd.Context(), backend, name); err != nil {
				return err
			}
			if owners, err := e.owners(cmd); err != nil {
				return err
			} else if err := owners.Busy(cmd.Context(), backend, name); err != nil {
				return fmt.Errorf("%w: choose another --name", err)
			}
			workers, err := kf.prepare(cmd, p, nodes-1)
			if err != nil {
				return err
			}
			if kf.config != "" && !cmd.Flags().Changed("proxy-mode") {
				proxyMode = "" // the shape's: --kind-config iptables runs iptables
			}
			fmt.Fprintf(e.out, "Creating cluster %q ...\n", name)
			c, err := p.Create(cmd.Context(), cluster.CreateOptions{
				Name: name, Workers: workers, NodeLabels: nodeLabels, ProxyMode: proxyMode, Progress: cluster.NewTextProgress(e.out),
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(e.out, "Cluster %q is ready. Use it with:\n\n", c.Name())
			if kp, ok := c.(interface{ KubeconfigPath() string }); ok {
				fmt.Fprintf(e.out, "  export KUBECONFIG=%s\n", kp.KubeconfigPath())
			}
			fmt.Fprintf(e.out, "  svclab kubectl --name %s get nodes\n", c.Name())
			return nil
		},
	}
	c.Flags().StringVar(&name, "name", "lab", "cluster name")
	c.Flags().IntVar(&nodes, "nodes", 3, "number of nodes: one control plane, the rest workers (NAME-worker, NAME-worker2, ...)")
	c.Flags().StringVar(&proxyMode, "proxy-mode", "nftables", "kube-proxy mode: nftables or iptables")
	c.Flags().StringArrayVar(&labels, "node-label", nil, "extra node label NODE:KEY=VALUE (repeatable), e.g. lab-worker:topology.kubernetes.io/zone=zone-a")
	kf.add(c)
	return c
}

func newClusterDelete(e *env) *cobra.Command {
	var (
		name       string
		all, force bool
	)
	c := &cobra.Command{
		Use:   "delete",
		Short: "Delete a cluster (--name) or every cluster and leftover lab resource (--all)",
		Long: `Delete a cluster (--name), or every cluster of the state directory and what
crashed labs of any state directory left on the machine (--all).

A cluster that another svclab process or a running attempt holds (svclab
serve, svclab scenario start, svclab exercise run) is not deleted: the
command says who holds it. --force deletes it anyway. A sweep never removes
what a live lab owns, whichever state directory made it.

--name finds the cluster on either backend unless --backend names one;
--all sweeps the backend that --backend names (or the machine's default).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if all == (name != "") {
				return fmt.Errorf("pass either --name NAME or --all")
			}
			owners, err := e.owners(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if all {
				backend := e.backend
				p, err := e.provider()
				if err != nil {
					return err
				}
				var kept []string
				keep := func(name string) bool {
					if force {
						return false
					}
					err := owners.Busy(ctx, backend, name)
					if err != nil {
						kept = append(kept, err.Error())
					}
					return err != nil
				}
				if err := p.DeleteAll(ctx, keep); err != nil {
					return err
				}
				if len(kept) == 0 {
					fmt.Fprintln(e.out, "Deleted every cluster and swept leftover lab resources.")
					return nil
				}
				fmt.Fprintln(e.out, "Deleted every other cluster and swept leftover lab resources. Kept (--force deletes them too):")
				for _, k := range kept {
					fmt.Fprintf(e.out, "  %s\n", k)
				}
				return nil
			}
			del := func(backend string, p cluster.Provider) error {
				if err := owners.Busy(ctx, backend, name); err != nil && !force {
					return fmt.Errorf("%w: end that first, or delete it anyway with --force", err)
				}
				return p.Delete(ctx, name)
			}
			// The first backend's "no cluster named" stands unless another
			// backend has the cluster (or fails otherwise).
			var notFound error
			for _, b := range e.backendsToSearch() {
				p, perr := e.providerOf(b)
				if perr != nil {
					return perr
				}
				if err = del(b, p); !errors.Is(err, cluster.ErrNotFound) {
					break
				}
				if notFound == nil {
					notFound = err
				}
			}
			if errors.Is(err, cluster.ErrNotFound) {
				err = notFound
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(e.out, "Deleted cluster %q.\n", name)
			return nil
		},
	}
	c.Flags().StringVar(&name, "name", "", "cluster to delete")
	c.Flags().BoolVar(&all, "all", false, "delete every cluster and sweep leftovers of crashed runs")
	c.Flags().BoolVar(&force, "force", false, "delete clusters that another svclab process or a running attempt holds")
	return c
}

func newClusterList(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "list",
		Short: "List clusters with their state (of every backend unless --backend names one)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list []cluster.Summary
			for _, b := range e.backendsToSearch() {
				p, err := e.providerOf(b)
				if err != nil {
					return err
				}
				l, err := p.List(cmd.Context())
				if err != nil {
					return err
				}
				list = append(list, l...)
			}
			if len(list) == 0 {
				fmt.Fprintln(e.out, "No clusters.")
				return nil
			}
			usedBy := map[string]string{}
			if owners, err := e.owners(cmd); err == nil {
				claims, _ := owners.List(cmd.Context())
				for _, c := range claims {
					usedBy[c.Backend+"/"+c.Cluster] = usage(c)
				}
			}
			tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tBACKEND\tSTATE\tIN USE BY\tSERVER\tDETAIL")
			for _, s := range list {
				used := usedBy[s.Backend+"/"+s.Name]
				if used == "" {
					used = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Backend, s.State, used, s.Server, s.Detail)
			}
			return tw.Flush()
		},
	}
	return c
}

// usage is a claim in a table cell: "selector-typo (attempt 5, svclab
// serve)", "svclab exercise run (pid 4321)".
func usage(c owner.Claim) string {
	if c.Attempt != nil {
		return fmt.Sprintf("%s (attempt %d, %s)", c.Attempt.Scenario, c.Attempt.ID, c.Command)
	}
	return fmt.Sprintf("%s (pid %d)", c.Command, c.PID)
}

func newClusterKubeconfig(e *env) *cobra.Command {
	var name string
	c := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print a cluster's kubeconfig",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			c, err := e.findCluster(cmd.Context(), name)
			if err != nil {
				return err
			}
			b, err := c.Kubeconfig()
			if err != nil {
				return err
			}
			_, err = e.out.Write(b)
			return err
		},
	}
	c.Flags().StringVar(&name, "name", "lab", "cluster name")
	return c
}

// nameTaken refuses a name that a cluster of the other backend has, so
// that kubectl, node and kubeconfig commands, which find a cluster on
// either backend by name, never have to choose.
func (e *env) nameTaken(ctx context.Context, backend, name string) error {
	for _, b := range backends() {
		if b == backend {
			continue
		}
		p, err := e.providerOf(b)
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
