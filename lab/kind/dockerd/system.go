package dockerd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/svclab/svclab/lab/hostsetup"
)

// Host is the real machine: the docker command line, processes, mounts and
// hostsetup's installer.
type Host struct{}

var _ System = Host{}

func (Host) docker(ctx context.Context, host string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", append([]string{"-H", host}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", errors.New(firstLine(msg))
	}
	return strings.TrimSpace(stdout.String()), nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func (h Host) Ping(ctx context.Context, host string) (string, error) {
	if _, err := exec.LookPath("docker"); err != nil {
		return "", fmt.Errorf("no docker command: %w", err)
	}
	if sock, ok := strings.CutPrefix(host, "unix://"); ok {
		if _, err := os.Stat(sock); err != nil {
			return "", fmt.Errorf("no socket %s", sock)
		}
	}
	v, err := h.docker(ctx, host, "version", "--format", "{{.Server.Version}}")
	if err == nil && v == "" {
		err = errors.New("the daemon gave no version")
	}
	return v, err
}

func (h Host) Containers(ctx context.Context, host string) ([]string, error) {
	out, err := h.docker(ctx, host, "ps", "-aq")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

func (Host) Install(ctx context.Context, out io.Writer) error {
	return hostsetup.EnsureOf(ctx, hostsetup.System{}, out, hostsetup.KindRequirements, false)
}

func (Host) IsRoot() bool { return os.Geteuid() == 0 }

// Start starts argv in a session of its own, so that it outlives svclab
// and a terminal's Ctrl-C does not reach it.
func (Host) Start(argv []string, logPath string) (int, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- %s: %s\n", time.Now().Format(time.RFC3339), strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "PATH="+daemonPath())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	// Reap it if it dies while this process runs; it is not waited for
	// otherwise.
	go cmd.Wait()
	return pid, nil
}

// daemonPath is PATH with the sbin directories, where Debian puts
// docker-proxy's and runc's neighbours.
func daemonPath() string {
	path := os.Getenv("PATH")
	for _, d := range []string{"/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		if !strings.Contains(":"+path+":", ":"+d+":") {
			path += ":" + d
		}
	}
	return strings.TrimPrefix(path, ":")
}

func (Host) Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	// A zombie (dead, not yet reaped) is not alive.
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := bytes.LastIndexByte(data, ')'); i > 0 && i+2 < len(data) && data[i+2] == 'Z' {
			return false
		}
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func (Host) Signal(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }

func (Host) Capabilities() (uint64, int, error) {
	b, err := Bounding()
	if err != nil {
		return 0, 0, err
	}
	last, err := LastCap()
	return b, last, err
}

func (Host) Unmount(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	return unmountBeneath(abs)
}

func (Host) LookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
}
