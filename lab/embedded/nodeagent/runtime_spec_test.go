//go:build linux

package nodeagent

import (
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// allowPrivilegeEscalation: false sets no_new_privs; seccompProfile
// RuntimeDefault gives the container the default profile (Docker's), which
// refuses by default and allows what the capabilities need.
func TestRuntimeSpecConfinement(t *testing.T) {
	iso := Isolation{Userns: "/run/userns", RunDir: "/run/lab"}
	iso.IDs.Base, iso.IDs.Size = 100000, 65536
	for _, tc := range []struct {
		name          string
		c             containerSpec
		nnp, filtered bool
	}{
		{"default", containerSpec{}, false, false},
		{"no escalation", containerSpec{NoNewPrivs: true}, true, false},
		{"RuntimeDefault", containerSpec{Seccomp: true}, false, true},
	} {
		spec := runtimeSpec(tc.c, capNames, iso, "/rootfs", nil)
		if err := withSeccomp(spec, tc.c); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if spec.Process.NoNewPrivileges != tc.nnp {
			t.Errorf("%s: NoNewPrivileges %v", tc.name, spec.Process.NoNewPrivileges)
		}
		if got := spec.Linux.Seccomp != nil; got != tc.filtered {
			t.Fatalf("%s: seccomp %v", tc.name, got)
		}
		if !tc.filtered {
			continue
		}
		sc := spec.Linux.Seccomp
		if sc.DefaultAction != specs.ActErrno || len(sc.Syscalls) == 0 {
			t.Errorf("%s: default action %s, %d rules", tc.name, sc.DefaultAction, len(sc.Syscalls))
		}
		allowed := map[string]bool{}
		for _, r := range sc.Syscalls {
			if r.Action == specs.ActAllow && len(r.Args) == 0 {
				for _, n := range r.Names {
					allowed[n] = true
				}
			}
		}
		for _, n := range []string{"read", "connect", "execve"} {
			if !allowed[n] {
				t.Errorf("%s: %s is not allowed", tc.name, n)
			}
		}
		for _, n := range []string{"io_uring_setup", "kexec_load", "open_by_handle_at"} {
			if allowed[n] {
				t.Errorf("%s: %s is allowed", tc.name, n)
			}
		}
	}
}
