//go:build !linux

package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/proxier/config"
)

// Run refuses: the proxier programs Linux's netfilter (nftables, iptables,
// conntrack), and knftables builds on Linux only. This stub lets svclab
// build elsewhere (macOS, where svclab runs the kind backend: its nodes
// are Linux and run the proxier themselves); "svclab proxier run" keeps
// its flags and help there.
func Run(ctx context.Context, cmd *cobra.Command, opts *config.Options, extra *Extra, logOut io.Writer) error {
	return fmt.Errorf("the proxier programs Linux's nftables or iptables, not %s's: run it on a Linux node (a kind cluster's nodes run it already): %w", runtime.GOOS, errors.ErrUnsupported)
}
