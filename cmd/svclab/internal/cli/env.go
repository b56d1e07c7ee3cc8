package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/svclab/svclab/lab/attempt"
	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/owner"
	"github.com/svclab/svclab/lab/embedded"
	"github.com/svclab/svclab/lab/kind"
	"github.com/svclab/svclab/lab/kind/dockerd"
	"github.com/svclab/svclab/lab/store"
)

// envBackend names the backend when --backend is not given.
const envBackend = "SVCLAB_BACKEND"

// backends are the cluster backends, in the order commands that find a
// cluster by name try them.
func backends() []string { return []string{embedded.BackendName, kind.BackendName} }

// Names of the root command's persistent flags.
const (
	flagStateDir    = "state-dir"
	flagDatabaseURL = "database-url"
	flagLogLevel    = "log-level"
	flagBackend     = "backend"
)

// addSharedFlags registers the flags every command shares on the root
// command's persistent flags.
func addSharedFlags(fs *pflag.FlagSet) {
	fs.String(flagStateDir, embedded.DefaultStateDir(), "where svclab keeps its clusters' state (env "+embedded.EnvStateDir+")")
	fs.String(flagDatabaseURL, os.Getenv(store.EnvDatabaseURL),
		"keep learners, attempts and classes in this PostgreSQL database (postgres://USER:PASSWORD@HOST:PORT/DATABASE) instead of svclab.db in the state directory (env "+store.EnvDatabaseURL+")")
	fs.String(flagLogLevel, "info", "log level: debug, info, warn or error")
	fs.String(flagBackend, "", "cluster backend: embedded or kind (env "+envBackend+"; default: embedded where it can run, on Linux as root, kind elsewhere)")
	limits := embedded.DefaultLimits()
	limits.AddFlags(fs)
}

// env is what every command shares: the outputs, and the shared flags,
// read once by the root command before any command runs (read).
type env struct {
	out, errOut io.Writer

	stateDir    string
	databaseURL string
	log         *slog.Logger
	limits      embedded.Limits
	// backend is the backend given by --backend or SVCLAB_BACKEND, or
	// chosen for the machine.
	backend string
	// backendGiven says the user named the backend; commands that find a
	// cluster by name look on every backend otherwise.
	backendGiven bool
	// whyNotEmbedded is why the machine's default is not embedded.
	whyNotEmbedded error
}

// read reads the shared flags of cmd (which are its root's persistent
// flags; a flag that is not there has its default).
func (e *env) read(cmd *cobra.Command) error {
	value := func(name, def string) (string, bool) {
		if f := cmd.Flag(name); f != nil {
			return f.Value.String(), f.Changed
		}
		return def, false
	}
	e.stateDir, _ = value(flagStateDir, embedded.DefaultStateDir())
	if e.stateDir == "" {
		e.stateDir = embedded.DefaultStateDir()
	}
	e.databaseURL, _ = value(flagDatabaseURL, os.Getenv(store.EnvDatabaseURL))
	levelText, _ := value(flagLogLevel, "info")
	var level slog.Level
	if err := level.UnmarshalText([]byte(levelText)); err != nil {
		return fmt.Errorf("--log-level %q: use debug, info, warn or error", levelText)
	}
	e.log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
	e.limits = embedded.LimitsFromFlags(cmd.Flag)
	b, given := value(flagBackend, "")
	if b == "" {
		b, given = os.Getenv(envBackend), os.Getenv(envBackend) != ""
	}
	if b == "" {
		b, e.whyNotEmbedded = machineDefault()
	}
	if err := valid(b); err != nil {
		return err
	}
	e.backend, e.backendGiven = b, given
	return nil
}

// valid checks a backend's name.
func valid(name string) error {
	if !slices.Contains(backends(), name) {
		return fmt.Errorf("unknown backend %q: use %s", name, strings.Join(backends(), " or "))
	}
	return nil
}

// machineDefault is the backend that fits this machine: embedded where
// it can run, else kind, with the reason embedded cannot.
func machineDefault() (string, error) {
	if err := embedded.Preflight(); err != nil {
		return kind.BackendName, err
	}
	return embedded.BackendName, nil
}

// provider is the provider of the chosen backend.
func (e *env) provider() (cluster.Provider, error) {
	p, err := e.providerOf(e.backend)
	if err != nil {
		return nil, err
	}
	if e.whyNotEmbedded != nil && runtime.GOOS == "linux" {
		// On Linux a user may expect the embedded backend (and just
		// forgot sudo): say once why kind it is.
		e.log.Info("using the kind backend: the embedded backend cannot run here (--backend chooses)", "why", e.whyNotEmbedded)
	}
	return p, nil
}

// providerOf is the provider of backend name.
func (e *env) providerOf(name string) (cluster.Provider, error) {
	switch name {
	case embedded.BackendName:
		p := embedded.New(e.stateDir, e.log)
		p.Limits = e.limits
		return p, nil
	case kind.BackendName:
		return kind.New(e.stateDir, e.log), nil
	}
	return nil, valid(name)
}

// engineOptions are the kind backend's Docker engine options: the
// environment's DOCKER_HOST, progress on the command's output.
func (e *env) engineOptions() dockerd.Options {
	return dockerd.Options{Env: os.Getenv(dockerd.EnvHost), NoOwn: os.Getenv(dockerd.EnvOwn) == "no", Progress: cluster.NewTextProgress(e.out), Log: e.log}
}

// owners is the machine's record of which process or attempt holds which
// cluster, with cmd as this process's name in its claims.
func (e *env) owners(cmd *cobra.Command) (*owner.Registry, error) {
	return owner.New(owner.Options{Command: cmd.CommandPath(), StateDir: e.stateDir})
}

// backendsToSearch are the backends where commands look for a cluster by
// name: the one --backend (or SVCLAB_BACKEND) names, else every one.
func (e *env) backendsToSearch() []string {
	if e.backendGiven {
		return []string{e.backend}
	}
	return backends()
}

// findCluster returns the cluster called name from whichever backend has
// it (or the one --backend names), so that kubectl and node commands work
// on kind clusters too.
func (e *env) findCluster(ctx context.Context, name string) (cluster.Cluster, error) {
	var first error
	for _, b := range e.backendsToSearch() {
		p, err := e.providerOf(b)
		if err != nil {
			return nil, err
		}
		c, err := p.Get(ctx, name)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, cluster.ErrNotFound) {
			return nil, err
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// attempts are what the commands on attempts share: the backend's
// provider, the learners' store (the state directory's database, or
// --database-url's), the machine's record of who holds which cluster, and
// a Manager of attempts on them.
type attempts struct {
	provider cluster.Provider
	store    *store.Store
	owners   *owner.Registry
	manager  *attempt.Manager
}

// openAttempts opens the store and a Manager for cmd; takeOver lets it
// take clusters that others hold (--force). close closes the store.
func (e *env) openAttempts(cmd *cobra.Command, takeOver bool) (*attempts, error) {
	p, err := e.provider()
	if err != nil {
		return nil, err
	}
	st, err := store.Open(cmd.Context(), store.Location(e.stateDir, e.databaseURL), store.Options{Log: e.log})
	if err != nil {
		return nil, err
	}
	owners, err := e.owners(cmd)
	if err != nil {
		st.Close()
		return nil, err
	}
	m, err := attempt.New(attempt.Options{Store: st, Provider: p, Log: e.log, StateDir: e.stateDir, Owners: owners, TakeOver: takeOver})
	if err != nil {
		st.Close()
		return nil, err
	}
	return &attempts{provider: p, store: st, owners: owners, manager: m}, nil
}

func (a *attempts) close() error { return a.store.Close() }
