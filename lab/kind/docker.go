package kind

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"

	kindcluster "sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	kindexec "sigs.k8s.io/kind/pkg/exec"
	kindlog "sigs.k8s.io/kind/pkg/log"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/kind/dockerd"
)

// Docker is the real Engine: Docker's command line for the checks, kind's
// library (with its Docker provider) for clusters and nodes.
type Docker struct {
	// Daemon finds the Docker engine, or starts svclab's own (package
	// dockerd); nil leaves it to the docker command (DOCKER_HOST or its
	// default socket).
	Daemon *Daemon
}

// Daemon is the kind backend's Docker engine, found or started once per
// process.
type Daemon struct {
	Options dockerd.Options

	mu sync.Mutex
	d  *dockerd.Daemon
}

// ensure finds or starts the engine and points the docker command line at
// it: kind's library runs "docker" with this process's environment, so
// DOCKER_HOST is how it reaches svclab's own daemon.
func (d *Daemon) ensure(ctx context.Context) error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.d != nil {
		return nil
	}
	daemon, err := dockerd.Ensure(ctx, d.Options)
	if err != nil {
		if errors.Is(err, dockerd.ErrNeedRoot) || errors.Is(err, dockerd.ErrNoOwn) {
			if _, lerr := exec.LookPath("docker"); lerr != nil {
				return fmt.Errorf("%w: no docker command on PATH, and only root can install one", ErrNoDocker)
			}
			return fmt.Errorf("%w: %w", ErrDockerDown, err)
		}
		if errors.Is(err, dockerd.ErrDown) {
			return fmt.Errorf("%w: %w", ErrDockerDown, err)
		}
		return err
	}
	if err := os.Setenv(dockerd.EnvHost, daemon.Host); err != nil {
		return err
	}
	d.d = daemon
	return nil
}

// Host is the engine's address once ensured ("" before).
func (d *Daemon) Host() string {
	if d == nil {
		return ""
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.d == nil {
		return ""
	}
	return d.d.Host
}

// Release ends this process's use of the engine: svclab's own daemon
// stops when nothing uses it and no container is left.
func (d *Daemon) Release(ctx context.Context) error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.d == nil {
		return nil
	}
	err := d.d.Release(ctx)
	d.d = nil
	return err
}

var _ Engine = Docker{}

// installHint says how to get Docker.
const installHint = "install Docker (Debian and Ubuntu: sudo apt-get install docker.io; elsewhere Docker Engine or Docker Desktop)"

// Release removes kind's network when no kind cluster is left, then
// releases the engine (see Daemon.Release).
func (e Docker) Release(ctx context.Context) error {
	if e.Daemon == nil || e.Daemon.Host() == "" {
		return nil // this process did not use the engine
	}
	err := e.removeIdleNetwork(ctx)
	return errors.Join(err, e.Daemon.Release(ctx))
}

// Check finds (or starts) the engine and runs "docker info".
func (e Docker) Check(ctx context.Context) (DockerInfo, error) {
	if err := e.Daemon.ensure(ctx); err != nil {
		return DockerInfo{}, err
	}
	bin, err := exec.LookPath("docker")
	if err != nil {
		return DockerInfo{}, fmt.Errorf("%w: no docker command on PATH", ErrNoDocker)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "info", "--format", "{{json .}}")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	return parseDockerInfo(stdout.Bytes(), stderr.String(), runErr)
}

// parseDockerInfo reads "docker info --format '{{json .}}'": its JSON (with
// ServerErrors when the daemon did not answer) and its standard error.
func parseDockerInfo(stdout []byte, stderr string, runErr error) (DockerInfo, error) {
	var raw struct {
		ServerVersion string
		CgroupVersion string
		ServerErrors  []string
	}
	jsonErr := json.Unmarshal(bytes.TrimSpace(stdout), &raw)
	problems := strings.TrimSpace(stderr + "\n" + strings.Join(raw.ServerErrors, "\n"))
	if runErr == nil && jsonErr == nil && raw.ServerVersion != "" && len(raw.ServerErrors) == 0 {
		if raw.CgroupVersion == "" {
			raw.CgroupVersion = "1" // Docker before 20.10 does not say, and knows only v1
		}
		return DockerInfo{ServerVersion: raw.ServerVersion, CgroupVersion: raw.CgroupVersion}, nil
	}
	low := strings.ToLower(problems)
	switch {
	case strings.Contains(low, "permission denied"):
		return DockerInfo{}, fmt.Errorf("%w: %s", ErrDockerDenied, firstLine(problems))
	case strings.Contains(low, "cannot connect to the docker daemon"), strings.Contains(low, "is the docker daemon running"),
		strings.Contains(low, "no such file or directory"), strings.Contains(low, "connection refused"):
		return DockerInfo{}, fmt.Errorf("%w: %s", ErrDockerDown, firstLine(problems))
	}
	if problems == "" && runErr != nil {
		problems = runErr.Error()
	}
	if problems == "" {
		problems = "docker info said nothing about the daemon"
	}
	return DockerInfo{}, fmt.Errorf("docker info failed: %s", firstLine(problems))
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i])
	}
	return s
}

func provider(log kindlog.Logger) *kindcluster.Provider {
	if log == nil {
		log = kindlog.NoopLogger{}
	}
	return kindcluster.NewProvider(kindcluster.ProviderWithDocker(), kindcluster.ProviderWithLogger(log))
}

