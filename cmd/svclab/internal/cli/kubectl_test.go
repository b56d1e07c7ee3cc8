package cli

import (
	"strings"
	"testing"
)

func TestSplitNameFlag(t *testing.T) {
	for _, tc := range []struct {
		in         []string
		name, rest string
		stateDir   string
	}{
		{nil, "lab", "", ""},
		{[]string{"get", "pods", "--name", "x"}, "lab", "get pods --name x", ""},
		{[]string{"--name", "c1", "get", "pods", "-n", "kube-system"}, "c1", "get pods -n kube-system", ""},
		{[]string{"--name=c2", "version"}, "c2", "version", ""},
		{[]string{"--state-dir", "/s", "--name", "c3", "get", "--state-dir"}, "c3", "get --state-dir", "/s"},
	} {
		e := &env{}
		name, rest, err := splitNameFlag(tc.in, e)
		if err != nil || name != tc.name || strings.Join(rest, " ") != tc.rest || e.stateDir != tc.stateDir {
			t.Errorf("splitNameFlag(%q) = %q %q %q %v", tc.in, name, rest, e.stateDir, err)
		}
	}
}
