package hostsetup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Requirement is a command svclab runs and the Debian package that has it.
type Requirement struct {
	Command string
	Package string
	// Why says what svclab uses it for.
	Why string
}

// Requirements lists what the lab needs on the host.
var Requirements = []Requirement{
	{"ip", "iproute2", "network namespaces, veths and bridges for embedded nodes"},
	{"nft", "nftables", "the proxier's nftables mode and cluster isolation"},
	{"iptables", "iptables", "the proxier's iptables mode"},
	{"conntrack", "conntrack", "inspecting connection tracking on nodes"},
	{"runc", "runc", "running pod containers"},
	{"nsenter", "util-linux", "running commands on embedded nodes (in the node container's namespaces)"},
	{"sysctl", "procps", "node kernel settings"},
	{"mkfs.ext4", "e2fsprogs", "each embedded lab's disk of its own (an ext4 filesystem of the lab's size)"},
	{"modprobe", "kmod", "loading kernel modules"},
	{"debootstrap", "debootstrap", "building the Debian root filesystem pods and node shells run from"},
	{"chromium", "chromium", "the browser tests of the web UI (chromedp drives it)"},
	{"postgres", "postgresql", "PostgreSQL: the tests of lab/store and lab/class run a throwaway server (svclab itself only needs it with --database-url)"},
}

// KindRequirements are what the kind backend needs on top of Requirements
// when no Docker daemon runs: Debian's Docker engine, which svclab then
// runs as a daemon of its own (package lab/kind/dockerd). svclab setup
// --kind installs them, and so does the kind backend, as root, when it
// needs an engine.
var KindRequirements = []Requirement{
	{"dockerd", "docker.io", "a Docker engine of svclab's own for the kind backend, when no Docker daemon runs"},
	{"containerd", "containerd", "dockerd's container supervisor"},
	{"runc", "runc", "running dockerd's containers"},
}

// Host is what setup needs to know about the machine, behind an interface
// for tests.
type Host interface {
	LookPath(cmd string) error
	IsRoot() bool
	IsDebian() bool
	Run(ctx context.Context, out io.Writer, name string, args ...string) error
}

// Missing returns the requirements whose command is not found.
func Missing(h Host) []Requirement { return MissingOf(h, Requirements) }

// MissingOf returns those of reqs whose command is not found.
func MissingOf(h Host, reqs []Requirement) []Requirement {
	var out []Requirement
	for _, r := range reqs {
		if h.LookPath(r.Command) != nil {
			out = append(out, r)
		}
	}
	return out
}

func packages(reqs []Requirement) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range reqs {
		if !seen[r.Package] {
			seen[r.Package] = true
			out = append(out, r.Package)
		}
	}
	return out
}

// ErrMissing is returned when packages are missing and cannot be
// installed here.
var ErrMissing = errors.New("missing system packages")

// Ensure installs what is missing (as root on Debian) or returns an error
// that says exactly what to install. With checkOnly it never installs.
func Ensure(ctx context.Context, h Host, out io.Writer, checkOnly bool) error {
	return EnsureOf(ctx, h, out, Requirements, checkOnly)
}

// EnsureOf is Ensure for the requirements reqs.
func EnsureOf(ctx context.Context, h Host, out io.Writer, reqs []Requirement, checkOnly bool) error {
	missing := MissingOf(h, reqs)
	if len(missing) == 0 {
		fmt.Fprintln(out, "setup: all system packages are present")
		return nil
	}
	pkgs := packages(missing)
	install := "apt-get install -y " + strings.Join(pkgs, " ")
	var lines []string
	for _, r := range missing {
		lines = append(lines, fmt.Sprintf("  %s (package %s): %s", r.Command, r.Package, r.Why))
	}
	detail := strings.Join(lines, "\n")
	if checkOnly || !h.IsRoot() || !h.IsDebian() {
		how := "sudo " + install
		if !h.IsDebian() {
			how = "install the equivalents of the Debian packages " + strings.Join(pkgs, ", ") + " with your distribution's package manager"
		}
		return fmt.Errorf("%w:\n%s\nInstall them with: %s", ErrMissing, detail, how)
	}
	fmt.Fprintf(out, "setup: installing %s\n%s\n", strings.Join(pkgs, " "), detail)
	if err := h.Run(ctx, out, "apt-get", "update", "-qq"); err != nil {
		return fmt.Errorf("apt-get update: %w", err)
	}
	args := append([]string{"install", "-y", "-qq", "--no-install-recommends"}, pkgs...)
	if err := h.Run(ctx, out, "apt-get", args...); err != nil {
		return fmt.Errorf("%s: %w", install, err)
	}
	if still := MissingOf(h, reqs); len(still) > 0 {
		return fmt.Errorf("%w after installing: %s", ErrMissing, strings.Join(packages(still), " "))
	}
	return nil
}

// System is the real host.
type System struct{}

func (System) LookPath(cmd string) error {
	if _, err := exec.LookPath(cmd); err == nil {
		return nil
	}
	// sbin directories are not on every user's PATH; Debian keeps the
	// PostgreSQL server's binaries in a directory per major version.
	for _, pattern := range []string{"/usr/sbin", "/sbin", "/usr/lib/postgresql/*/bin"} {
		dirs, _ := filepath.Glob(pattern)
		for _, d := range dirs {
			if fi, err := os.Stat(filepath.Join(d, cmd)); err == nil && !fi.IsDir() {
				return nil
			}
		}
	}
	return exec.ErrNotFound
}

func (System) IsRoot() bool { return os.Geteuid() == 0 }

func (System) IsDebian() bool {
	_, err := os.Stat("/etc/debian_version")
	if err != nil {
		return false
	}
	_, err = exec.LookPath("apt-get")
	return err == nil
}

func (System) Run(ctx context.Context, out io.Writer, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	cmd.Stdout, cmd.Stderr = out, out
	return cmd.Run()
}
