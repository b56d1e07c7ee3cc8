package embedded

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"

	usernspkg "github.com/svclab/svclab/lab/embedded/userns"
)

// Runner runs a system command (ip, nft, ...) and returns its combined
// output. It is the seam between the fabric logic and the host.
type Runner interface {
	Run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error)
	// NewNetns creates network namespace name (under /run/netns) owned
	// by the user namespace pinned at userns.
	NewNetns(ctx context.Context, userns, name string) error
}

// ExecRunner runs commands on the host.
type ExecRunner struct{}

func (ExecRunner) NewNetns(ctx context.Context, userns, name string) error {
	return usernspkg.NewNetns(ctx, userns, name)
}

func (ExecRunner) Run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
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
