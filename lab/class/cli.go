package class

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/class/labs"
	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cmdenv"
	"github.com/svclab/svclab/lab/faults"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/store"
	"github.com/svclab/svclab/scenarios"
)

// cliEnv is what the class commands share.
type cliEnv struct {
	stateDir string
	// databaseURL is --database-url (or SVCLAB_DATABASE_URL): a
	// PostgreSQL database instead of the SQLite file in stateDir.
	databaseURL string
	log         *slog.Logger
	out         io.Writer
	now         func() time.Time
	provider    func() (cluster.Provider, error)
}

func envOf(cmd *cobra.Command) (*cliEnv, error) {
	env, err := cmdenv.Of(cmd)
	if err != nil {
		return nil, err
	}
	return &cliEnv{
		stateDir: env.StateDir, databaseURL: env.DatabaseURL, log: env.Log, out: cmd.OutOrStdout(), now: time.Now,
		provider: env.Provider,
	}, nil
}

func (e *cliEnv) open(ctx context.Context) (*DB, error) {
	return OpenDB(ctx, store.Location(e.stateDir, e.databaseURL), e.now)
}

// Catalog loads the scenarios built into svclab.
func Catalog(log *slog.Logger) *scenario.Catalog {
	cat, _ := scenario.LoadEmbedded(scenarios.FS, scenario.Options{Faults: faults.Registry(), Logger: log})
	return cat
}

// NewCommand returns "svclab class" with create, list, show and close.
func NewCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "class",
		Short: "Classrooms: an instructor's class of learners, each with their own lab",
	}
	c.AddCommand(newCreateCommand(), newListCommand(), newShowCommand(), newCloseCommand(), newExportCommand())
	return c
}

func newCreateCommand() *cobra.Command {
	var (
		spec    Spec
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
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, err := envOf(cmd)
			if err != nil {
				return err
			}
			if spec.Weights, err = ParseWeights(weights); err != nil {
				return err
			}
			if len(spec.Weights) == 0 {
				spec.Weights = nil
			}
			if _, err := spec.Normalize(Catalog(env.log)); err != nil {
				return err
			}
			db, err := env.open(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			created, err := db.CreateClass(cmd.Context(), spec)
			if err != nil {
				return err
			}
			PrintCreated(env.out, created, url)
			if advice := CapacityAdvice(spec.Capacity, runtime.NumCPU()); advice != "" {
				fmt.Fprintf(env.out, "\nNote: %s\n", advice)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&spec.Name, "name", "", "the class's name (unique)")
	f.StringSliceVar(&spec.Scenarios, "scenarios", nil, "the scenarios' ids, comma-separated (svclab scenario list)")
	f.IntVar(&spec.Capacity, "capacity", DefaultCapacity, "the most labs that run at once; more learners queue")
	f.IntVar(&spec.Seats, "seats", DefaultSeats, "the most learners who can join")
	f.IntVar(&spec.PoolSize, "warm-pool", DefaultPoolSize, "clusters kept ready so that a start is instant (each takes about 600 MiB)")
	f.DurationVar(&spec.TimeLimit, "time-limit", DefaultTimeLimit, "how long a learner's lab runs (the exam's duration with --exam)")
	f.DurationVar(&spec.IdleTimeout, "idle-timeout", DefaultIdleTimeout, "a lab unused for this long is reclaimed")
	f.DurationVar(&spec.CodeTTL, "code-expires", DefaultCodeTTL, "how long the join code works")
	f.BoolVar(&spec.Exam, "exam", false, "make the class a timed exam")
	f.StringSliceVar(&weights, "weights", nil, "exam task weights, SCENARIO=WEIGHT,... (default equal)")
	f.StringVar(&url, "url", "http://127.0.0.1:8080", "the web UI's address, for the join link")
	f.StringVar(&spec.Webhook, "webhook", "", "an http(s) URL that gets a signed JSON event per learner state change (joined, scenario state, lab state)")
	return cmd
}

// PrintCreated prints a new class with its join code and link and its
// instructor token (the only time it is shown).
func PrintCreated(w io.Writer, c Created, url string) {
	cl := c.Class
	kind := "class"
	if cl.Exam {
		kind = "exam"
	}
	fmt.Fprintf(w, "Created %s %q (id %s): %s.\n\n", kind, cl.Name, cl.ID, summary(cl))
	fmt.Fprintf(w, "  Join code:  %s   (works until %s)\n", cl.JoinCode, cl.CodeExpiresAt.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "  Join link:  %s/join/%s\n", strings.TrimRight(url, "/"), cl.JoinCode)
	fmt.Fprintf(w, "  Board:      %s/class/%s/board   (svclab serve --classes serves it)\n\n", strings.TrimRight(url, "/"), cl.ID)
	fmt.Fprintf(w, "Instructor token (shown only now; keep it secret, it opens the class board):\n\n  %s\n", c.InstructorToken)
	if cl.Webhook != "" {
		fmt.Fprintf(w, "\nWebhook %s gets an event per learner state change, signed in X-Svclab-Signature\n(sha256= and the HMAC-SHA256 of the body) with this secret:\n\n  %s\n", cl.Webhook, cl.WebhookSecret)
	}
}

// LabsPerCPU is how many labs with a learner at work one CPU keeps
// responsive: on a 2-core machine, 10 labs of learners fixing scenarios
// with their live views open graded in 15 s (p50, 22 s p99); 30 labs
// (12 of which had started) timed checks out after 30 s.
const LabsPerCPU = 5

// CapacityAdvice warns, when capacity labs are more than cpus CPUs keep
// responsive, what learners would see; "" when they are not.
func CapacityAdvice(capacity, cpus int) string {
	if cpus < 1 || capacity <= LabsPerCPU*cpus {
		return ""
	}
	return fmt.Sprintf("this machine has %d CPU%s, which keep about %d labs responsive (%d per CPU). With %d labs at once, learners' clusters start late and their checks may time out; use --capacity %d, or serve the class from a machine with %d CPUs.",
		cpus, plural(cpus), LabsPerCPU*cpus, LabsPerCPU, capacity, LabsPerCPU*cpus, (capacity+LabsPerCPU-1)/LabsPerCPU)
}

func summary(c *Class) string {
	s := fmt.Sprintf("%d scenario%s, %s at once, %s, warm pool %d, labs end after %s or %s idle",
		len(c.Scenarios), plural(len(c.Scenarios)), count(c.Capacity, "lab"), count(c.Seats, "seat"), c.PoolSize, short(c.TimeLimit), short(c.IdleTimeout))
	return s
}

func count(n int, what string) string { return fmt.Sprintf("%d %s%s", n, what, plural(n)) }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// short prints a duration without zero units: 2h, 20m, 1h30m.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func newListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the classes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, err := envOf(cmd)
			if err != nil {
				return err
			}
			db, err := env.open(cmd.Context())
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
			PrintList(env.out, classes, counts, env.now())
			return nil
		},
	}
}

