package cli

import (
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/owner"
)

func newClusterCommand(o *options) *cobra.Command {
	c := &cobra.Command{
		Use:   "cluster",
		Short: "Create, list and delete lab clusters",
	}
	c.AddCommand(newClusterCreate(o), newClusterDelete(o), newClusterList(o), newClusterKubeconfig(o))
	return c
}

func newClusterCreate(o *options) *cobra.Command {
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
			backend := o.env.Backend
			p, err := o.env.Provider()
			if err != nil {
				return err
			}
			if err := o.nameTaken(cmd.Context(), backend, name); err != nil {
				return err
			}
			if owners, err := o.owners(cmd); err != nil {
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
			fmt.Fprintf(o.out, "Creating cluster %q ...\n", name)
			c, err := p.Create(cmd.Context(), cluster.CreateOptions{
				Name: name, Workers: workers, NodeLabels: nodeLabels, ProxyMode: proxyMode, Progress: cluster.NewTextProgress(o.out),
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(o.out, "Cluster %q is ready. Use it with:\n\n", c.Name())
			if kp, ok := c.(interface{ KubeconfigPath() string }); ok {
				fmt.Fprintf(o.out, "  export KUBECONFIG=%s\n", kp.KubeconfigPath())
			}
			fmt.Fprintf(o.out, "  svclab kubectl --name %s get nodes\n", c.Name())
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

func newClusterDelete(o *options) *cobra.Command {
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
			owners, err := o.owners(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if all {
				backend := o.env.Backend
				p, err := o.env.Provider()
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
					fmt.Fprintln(o.out, "Deleted every cluster and swept leftover lab resources.")
					return nil
				}
				fmt.Fprintln(o.out, "Deleted every other cluster and swept leftover lab resources. Kept (--force deletes them too):")
				for _, k := range kept {
					fmt.Fprintf(o.out, "  %s\n", k)
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
			for _, b := range o.backendsToSearch() {
				p, perr := o.env.ProviderOf(b)
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
			fmt.Fprintf(o.out, "Deleted cluster %q.\n", name)
			return nil
		},
	}
	c.Flags().StringVar(&name, "name", "", "cluster to delete")
	c.Flags().BoolVar(&all, "all", false, "delete every cluster and sweep leftovers of crashed runs")
	c.Flags().BoolVar(&force, "force", false, "delete clusters that another svclab process or a running attempt holds")
	return c
}

func newClusterList(o *options) *cobra.Command {
	c := &cobra.Command{
		Use:   "list",
		Short: "List clusters with their state (of every backend unless --backend names one)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list []cluster.Summary
			for _, b := range o.backendsToSearch() {
				p, err := o.env.ProviderOf(b)
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
				fmt.Fprintln(o.out, "No clusters.")
				return nil
			}
			usedBy := map[string]string{}
			if owners, err := o.owners(cmd); err == nil {
				claims, _ := owners.List(cmd.Context())
				for _, c := range claims {
					usedBy[c.Backend+"/"+c.Cluster] = usage(c)
				}
			}
			tw := tabwriter.NewWriter(o.out, 0, 4, 2, ' ', 0)
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

func newClusterKubeconfig(o *options) *cobra.Command {
	var name string
	c := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print a cluster's kubeconfig",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			c, err := o.findCluster(cmd.Context(), name)
			if err != nil {
				return err
			}
			b, err := c.Kubeconfig()
			if err != nil {
				return err
			}
			_, err = o.out.Write(b)
			return err
		},
	}
	c.Flags().StringVar(&name, "name", "lab", "cluster name")
	return c
}
