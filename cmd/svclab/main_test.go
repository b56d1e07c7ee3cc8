package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/roles"
)

// The roles main's comment shows are the table's, every one.
func TestRolesShown(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	// A row: "//<TAB>NAME[, NAME...]<two or more spaces>what it is".
	row := regexp.MustCompile(`(?m)^\t//\t(\S.*?)  +\S`)
	var shown []string
	for _, m := range row.FindAllStringSubmatch(string(src), -1) {
		shown = append(shown, strings.Split(m[1], ", ")...)
	}
	var table []string
	for name := range roles.Table() {
		table = append(table, name)
	}
	slices.Sort(shown)
	slices.Sort(table)
	if !slices.Equal(shown, table) {
		t.Errorf("main.go shows the roles %q, roles.Table has %q", shown, table)
	}
}