// PrintList prints classes as a table; learners counts each class's
// learners.
func PrintList(w io.Writer, classes []*Class, learners map[string]int, now time.Time) {
	if len(classes) == 0 {
		fmt.Fprintln(w, "No classes yet: create one with svclab class create --name NAME --scenarios IDS")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tKIND\tSTATE\tLEARNERS\tCAPACITY\tSCENARIOS\tCREATED")
	for _, c := range classes {
		kind := "track"
		if c.Exam {
			kind = "exam"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%d\t%s\t%s\n", c.ID, c.Name, kind, state(c, now), learners[c.ID], c.Seats, c.Capacity, strings.Join(c.Scenarios, ","), c.CreatedAt.UTC().Format("2006-01-02 15:04"))
	}
	tw.Flush()
}

func state(c *Class, now time.Time) string {
	switch {
	case !c.Open():
		return "closed"
	case !now.Before(c.CodeExpiresAt):
		return "open (code expired)"
	}
	return "open"
}

func newShowCommand() *cobra.Command {
	var url string
	cmd := &cobra.Command{
		Use:   "show ID|NAME",
		Short: "Show a class: its settings, join code, learners and clusters",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := envOf(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			db, err := env.open(ctx)
			if err != nil {
				return err
			}
			defer db.Close()
			c, err := db.Class(ctx, args[0])
			if err != nil {
				return err
			}
			learners, err := db.Learners(ctx, c.ID)
			if err != nil {
				return err
			}
			cells, err := db.cells(ctx, c.ID)
			if err != nil {
				return err
			}
			owned, err := db.Ledger(c.ID).Owned(ctx)
			if err != nil {
				return err
			}
			PrintShow(env.out, c, learners, cells, owned, url, env.now())
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", "http://127.0.0.1:8080", "the web UI's address, for the join link")
	return cmd
}

// PrintShow prints one class in detail.
func PrintShow(w io.Writer, c *Class, learners []Learner, cells map[string][]Cell, clusters []string, url string, now time.Time) {
	fmt.Fprintf(w, "Class %q (id %s): %s\n\n", c.Name, c.ID, state(c, now))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  Scenarios:\t%s\n", strings.Join(c.Scenarios, ", "))
	if c.Exam {
		var ws []string
		for _, id := range slices.Sorted(maps.Keys(c.Weights)) {
			ws = append(ws, fmt.Sprintf("%s=%g", id, c.Weights[id]))
		}
		fmt.Fprintf(tw, "  Exam:\t%s long, weights %s\n", short(c.TimeLimit), strings.Join(ws, ", "))
	}
	fmt.Fprintf(tw, "  Labs:\t%s at once, warm pool %d, %s each, reclaimed after %s idle\n", count(c.Capacity, "lab"), c.PoolSize, short(c.TimeLimit), short(c.IdleTimeout))
	fmt.Fprintf(tw, "  Seats:\t%d of %d taken\n", len(learners), c.Seats)
	if c.Open() {
		exp := "works until"
		if !now.Before(c.CodeExpiresAt) {
			exp = "expired at"
		}
		fmt.Fprintf(tw, "  Join code:\t%s (%s %s)\n", c.JoinCode, exp, c.CodeExpiresAt.UTC().Format("2006-01-02 15:04 MST"))
		fmt.Fprintf(tw, "  Join link:\t%s/join/%s\n", strings.TrimRight(url, "/"), c.JoinCode)
	} else {
		fmt.Fprintf(tw, "  Closed:\t%s\n", c.ClosedAt.UTC().Format("2006-01-02 15:04 MST"))
	}
	fmt.Fprintf(tw, "  Created:\t%s\n", c.CreatedAt.UTC().Format("2006-01-02 15:04 MST"))
	if len(clusters) == 0 {
		fmt.Fprintf(tw, "  Clusters:\tnone\n")
	} else {
		fmt.Fprintf(tw, "  Clusters:\t%s\n", strings.Join(clusters, ", "))
	}
	tw.Flush()
	if len(learners) == 0 {
		fmt.Fprintf(w, "\nNo learners yet.\n")
		return
	}
	fmt.Fprintf(w, "\nLearners:\n\n")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  NAME\tJOINED")
	for _, id := range c.Scenarios {
		fmt.Fprintf(tw, "\t%s", id)
	}
	fmt.Fprintln(tw)
	for _, l := range learners {
		fmt.Fprintf(tw, "  %s\t%s", l.Name, l.JoinedAt.UTC().Format("15:04"))
		for _, id := range c.Scenarios {
			st := string(NotStarted)
			for _, cell := range cells[l.ID] {
				if cell.Scenario == id {
					st = string(cell.State)
					if cell.HintsUsed > 0 {
						st += fmt.Sprintf(" (%d hint%s)", cell.HintsUsed, plural(cell.HintsUsed))
					}
				}
			}
			fmt.Fprintf(tw, "\t%s", st)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

func newExportCommand() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "export ID|NAME",
		Short: "Export a class's results (learner × scenario: state, time, hints, checks, scores) as CSV or JSON",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "csv" && format != "json" {
				return fmt.Errorf("--format %q: use csv or json", format)
			}
			env, err := envOf(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			db, err := env.open(ctx)
			if err != nil {
				return err
			}
			defer db.Close()
			c, err := db.Class(ctx, args[0])
			if err != nil {
				return err
			}
			rows, err := db.Results(ctx, c)
			if err != nil {
				return err
			}
			return WriteResults(env.out, rows, format)
		},
	}
	cmd.Flags().StringVar(&format, "format", "csv", "csv or json")
	return cmd
}

func newCloseCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "close ID|NAME",
		Short: "Close a class: nobody can join any more, and its clusters are deleted",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := envOf(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			db, err := env.open(ctx)
			if err != nil {
				return err
			}
			defer db.Close()
			c, err := db.Class(ctx, args[0])
			if err != nil {
				return err
			}
			p, err := env.provider()
			if err != nil {
				return err
			}
			deleted, err := CloseClass(ctx, db, c, p, env.log)
			if len(deleted) > 0 {
				fmt.Fprintf(env.out, "Deleted the class's clusters: %s\n", strings.Join(deleted, ", "))
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(env.out, "Class %q is closed.\n", c.Name)
			return nil
		},
	}
}

// CloseClass closes class c in the database and deletes every cluster it
// owns (recorded in the ledger, or named with its prefix), as a
// Classroom's Close does for a class svclab is not serving. It returns the
// clusters deleted.
func CloseClass(ctx context.Context, db *DB, c *Class, p cluster.Provider, log *slog.Logger) ([]string, error) {
	if err := db.CloseClass(ctx, c.ID); err != nil {
		return nil, err
	}
	ledger := db.Ledger(c.ID)
	before, err := ledger.Owned(ctx)
	if err != nil {
		return nil, err
	}
	if list, err := p.List(ctx); err == nil {
		for _, s := range list {
			if strings.HasPrefix(s.Name, c.ClusterPrefix()+"-") && !slices.Contains(before, s.Name) {
				before = append(before, s.Name)
			}
		}
	}
	m, err := labs.New(labs.Config{Provider: p, Ledger: ledger, Prefix: c.ClusterPrefix(), Capacity: 1, Log: log})
	if err != nil {
		return nil, err
	}
	err = m.Close(ctx)
	after, lerr := ledger.Owned(ctx)
	var deleted []string
	for _, n := range before {
		if !slices.Contains(after, n) {
			deleted = append(deleted, n)
		}
	}
	slices.Sort(deleted)
	if err != nil || lerr != nil {
		return deleted, fmt.Errorf("class %s is closed, but some clusters were not deleted (svclab class close %s tries again): %w", c.Name, c.ID, errors.Join(err, lerr))
	}
	return deleted, nil
}
