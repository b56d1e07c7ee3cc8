package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/embedded"
	"github.com/svclab/svclab/lab/kind"
)

// envOf runs a command under a root with the shared flags and returns the
// env it read.
func envOf(t *testing.T, backend string, args ...string) (*env, error) {
	t.Helper()
	t.Setenv(envBackend, backend)
	got := &env{}
	var gotErr error
	root := &cobra.Command{Use: "svclab", SilenceErrors: true, SilenceUsage: true}
	addSharedFlags(root.PersistentFlags())
	root.AddCommand(&cobra.Command{Use: "sub", RunE: func(cmd *cobra.Command, _ []string) error {
		gotErr = got.read(cmd)
		return nil
	}})
	root.SetArgs(append([]string{"sub"}, args...))
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	return got, gotErr
}

func TestBackend(t *testing.T) {
	machine, _ := machineDefault()
	for _, tc := range []struct {
		name    string
		env     string
		args    []string
		want    string
		given   bool
		wantErr string
	}{
		{name: "machine default", want: machine},
		{name: "flag", args: []string{"--backend", "kind"}, want: kind.BackendName, given: true},
		{name: "environment", env: "kind", want: kind.BackendName, given: true},
		{name: "flag over environment", env: "kind", args: []string{"--backend", "embedded"}, want: embedded.BackendName, given: true},
		{name: "unknown flag value", args: []string{"--backend", "vagrant"}, wantErr: `unknown backend "vagrant": use embedded or kind`},
		{name: "unknown environment value", env: "docker", wantErr: `unknown backend "docker"`},
		{name: "bad log level", args: []string{"--log-level", "loud"}, wantErr: `--log-level "loud"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := envOf(t, tc.env, tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.backend != tc.want || e.backendGiven != tc.given {
				t.Errorf("backend %q (given %v), want %q (given %v)", e.backend, e.backendGiven, tc.want, tc.given)
			}
			p, err := e.provider()
			if err != nil {
				t.Fatal(err)
			}
			switch p.(type) {
			case *embedded.Provider:
				if tc.want != embedded.BackendName {
					t.Errorf("an embedded provider for backend %s", tc.want)
				}
			case *kind.Provider:
				if tc.want != kind.BackendName {
					t.Errorf("a kind provider for backend %s", tc.want)
				}
			default:
				t.Errorf("provider %T", p)
			}
		})
	}
}

func TestSharedFlags(t *testing.T) {
	e, err := envOf(t, "", "--state-dir", "/tmp/x", "--database-url", "postgres://u@h/db", "--lab-pids", "77")
	if err != nil {
		t.Fatal(err)
	}
	if e.stateDir != "/tmp/x" || e.databaseURL != "postgres://u@h/db" || e.limits.Pids != 77 {
		t.Errorf("state dir %q, database %q, pids %d", e.stateDir, e.databaseURL, e.limits.Pids)
	}
	p, err := e.providerOf(embedded.BackendName)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.(*embedded.Provider).Limits.Pids; got != 77 {
		t.Errorf("the embedded provider's pids limit is %d, want 77", got)
	}
}
