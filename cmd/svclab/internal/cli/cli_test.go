package cli

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svclab/svclab/internal/pgtest"
	"github.com/svclab/svclab/lab/roles"
	"github.com/svclab/svclab/lab/store"
)

func TestMain(m *testing.M) {
	roles.Dispatch()
	os.Exit(pgtest.Main(m))
}

// runCLI runs svclab's command line in this process. svclab never
// installs or starts a Docker engine of its own here (SVCLAB_OWN_DOCKER=no):
// the kind backend's tests of the real engine are lab/kind's end-to-end
// tests.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	t.Setenv("SVCLAB_OWN_DOCKER", "no")
	var out bytes.Buffer
	root := newRoot(&out, &out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestBadInvocations(t *testing.T) {
	state := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cluster", "create", "--bogus"}, "unknown flag: --bogus (see 'svclab cluster create --help')"},
		{[]string{"cluster", "create", "--name", "Bad_Name"}, "is not valid"},
		{[]string{"cluster", "create", "--node-label", "nocolon"}, "use NODE:KEY=VALUE"},
		{[]string{"cluster", "create", "--backend", "vagrant"}, `unknown backend "vagrant"`},
		{[]string{"--backend", "vagrant", "serve"}, `unknown backend "vagrant"`},
		{[]string{"--backend", "kind", "serve", "--classes"}, "classes run on the embedded backend only"},
		{[]string{"exercise", "run", "--backend", "vagrant", "selector-typo"}, `unknown backend "vagrant"`},
		{[]string{"scenario", "test", "--mode", "ipvs", "selector-typo"}, `proxy mode "ipvs": give nftables or iptables`},
		{[]string{"scenario", "test", "--wrong-fixes-from", "/nonexistent/attempts.yaml", "selector-typo"}, "--wrong-fixes-from: open /nonexistent/attempts.yaml: no such file or directory"},
		{[]string{"scenario", "test", "--wrong-fixes-from", "testdata/attempts-bad.yaml", "selector-typo"}, `testdata/attempts-bad.yaml:5: scenarios.selector-typo.wrongFixes[0].rejectedBy[0]: no check has the id "nope"`},
		{[]string{"scenario", "test", "--all", "selector-typo"}, "name scenarios or pass --all, not both"},
		{[]string{"scenario", "list", "--backend", "vagrant"}, `unknown backend "vagrant"`},
		{[]string{"class", "list", "--backend", "vagrant"}, `unknown backend "vagrant"`},
		{[]string{"cluster", "create", "--nodes", "0"}, "at least 1 node"},
		{[]string{"cluster", "create", "--proxy-mode", "ipvs"}, "no IPVS"},
		{[]string{"cluster", "create", "--proxy-mode", "userspace"}, `unknown proxy mode "userspace"`},
		{[]string{"cluster", "delete"}, "pass either --name NAME or --all"},
		{[]string{"cluster", "delete", "--name", "x", "--all"}, "pass either --name NAME or --all"},
		{[]string{"cluster", "delete", "--name", "nope"}, `no cluster named "nope"`},
		{[]string{"cluster", "kubeconfig", "--name", "nope"}, `no cluster named "nope"`},
		{[]string{"cluster", "list", "extra"}, `unknown command "extra"`},
		{[]string{"kubectl", "--name"}, "--name needs a value"},
		{[]string{"kubectl", "--name", "nope", "get", "pods"}, `no cluster named "nope"`},
		{[]string{"proxier", "render", "--mode", "ipvs", "-f", "-"}, `unknown mode "ipvs"`},
		{[]string{"scenario", "check", "selector-typo"}, "you have not started scenario selector-typo"},
		{[]string{"scenario", "hint", "selector-typo", "--learner", "ann"}, "you have not started scenario selector-typo"},
		{[]string{"scenario", "history"}, "accepts 1 arg(s), received 0"},
		{[]string{"scenario", "start", "selector-typo", "--cluster", "Bad_Name"}, "is not valid"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := runCLI(t, append([]string{"--state-dir", state}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v (output %q), want %q", err, out, tc.want)
			}
		})
	}
}

// --database-url (or SVCLAB_DATABASE_URL) puts everything the commands
// store in that PostgreSQL database — the learner's progress (lab/store)
// and the classes (lab/class) — and nothing in the state directory.
func TestDatabaseURL(t *testing.T) {
	for _, how := range []string{"flag", "env"} {
		t.Run(how, func(t *testing.T) {
			url := pgtest.Shared(t).NewDatabase(t)
			state := t.TempDir()
			run := func(args ...string) string {
				t.Helper()
				args = append([]string{"--state-dir", state}, args...)
				if how == "flag" {
					args = append([]string{"--database-url", url}, args...)
				} else {
					t.Setenv(store.EnvDatabaseURL, url)
				}
				out, err := runCLI(t, args...)
				if err != nil {
					t.Fatalf("svclab %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				return out
			}
			run("scenario", "status")
			run("class", "create", "--name", "pg-"+how, "--scenarios", "selector-typo")
			if out := run("class", "list"); !strings.Contains(out, "pg-"+how) {
				t.Errorf("class list: %s", out)
			}
			if _, err := os.Stat(filepath.Join(state, store.FileName)); !os.IsNotExist(err) {
				t.Errorf("%s in the state directory: %v", store.FileName, err)
			}
			// Both packages' migrations ran there.
			db, err := sql.Open("pgx", url)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var storeV, classV int
			if err := db.QueryRow(`SELECT (SELECT MAX(version) FROM schema_migrations), (SELECT MAX(version) FROM class_schema_migrations)`).Scan(&storeV, &classV); err != nil || storeV != store.SchemaVersion() || classV < 1 {
				t.Errorf("schema versions in PostgreSQL: store %d, class %d, %v", storeV, classV, err)
			}
		})
	}
}
