package class

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/svclab/svclab/lab/class/labs"
	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/scenarios"
)

// cliEnv is what the class commands share.

// Catalog loads the scenarios built into svclab.

func Catalog(log *slog.Logger) *scenario.Catalog {
	cat, _ := scenarios.Load(scenario.Options{Logger: log})
	return cat
}

// NewCommand returns "svclab class" with create, list, show and close.

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
	fmt.Fprintf(tw, "  Labs:\t%s at once, warm pool %d, %s each, reclaimed after %s idle, kube-proxy in %s mode\n", count(c.Capacity, "lab"), c.PoolSize, short(c.TimeLimit), short(c.IdleTimeout), cmp.Or(c.ProxyMode, scenario.ProxyModeNFTables))
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
