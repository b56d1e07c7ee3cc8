//go:build linux

package nodeagent

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"

	usernspkg "github.com/svclab/svclab/lab/embedded/userns"
)

// execOutput runs a command with stdin and returns its combined output,
// with the output in the error.
func execOutput(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
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

// Runner runs host commands; the seam for tests of the network code.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) error
	// RunInput runs a command with stdin (ip -batch -).
	RunInput(ctx context.Context, stdin string, name string, args ...string) error
	// NewNetns creates network namespace name (under /run/netns) owned
	// by the user namespace pinned at userns.
	NewNetns(ctx context.Context, userns, name string) error
}

type execRunner struct{}

func (execRunner) NewNetns(ctx context.Context, userns, name string) error {
	return usernspkg.NewNetns(ctx, userns, name)
}

func (execRunner) Run(ctx context.Context, name string, args ...string) error {
	_, err := execOutput(ctx, nil, name, args...)
	return err
}

func (execRunner) RunInput(ctx context.Context, stdin string, name string, args ...string) error {
	_, err := execOutput(ctx, []byte(stdin), name, args...)
	return err
}
