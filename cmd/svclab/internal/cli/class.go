package cli

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/class"
	"github.com/svclab/svclab/lab/store"
)

// openClass opens the classes' database and finds the class called (or
// numbered) idOrName; the caller closes the database.
func (e *env) openClass(ctx context.Context, idOrName string) (*class.DB, *class.Class, error) {
	db, err := e.classDB(ctx)
	if err != nil {
		return nil, nil, err
	}
	c, err := db.Class(ctx, idOrName)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, c, nil
}

// classDB opens the classes' database: the state directory's, or
// --database-url's.
func (e *env) classDB(ctx context.Context) (*class.DB, error) {
	return class.OpenDB(ctx, store.Location(e.stateDir, e.databaseURL), time.Now)
}

// newClassCommand returns "svclab class" with create, list, show, export and close.
func newClassCommand(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "class",
		Short: "Classrooms: an instructor's class of learners, each with their own lab",
	}
	c.AddCommand(newClassCreate(e), newClassList(e), newClassShow(e), newClassClose(e), newClassExport(e))
	return c
}

func newClassCreate(e *env) *cobra.Command {
	var (
		spec    class.Spec
		weights []string
		url     string
	)
	cmd := &cobra.Command{
		Use:   "create --name NAME --scenarios IDS",
		Short: "Create a class and print its join code and instructor token",
		Args:  cobra.NoArgs,
		Long: `Create a class: learners join it with the printed join code (or link) and a
display name, and each gets their own lab cluster of the scenarios' shape.
At most --capacity labs run at once; more learners wait in a queue that shows
their position. --warm-pool clusters are kept ready so a start is instant.
A lab ends --time-limit after it started, or after --idle-timeout without
activity, with warnings before.

With --exam the scenarios are the tasks of a timed exam (--time-limit long),
weighted by --weights (default equal), with partial credit per check and a
review with the reference solutions at the end.

The instructor token is printed once and only its hash is stored: keep it.`,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if spec.Weights, err = class.ParseWeights(weights); err != nil {
				return err
			}
			if len(spec.Weights) == 0 {
				spec.Weights = nil
			}
			if _, err := spec.Normalize(class.Catalog(e.log)); err != nil {
				return err
			}
			db, err := e.classDB(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			created, err := db.CreateClass(cmd.Context(), spec)
			if err != nil {
				return err
			}
			class.PrintCreated(e.out, created, url)
			if advice := class.CapacityAdvice(spec.Capacity, runtime.NumCPU()); advice != "" {
				fmt.Fprintf(e.out, "\nNote: %s\n", advice)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&spec.Name, "name", "", "the class's name (unique)")
	f.StringSliceVar(&spec.Scenarios, "scenarios", nil, "the scenarios' ids, comma-separated (svclab scenario list)")
	f.IntVar(&spec.Capacity, "capacity", class.DefaultCapacity, "the most labs that run at once; more learners queue")
	f.IntVar(&spec.Seats, "seats", class.DefaultSeats, "the most learners who can join")
	f.IntVar(&spec.PoolSize, "warm-pool", class.DefaultPoolSize, "clusters kept ready so that a start is instant (each takes about 600 MiB)")
	f.DurationVar(&spec.TimeLimit, "time-limit", class.DefaultTimeLimit, "how long a learner's lab runs (the exam's duration with --exam)")
	f.DurationVar(&spec.IdleTimeout, "idle-timeout", class.DefaultIdleTimeout, "a lab unused for this long is reclaimed")
	f.DurationVar(&spec.CodeTTL, "code-expires", class.DefaultCodeTTL, "how long the join code works")
	f.BoolVar(&spec.Exam, "exam", false, "make the class a timed exam")
	f.StringSliceVar(&weights, "weights", nil, "exam task weights, SCENARIO=WEIGHT,... (default equal)")
	f.StringVar(&url, "url", "http://127.0.0.1:8080", "the web UI's address, for the join link")
	f.StringVar(&spec.ProxyMode, "proxy-mode", "", "kube-proxy's mode in the labs, nftables or iptables (a kubeadm cluster's default, as in the exam); scenarios that name no mode run in it (default nftables, or iptables when every scenario is written for it)")
	f.StringVar(&spec.Webhook, "webhook", "", "an http(s) URL that gets a signed JSON event per learner state change (joined, scenario state, lab state)")
	return cmd
}

func newClassList(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the classes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, err := e.classDB(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			classes, err := db.Classes(cmd.Context())
			if err != nil {
				return err
			}
			counts := map[string]int{}
			for _, c := range classes {
				ls, err := db.Learners(cmd.Context(), c.ID)
				if err != nil {
					return err
				}
				counts[c.ID] = len(ls)
			}
			class.PrintList(e.out, classes, counts, time.Now())
			return nil
		},
	}
}

func newClassShow(e *env) *cobra.Command {
	var url string
	cmd := &cobra.Command{
		Use:   "show ID|NAME",
		Short: "Show a class: its settings, join code, learners and clusters",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			db, c, err := e.openClass(ctx, args[0])
			if err != nil {
				return err
			}
			defer db.Close()
			learners, err := db.Learners(ctx, c.ID)
			if err != nil {
				return err
			}
			cells, err := db.Cells(ctx, c.ID)
			if err != nil {
				return err
			}
			owned, err := db.Ledger(c.ID).Owned(ctx)
			if err != nil {
				return err
			}
			class.PrintShow(e.out, c, learners, cells, owned, url, time.Now())
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", "http://127.0.0.1:8080", "the web UI's address, for the join link")
	return cmd
}

func newClassExport(e *env) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "export ID|NAME",
		Short: "Export a class's results (learner × scenario: state, time, hints, checks, scores) as CSV or JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "csv" && format != "json" {
				return fmt.Errorf("--format %q: use csv or json", format)
			}
			ctx := cmd.Context()
			db, c, err := e.openClass(ctx, args[0])
			if err != nil {
				return err
			}
			defer db.Close()
			rows, err := db.Results(ctx, c)
			if err != nil {
				return err
			}
			return class.WriteResults(e.out, rows, format)
		},
	}
	cmd.Flags().StringVar(&format, "format", "csv", "csv or json")
	return cmd
}

func newClassClose(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "close ID|NAME",
		Short: "Close a class: nobody can join any more, and its clusters are deleted",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			db, c, err := e.openClass(ctx, args[0])
			if err != nil {
				return err
			}
			defer db.Close()
			p, err := e.provider()
			if err != nil {
				return err
			}
			deleted, err := class.CloseClass(ctx, db, c, p, e.log)
			if len(deleted) > 0 {
				fmt.Fprintf(e.out, "Deleted the class's clusters: %s\n", strings.Join(deleted, ", "))
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(e.out, "Class %q is closed.\n", c.Name)
			return nil
		},
	}
}
