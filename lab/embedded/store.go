//go:build linux

package embedded

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/svclab/svclab/lab/embedded/nsenter"
)

// A lab's API objects take at most its store (Limits.StoreBytes, etcd's
// quota). Past it etcd raises its NOSPACE alarm and refuses every write
// but deletes: the learner's kubectl says "etcdserver: mvcc: database space
// exceeded", and the cluster's controllers can change nothing. etcd stays
// so until an operator compacts, defragments and disarms it; storeGuard is
// that operator. It warns the learner as the store nears its quota (an
// Event, which can still be written then), marks the lab while the store is
// full ('svclab cluster list' says so), and once the learner has deleted
// objects it frees their space and lifts the block.

// storeFull marks a lab whose store is full (see storeGuard).
func (p paths) storeFull() string { return filepath.Join(p.dir, "store-full") }

type storeGuard struct {
	c     *clientv3.Client
	quota int64
	pa    paths
	log   *slog.Logger

	warned   bool
	full     bool
	lastFree time.Time
}

// newStoreGuard connects to the lab's etcd, from inside the control
// plane's network namespace, as the API server's etcd client.
func newStoreGuard(st *State, pa paths, log *slog.Logger) (*storeGuard, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(pa.pki(), "apiserver-etcd-client.crt"), filepath.Join(pa.pki(), "apiserver-etcd-client.key"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(pa.pki(), etcdCAFile+".crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	ns := nsenter.Netns{Path: filepath.Join("/run/netns", st.API.Netns)}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{fmt.Sprintf("https://127.0.0.1:%d", etcdClientPort)},
		TLS:         &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12},
		DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return ns.DialContext(ctx, "tcp", addr)
		})},
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, err
	}
	return &storeGuard{c: c, quota: st.Limits.store(), pa: pa, log: log}, nil
}

func (g *storeGuard) close() { g.c.Close() }

// storeFreeEvery is how often a full store is compacted and defragmented
// to see whether the learner's deletes made room.
const storeFreeEvery = 15 * time.Second

// check looks at the store once; event records an Event for the learner.
func (g *storeGuard) check(ctx context.Context, event func(reason, msg string)) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	ep := g.c.Endpoints()[0]
	status, err := g.c.Status(ctx, ep)
	if err != nil {
		return // etcd restarting: the supervisor sees to it
	}
	alarms, err := g.c.AlarmList(ctx)
	if err != nil {
		return
	}
	var nospace *etcdserverpb.AlarmMember
	for _, a := range alarms.Alarms {
		if a.Alarm == etcdserverpb.AlarmType_NOSPACE {
			nospace = a
		}
	}
	switch {
	case nospace == nil && g.full:
		g.full = false
		os.Remove(g.pa.storeFull())
	case nospace == nil && !g.warned && status.DbSize >= g.quota*9/10:
		g.warned = true
		event("StoreNearlyFull", fmt.Sprintf("The lab's API objects take %d MiB of the %s they may: once they take it all, the API server refuses to create or change anything until objects are deleted. Delete what you no longer need (kubectl delete …).", status.DbSize>>20, size(g.quota)))
	case nospace == nil && status.DbSize < g.quota*8/10:
		g.warned = false
	}
	if nospace == nil {
		return
	}
	if !g.full {
		g.full = true
		os.WriteFile(g.pa.storeFull(), nil, 0o644)
		g.log.Warn("the lab's store is full", "bytes", status.DbSize, "quota", g.quota)
	}
	if time.Since(g.lastFree) < storeFreeEvery {
		return
	}
	g.lastFree = time.Now()
	// What the learner deleted is still in etcd's history until it is
	// compacted, and in its file until it is defragmented.
	if _, err := g.c.Compact(ctx, status.Header.Revision, clientv3.WithCompactPhysical()); err != nil && !errors.Is(err, context.Canceled) {
		g.log.Debug("compacting the full store", "err", err)
	}
	if _, err := g.c.Defragment(ctx, ep); err != nil {
		g.log.Warn("defragmenting the full store", "err", err)
		return
	}
	after, err := g.c.Status(ctx, ep)
	if err != nil || after.DbSize > g.quota*8/10 {
		return
	}
	if _, err := g.c.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: nospace.MemberID, Alarm: etcdserverpb.AlarmType_NOSPACE}); err != nil {
		g.log.Warn("lifting the full store's block", "err", err)
		return
	}
	g.full, g.warned = false, false
	os.Remove(g.pa.storeFull())
	g.log.Info("the lab's store has room again", "bytes", after.DbSize)
	event("StoreFreed", fmt.Sprintf("The lab's API objects had taken all of the %s they may, and the API server refused changes. Objects were deleted and their space freed: the cluster accepts changes again.", size(g.quota)))
}
