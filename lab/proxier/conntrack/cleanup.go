package conntrack

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/proxier/model"
)

// Result describes one reconciliation.
type Result struct {
	// Deleted is the number of flows deleted.
	Deleted int
	// Stale are the flows that were selected for deletion.
	Stale []*netlink.ConntrackFlow
	// Duration is how long the reconciliation took.
	Duration time.Duration
}

func familyOf(f v1.IPFamily) uint8 {
	if f == v1.IPv6Protocol {
		return unix.AF_INET6
	}
	return unix.AF_INET
}

// CleanStaleEntries reconciles the UDP conntrack entries of snap's family
// with the serving endpoints in snap, as kube-proxy v1.37 does after a
// sync. A partial dump (EINTR) is used as far as it goes; other errors are
// returned (and the caller logs them; upstream never fails a sync for
// this).
func CleanStaleEntries(ctx context.Context, logger *slog.Logger, ct Interface, snap *model.Snapshot) (Result, error) {
	start := time.Now()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	family := familyOf(snap.Family)
	logger.DebugContext(ctx, "started to reconcile conntrack entries", "ipFamily", snap.Family)

	entries, err := ct.ListEntries(family)
	if err != nil {
		if !errors.Is(err, unix.EINTR) {
			return Result{Duration: time.Since(start)}, err
		}
		logger.InfoContext(ctx, "received a partial conntrack dump, continuing to clean with the partial result", "err", err)
	}

	serviceIPEndpoints := map[string]map[string]bool{}
	serviceNodePortEndpoints := map[int]map[string]bool{}
	for _, sp := range snap.Ports {
		if sp.Protocol != v1.ProtocolUDP {
			continue
		}
		serving := map[string]bool{}
		for _, ep := range sp.Endpoints {
			if ep.Serving {
				serving[ep.String()] = true
			}
		}
		// Since v1.37 (#139629) an IP frontend without serving endpoints
		// is cleaned as well: every flow to it is stale.
		port := strconv.Itoa(sp.Port)
		serviceIPEndpoints[net.JoinHostPort(sp.ClusterIP.String(), port)] = serving
		for _, ip := range sp.LoadBalancerVIPs {
			serviceIPEndpoints[net.JoinHostPort(ip.String(), port)] = serving
		}
		for _, ip := range sp.ExternalIPs {
			serviceIPEndpoints[net.JoinHostPort(ip.String(), port)] = serving
		}
		// ...but a NodePort without serving endpoints is still skipped.
		if sp.NodePort != 0 && len(serving) > 0 {
			serviceNodePortEndpoints[sp.NodePort] = serving
		}
	}

	var stale []*netlink.ConntrackFlow
	for _, entry := range entries {
		udp, origDst, replySrc, dstPort := udpFlow(entry)
		if !udp {
			continue
		}
		if eps, ok := serviceIPEndpoints[origDst]; ok && !eps[replySrc] {
			stale = append(stale, entry)
			continue
		}
		if eps, ok := serviceNodePortEndpoints[dstPort]; ok && !eps[replySrc] {
			stale = append(stale, entry)
			continue
		}
	}

	n, err := ct.DeleteEntries(family, stale)
	res := Result{Deleted: n, Stale: stale, Duration: time.Since(start)}
	if err != nil {
		logger.ErrorContext(ctx, "failed to clear all conntrack entries", "ipFamily", snap.Family, "entriesDeleted", n, "took", res.Duration, "err", err)
		return res, err
	}
	logger.DebugContext(ctx, "finished reconciling conntrack entries", "ipFamily", snap.Family, "entriesDeleted", n, "took", res.Duration)
	return res, nil
}