// Clusters lists kind's clusters.
func (e Docker) Clusters(ctx context.Context) ([]string, error) {
	if err := e.Daemon.ensure(ctx); err != nil {
		return nil, err
	}
	names, err := provider(nil).List()
	if err != nil {
		return nil, fmt.Errorf("listing kind clusters: %w", runErrorDetail(err))
	}
	return names, nil
}

// Create creates a kind cluster. kind's library takes no context: a
// cancelled ctx is noticed when kind returns.
func (e Docker) Create(ctx context.Context, name string, config []byte, kubeconfig string, log kindlog.Logger) error {
	if kubeconfig == "" {
		return errors.New("kind create: no kubeconfig path (svclab never writes ~/.kube/config)")
	}
	if err := e.Daemon.ensure(ctx); err != nil {
		return err
	}
	err := provider(log).Create(name,
		kindcluster.CreateWithRawConfig(config),
		kindcluster.CreateWithKubeconfigPath(kubeconfig),
		kindcluster.CreateWithDisplayUsage(false),
		kindcluster.CreateWithDisplaySalutation(false),
	)
	if err != nil {
		return runErrorDetail(err)
	}
	return ctx.Err()
}

// Delete deletes a kind cluster, removing it from kubeconfig only.
func (e Docker) Delete(ctx context.Context, name, kubeconfig string) error {
	if kubeconfig == "" {
		return errors.New("kind delete: no kubeconfig path (svclab never writes ~/.kube/config)")
	}
	if err := e.Daemon.ensure(ctx); err != nil {
		return err
	}
	if err := provider(nil).Delete(name, kubeconfig); err != nil {
		return runErrorDetail(err)
	}
	return nil
}

// Nodes lists a cluster's nodes.
func (e Docker) Nodes(ctx context.Context, name string) ([]Node, error) {
	if err := e.Daemon.ensure(ctx); err != nil {
		return nil, err
	}
	list, err := provider(nil).ListNodes(name)
	if err != nil {
		return nil, runErrorDetail(err)
	}
	out := make([]Node, len(list))
	for i, n := range list {
		out[i] = dockerNode{n}
	}
	return out, nil
}

// runErrorDetail adds the output of a failed command to kind's error,
// which only names the command: its last lines, without the Go stack
// trace kubeadm prints after its error at kind's verbosity.
func runErrorDetail(err error) error {
	var re *kindexec.RunError
	if errors.As(err, &re) && len(bytes.TrimSpace(re.Output)) > 0 {
		return fmt.Errorf("%w\n%s", err, tail(withoutStacks(string(re.Output)), 15))
	}
	return err
}

// withoutStacks drops Go stack frames ("function" then "\tfile:line")
// from s.
func withoutStacks(s string) string {
	lines := strings.Split(s, "\n")
	drop := make([]bool, len(lines))
	for i, l := range lines {
		if strings.HasPrefix(l, "\t") && i > 0 {
			drop[i], drop[i-1] = true, true
		}
	}
	var kept []string
	for i, l := range lines {
		if !drop[i] {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "\n")
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

type dockerNode struct{ n nodes.Node }

func (d dockerNode) Name() string          { return d.n.String() }
func (d dockerNode) Role() (string, error) { return d.n.Role() }
func (d dockerNode) IP() (string, error) {
	v4, _, err := d.n.IP()
	return v4, err
}

// Exec runs argv with "docker exec" through kind's node. A command that
// ran and failed gives its *exec.ExitError, so callers see the exit code.
func (d dockerNode) Exec(ctx context.Context, argv []string, stdio cluster.Stdio) error {
	if len(argv) == 0 {
		return errors.New("no command to run")
	}
	cmd := d.n.CommandContext(ctx, argv[0], argv[1:]...)
	if stdio.Stdin != nil {
		cmd.SetStdin(stdio.Stdin)
	}
	cmd.SetStdout(orDiscard(stdio.Stdout)).SetStderr(orDiscard(stdio.Stderr))
	err := cmd.Run()
	var re *kindexec.RunError
	if errors.As(err, &re) {
		var ee *exec.ExitError
		if errors.As(re.Inner, &ee) {
			return fmt.Errorf("%s on %s: %w", argv[0], d.Name(), ee)
		}
		return fmt.Errorf("running %s on %s: %w", argv[0], d.Name(), re.Inner)
	}
	return err
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// LoadImageArchive is kind's loader (ctr images import on the node).
func (d dockerNode) LoadImageArchive(_ context.Context, archive io.Reader) error {
	if err := nodeutils.LoadImageArchive(d.n, archive); err != nil {
		return runErrorDetail(err)
	}
	return nil
}

// SetProgress shows the engine's own steps (svclab's dockerd starting or
// stopping) in p.
func (e Docker) SetProgress(p cluster.Progress) {
	if e.Daemon == nil {
		return
	}
	e.Daemon.mu.Lock()
	e.Daemon.Options.Progress = p
	e.Daemon.mu.Unlock()
}

// kindNetwork is the Docker network kind puts every cluster's nodes on.
const kindNetwork = "kind"

// removeIdleNetwork removes kind's network when no kind cluster is left:
// kind creates it and never removes it. Docker refuses while a container
// is attached, so nobody's nodes lose it.
func (e Docker) removeIdleNetwork(ctx context.Context) error {
	clusters, err := e.Clusters(ctx)
	if err != nil || len(clusters) > 0 {
		return err
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", "network", "rm", kindNetwork)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.ToLower(stderr.String())
		if strings.Contains(msg, "not found") || strings.Contains(msg, "no such network") || strings.Contains(msg, "active endpoints") {
			return nil
		}
		return fmt.Errorf("removing kind's network: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
