package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svclab/svclab/internal/pgtest"
	"github.com/svclab/svclab/lab/cluster/owner"
	"github.com/svclab/svclab/lab/cmdenv"
	"github.com/svclab/svclab/lab/embedded"
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
	root := NewRoot(&out, &out)
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
		{[]string{"exercise", "run", "--backend", "vagrant", "selector-typo"}, `unknown backend "vagrant"`},
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

func TestParseNodeLabels(t *testing.T) {
	got, err := parseNodeLabels([]string{"lab-worker:topology.kubernetes.io/zone=a", "lab-worker:x=", "lab-worker2:k=v=w"})
	if err != nil {
		t.Fatal(err)
	}
	if got["lab-worker"]["topology.kubernetes.io/zone"] != "a" || got["lab-worker"]["x"] != "" || got["lab-worker2"]["k"] != "v=w" {
		t.Errorf("got %v", got)
	}
	for _, bad := range []string{"", "a", ":k=v", "n:=v", "n:k"} {
		if _, err := parseNodeLabels([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

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
		o := &options{env: &cmdenv.Env{}}
		name, rest, err := splitNameFlag(tc.in, o)
		if err != nil || name != tc.name || strings.Join(rest, " ") != tc.rest || o.env.StateDir != tc.stateDir {
			t.Errorf("splitNameFlag(%q) = %q %q %q %v", tc.in, name, rest, o.env.StateDir, err)
		}
	}
}

func TestClusterCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
	if err := embedded.Preflight(); err != nil {
		t.Skipf("end-to-end test: %v", err)
	}
	state := t.TempDir()
	b := make([]byte, 3)
	rand.Read(b)
	name := "cli-" + hex.EncodeToString(b)
	out, err := runCLI(t, "cluster", "create", "--name", name, "--nodes", "2", "--state-dir", state)
	t.Cleanup(func() { runCLI(t, "cluster", "delete", "--name", name, "--state-dir", state) })
	if err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	for _, want := range []string{"✓ Starting kube-apiserver", "is ready", "export KUBECONFIG="} {
		if !strings.Contains(out, want) {
			t.Errorf("create output lacks %q:\n%s", want, out)
		}
	}
	out, err = runCLI(t, "cluster", "list", "--state-dir", state)
	if err != nil || !strings.Contains(out, name) || !strings.Contains(out, "running") {
		t.Errorf("list: %v\n%s", err, out)
	}
	out, err = runCLI(t, "cluster", "kubeconfig", "--name", name, "--state-dir", state)
	if err != nil || !strings.Contains(out, "certificate-authority-data") || !strings.Contains(out, "client-certificate-data") {
		t.Errorf("kubeconfig: %v\n%s", err, out)
	}
	out, err = runCLI(t, "cluster", "create", "--name", name, "--state-dir", state)
	if err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("duplicate create: %v\n%s", err, out)
	}
	// Another process holds the cluster (as an exercise run does while it
	// runs): delete refuses it, --all keeps it, list says who holds it.
	owners, err := owner.New(owner.Options{Command: "svclab exercise run"})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := owners.Acquire(context.Background(), owner.Claim{Backend: "embedded", Cluster: name}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	holder := fmt.Sprintf("svclab exercise run (pid %d)", os.Getpid())
	out, err = runCLI(t, "cluster", "delete", "--name", name, "--state-dir", state)
	if err == nil || !strings.Contains(err.Error(), "cluster "+name+" is in use by "+holder) || !strings.Contains(err.Error(), "--force") {
		t.Errorf("delete of a cluster in use: %v\n%s", err, out)
	}
	out, err = runCLI(t, "cluster", "list", "--state-dir", state)
	if err != nil || !strings.Contains(out, "IN USE BY") || !strings.Contains(out, holder) {
		t.Errorf("list of a cluster in use: %v\n%s", err, out)
	}
	out, err = runCLI(t, "cluster", "delete", "--all", "--state-dir", state)
	if err != nil || !strings.Contains(out, "Kept (--force deletes them too):") || !strings.Contains(out, name) {
		t.Errorf("delete --all beside a cluster in use: %v\n%s", err, out)
	}
	out, _ = runCLI(t, "cluster", "list", "--state-dir", state)
	if !strings.Contains(out, "running") {
		t.Errorf("the cluster in use after delete --all:\n%s", out)
	}
	out, err = runCLI(t, "cluster", "delete", "--name", name, "--force", "--state-dir", state)
	if err != nil || !strings.Contains(out, "Deleted cluster") {
		t.Errorf("delete --force: %v\n%s", err, out)
	}
	out, _ = runCLI(t, "cluster", "list", "--state-dir", state)
	if !strings.Contains(out, "No clusters.") {
		t.Errorf("list after delete:\n%s", out)
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
