package scenario

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Problem is one thing wrong with a scenario, located by file, line and
// field path (such as checks[2].weight). Line is 0 and Field empty when they
// do not apply.
type Problem struct {
	File    string
	Line    int
	Field   string
	Message string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Field != "" {
		b.WriteString(p.Field + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Problems are all the problems found in a load, sorted by file and line.
// As an error it prints one problem a line.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Err is ps as an error, or nil when there are none.
func (ps Problems) Err() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}

func (ps Problems) sort() {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
	})
}

// joinDisplay joins display paths, keeping "." out of them.
func joinDisplay(elem ...string) string { return path.Join(elem...) }
