package cmdenv

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded"
	"github.com/svclab/svclab/lab/kind"
	"github.com/svclab/svclab/lab/store"
)

// EnvBackend names the backend when --backend is not given.
const EnvBackend = "SVCLAB_BACKEND"

// Backends are the cluster backends, in the order commands that find a
// cluster by name try them.
var Backends = []string{embedded.BackendName, kind.BackendName}

// Names of the root command's persistent flags.
const (
	flagStateDir    = "state-dir"
	flagDatabaseURL = "database-url"
	flagLogLevel    = "log-level"
	flagBackend     = "backend"
)

// AddFlags registers the flags every command shares on the root command's
// persistent flags.
func AddFlags(fs *pflag.FlagSet) {
	fs.String(flagStateDir, embedded.DefaultStateDir(), "where svclab keeps its clusters' state (env "+embedded.EnvStateDir+")")
	fs.String(flagDatabaseURL, os.Getenv(store.EnvDatabaseURL),
		"keep learners, attempts and classes in this PostgreSQL database (postgres://USER:PASSWORD@HOST:PORT/DATABASE) instead of svclab.db in the state directory (env "+store.EnvDatabaseURL+")")
	fs.String(flagLogLevel, "info", "log level: debug, info, warn or error")
	fs.String(flagBackend, "", "cluster backend: embedded or kind (env "+EnvBackend+"; default: embedded where it can run, on Linux as root, kind elsewhere)")
	limits := embedded.DefaultLimits()
	limits.AddFlags(fs)
}

// Env is what a command takes from the shared flags.
type Env struct {
	StateDir    string
	DatabaseURL string
	Log         *slog.Logger
	Limits      embedded.Limits
	// Backend is the backend given by --backend or SVCLAB_BACKEND, or
	// chosen for the machine.
	Backend string
	// BackendGiven says the user named the backend; commands that find a
	// cluster by name look on every backend otherwise.
	BackendGiven bool
	// whyNotEmbedded is why the machine's default is not embedded.
	whyNotEmbedded error
}

// Of reads the shared flags of cmd (which are its root's persistent
// flags; a flag that is not there has its default).
func Of(cmd *cobra.Command) (*Env, error) {
	value := func(name, def string) (string, bool) {
		if f := cmd.Flag(name); f != nil {
			return f.Value.String(), f.Changed
		}
		return def, false
	}
	e := &Env{}
	e.StateDir, _ = value(flagStateDir, embedded.DefaultStateDir())
	if e.StateDir == "" {
		e.StateDir = embedded.DefaultStateDir()
	}
	e.DatabaseURL, _ = value(flagDatabaseURL, os.Getenv(store.EnvDatabaseURL))
	levelText, _ := value(flagLogLevel, "info")
	var level slog.Level
	if err := level.UnmarshalText([]byte(levelText)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", levelText)
	}
	e.Log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
	e.Limits = embedded.LimitsFromFlags(cmd.Flag)
	b, given := value(flagBackend, "")
	if b == "" {
		b, given = os.Getenv(EnvBackend), os.Getenv(EnvBackend) != ""
	}
	if b == "" {
		b, e.whyNotEmbedded = machineDefault()
	}
	if err := valid(b); err != nil {
		return nil, err
	}
	e.Backend, e.BackendGiven = b, given
	return e, nil
}

// valid checks a backend's name.
func valid(name string) error {
	if !slices.Contains(Backends, name) {
		return fmt.Errorf("unknown backend %q: use %s", name, strings.Join(Backends, " or "))
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

// Provider is the provider of the chosen backend.
func (e *Env) Provider() (cluster.Provider, error) {
	p, err := e.ProviderOf(e.Backend)
	if err != nil {
		return nil, err
	}
	if e.whyNotEmbedded != nil && runtime.GOOS == "linux" {
		// On Linux a user may expect the embedded backend (and just
		// forgot sudo): say once why kind it is.
		e.Log.Info("using the kind backend: the embedded backend cannot run here (--backend chooses)", "why", e.whyNotEmbedded)
	}
	return p, nil
}

// ProviderOf is the provider of backend name.
func (e *Env) ProviderOf(name string) (cluster.Provider, error) {
	switch name {
	case embedded.BackendName:
		p := embedded.New(e.StateDir, e.Log)
		p.Limits = e.Limits
		return p, nil
	case kind.BackendName:
		return kind.New(e.StateDir, e.Log), nil
	}
	return nil, valid(name)
}
