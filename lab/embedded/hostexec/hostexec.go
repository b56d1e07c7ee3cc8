package hostexec

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"

	"github.com/svclab/svclab/lab/embedded/userns"
)

// Runner runs the host's programs.
type Runner interface {
	// Run runs name with args, stdin as its input when not nil, and
	// returns its combined output; a failure carries the output.
	Run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error)
	// NewNetns creates network namespace name (under /run/netns) owned
	// by the user namespace pinned at owner.
	NewNetns(ctx context.Context, owner, name string) error
}

// Exec is the Runner of the host.
type Exec struct{}

var _ Runner = Exec{}

// Run runs the host's program name.
func (Exec) Run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// NewNetns creates the network namespace (package userns).
func (Exec) NewNetns(ctx context.Context, owner, name string) error {
	return userns.NewNetns(ctx, owner, name)
}
