package images

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// System is what building images needs from the machine: commands,
// privileges and the network. It is an interface so that tests can build
// images with a fake debootstrap.
type System interface {
	// IsRoot reports whether the process may debootstrap and chroot.
	IsRoot() bool
	// LookPath finds a command, also in the sbin directories.
	LookPath(name string) (string, error)
	// Run runs a command, writing its output to out.
	Run(ctx context.Context, out io.Writer, name string, args ...string) error
	// Probe checks that url answers (the Debian mirror, before a download).
	Probe(ctx context.Context, url string) error
}

// Host is the real machine.
type Host struct{}

func (Host) IsRoot() bool { return os.Geteuid() == 0 }

func (Host) LookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	// sbin directories are not on every user's PATH.
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
}

func (Host) Run(ctx context.Context, out io.Writer, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 10 * time.Second
	return cmd.Run()
}

func (Host) Probe(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return nil
}
