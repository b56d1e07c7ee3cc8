package roles

import (
	"testing"
)

// Each role's program answers a bad invocation with its own error exit
// code, without exiting the process.
func TestBadInvocations(t *testing.T) {
	table := Table()
	for _, tc := range []struct {
		role string
		args []string
		want int
	}{
		{"agnhost", []string{"dns-server-list", "extra-arg"}, 1},
		{"svclab-supervisor", nil, 2},
		{"svclab-node-agent", []string{"a", "b"}, 2},
		{"svclab-load-balancer", nil, 2},
	} {
		t.Run(tc.role, func(t *testing.T) {
			r, ok := table[tc.role]
			if !ok {
				t.Fatalf("no role %q", tc.role)
			}
			if got := r.Main(tc.args); got != tc.want {
				t.Errorf("%s %q exited %d, want %d", tc.role, tc.args, got, tc.want)
			}
		})
	}
	if _, ok := table["svclab"]; ok {
		t.Error("svclab itself is a role")
	}
}
