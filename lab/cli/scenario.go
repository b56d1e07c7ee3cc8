package cli

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/scenarios"
)

// newScenarioCommand returns "svclab scenario": lint and list here, the
// attempt commands (start, check, hint, solve, reset, ...) added by
// addAttemptCommands.
func newScenarioCommand(o *options) *cobra.Command {
	c := &cobra.Command{
		Use:   "scenario",
		Short: "Scenarios: list and lint them; start, check, hint, solve and reset attempts",
	}
	c.AddCommand(newScenarioLint(o), newScenarioList(o))
	return c
}

// scenariosDir is where "svclab scenario lint" looks without arguments.
const scenariosDir = "scenarios"

// builtIn is the scenarios built into svclab.
var builtIn = scenarios.Source()

// lintSources are the directories given, or the scenarios directory of
// the working tree if there is one, or the scenarios built into svclab.
func lintSources(dirs []string) []scenario.Source {
	if len(dirs) == 0 {
		if fi, err := os.Stat(scenariosDir); err == nil && fi.IsDir() {
			return []scenario.Source{scenario.DirSource(scenariosDir)}
		}
		return []scenario.Source{builtIn}
	}
	out := make([]scenario.Source, len(dirs))
	for i, d := range dirs {
		out[i] = scenario.DirSource(d)
	}
	return out
}

func newScenarioLint(o *options) *cobra.Command {
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
			cat, problems := scenario.Load(scenario.Options{Logger: o.env.Log}, lintSources(args)...)
			return lintReport(c.OutOrStdout(), cat, problems)
		},
	}
}

// lintReport prints the problems, one a line, and a summary; an
// ExitError when there are problems.
func lintReport(w io.Writer, cat *scenario.Catalog, problems scenario.Problems) error {
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

// plural is "1 noun" or "N nouns".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func newScenarioList(o *options) *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:          "list",
		SilenceUsage: true,
		Short:        "List the scenarios",
		Args:         cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			src := builtIn
			if dir != "" {
				src = scenario.DirSource(dir)
			}
			cat, problems := scenario.Load(scenario.Options{Logger: o.env.Log}, src)
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
