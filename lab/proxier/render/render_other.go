//go:build !linux

package render

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"

	v1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/proxier/model"
)

// renderNFTables refuses: the nftables renderer is built on knftables,
// which builds on Linux only (package nftables). This stub lets svclab
// build elsewhere (macOS, with the kind backend), where the iptables mode
// renders as everywhere.
func renderNFTables(context.Context, *slog.Logger, Options, v1.IPFamily, net.IP, *model.NodePortAddresses, []net.IP, *model.Snapshot, io.Writer) error {
	return fmt.Errorf("the nftables mode renders on Linux only (knftables builds there only): use --mode iptables on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
