package scenario

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/scenarios"
)

// DefaultDir is where "svclab scenario lint" looks without arguments.
const DefaultDir = "scenarios"

// ExitError is returned by commands that failed in a way already reported
// on the output; svclab exits with Code and prints nothing more.
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }

// ExitCode is the process exit code.
func (e *ExitError) ExitCode() int { return e.Code }

// NewCommand returns "svclab scenario" with its lint and list subcommands.
func NewCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "scenario",
		Short: "Scenarios: list and lint them; start, check, hint, solve and reset attempts",
	}
	c.AddCommand(newLintCommand(), newListCommand())
	return c
}

func logger(c *cobra.Command) *slog.Logger {
	level := slog.LevelInfo
	if f := c.Flag("log-level"); f != nil {
		_ = level.UnmarshalText([]byte(f.Value.String()))
	}
	return slog.New(slog.NewTextHandler(c.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
}

// sources are the directories given, or the scenarios directory of the
// working tree if there is one, or the scenarios built into svclab.
func sources(dirs []string) []Source {
	if len(dirs) == 0 {
		if fi, err := os.Stat(DefaultDir); err == nil && fi.IsDir() {
			return []Source{DirSource(DefaultDir)}
		}
		return []Source{{FS: scenarios.FS, Display: "scenarios (built in)"}}
	}
	out := make([]Source, len(dirs))
	for i, d := range dirs {
		out[i] = DirSource(d)
	}
	return out
}

func newLintCommand() *cobra.Command {
	return &cobra.Command{
		Use:           "lint [DIR...]",
		SilenceUsage:  true,
		SilenceErrors: true,
		Short:         "Check scenarios: the format, the manifests, faults and checks",
		Long: `Check every scenario in each DIR (a directory of scenario directories, or a
single scenario directory) and print every problem as FILE:LINE: FIELD: MESSAGE.
Without DIR it checks ./scenarios, or the scenarios built into svclab when
there is no such directory. Exits 1 when there are problems.`,
		RunE: func(c *cobra.Command, args []string) error {
			srcs := sources(args)
			cat, problems := Load(Options{Logger: logger(c)}, srcs...)
			return report(c.OutOrStdout(), cat, problems)
		},
	}
}

func report(w io.Writer, cat *Catalog, problems Problems) error {
	for _, p := range problems {
		fmt.Fprintln(w, p)
	}
	if len(problems) > 0 {
		n := plural(len(problems), "problem")
		fmt.Fprintf(w, "%s; %s clean\n", n, plural(len(cat.Scenarios), "scenario"))
		return &ExitError{Code: 1, Msg: n}
	}
	fmt.Fprintf(w, "%s, no problems\n", plural(len(cat.Scenarios), "scenario"))
	return nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func newListCommand() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:          "list",
		SilenceUsage: true,
		Short:        "List the scenarios",
		Args:         cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var srcs []Source
			if dir != "" {
				srcs = []Source{DirSource(dir)}
			} else {
				srcs = []Source{{FS: scenarios.FS, Display: "scenarios (built in)"}}
			}
			cat, problems := Load(Options{Logger: logger(c)}, srcs...)
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tDOMAIN\tDIFFICULTY\tMINUTES\tTITLE")
			for _, s := range cat.Scenarios {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", s.ID, s.Domain, s.Difficulty, s.EstimatedMinutes, s.Title)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(problems) > 0 {
				fmt.Fprintf(c.ErrOrStderr(), "%d problems hide the scenarios that have them; see svclab scenario lint\n", len(problems))
			}
			return nil
		},
	}
	c.Flags().StringVar(&dir, "dir", "", "list the scenarios in this directory instead of the built-in ones")
	return c
}
