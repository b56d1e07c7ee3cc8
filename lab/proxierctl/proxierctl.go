package proxierctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/proxier/config"
	"github.com/svclab/svclab/lab/proxier/control"
	"github.com/svclab/svclab/lab/proxier/events"
	"github.com/svclab/svclab/lab/proxier/faults"
)

// Addr is where the bundled proxier serves its metrics, mode, fault
// switches and syncs, in each node's network namespace.
func Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(config.ProxyStatusPort)) }

// Proxy modes the lab knows.
const (
	ModeNFTables = config.ModeNFTables
	ModeIPTables = config.ModeIPTables
)

// Request sends a request to the proxier on node and returns the answer's
// body; an answer other than 200 is an error. The teaching hooks (/faults,
// /sync) are signed with the cluster's control key when it has one.
func Request(ctx context.Context, c cluster.Cluster, node, method, path string, body []byte) ([]byte, error) {
	base := "http://" + Addr()
	timeout := 5 * time.Second
	if _, ok := c.(cluster.NetnsCluster); !ok {
		// curl on the node: on a kind node that is docker exec and ctr
		// exec first, which take seconds of their own on a busy machine
		// (a 5-second bound killed them mid-request); curl's own -m 5
		// still bounds the request.
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tr, err := cluster.NodeHTTP(c, node)
	if err != nil {
		return nil, err
	}
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()
	if k, ok := c.(control.Keyed); ok && guarded(path) {
		key, err := k.ProxierControlKey()
		if err != nil {
			return nil, err
		}
		return control.Do(ctx, client, key, base, method, path, body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return control.Send(client, req)
}

// guarded tells whether path is a teaching hook the proxier keeps for
// svclab (see package control).
func guarded(path string) bool {
	p, _, _ := strings.Cut(path, "?")
	return p == "/faults" || p == "/sync"
}

// Mode asks the proxier on node which mode it runs in.
func Mode(ctx context.Context, c cluster.Cluster, node string) (string, error) {
	out, err := Request(ctx, c, node, http.MethodGet, "/proxyMode", nil)
	if err != nil {
		return "", fmt.Errorf("asking the proxier on node %s for its mode (is kube-proxy running there?): %w", node, err)
	}
	mode := strings.TrimSpace(string(out))
	if mode != ModeNFTables && mode != ModeIPTables {
		return "", fmt.Errorf("the proxier on node %s runs in mode %q; the lab knows nftables and iptables", node, mode)
	}
	return mode, nil
}

// SetFaults applies patch to the fault switches of the proxier on node.
func SetFaults(ctx context.Context, c cluster.Cluster, node string, patch faults.Patch) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if _, err := Request(ctx, c, node, http.MethodPost, "/faults", body); err != nil {
		return fmt.Errorf("setting the proxier's fault switches %s on node %s (is kube-proxy running there? kubectl -n kube-system get pods -l k8s-app=kube-proxy -o wide): %w", body, node, err)
	}
	return nil
}

// LastSync asks the proxier on node when it last programmed its rules
// (kubeproxy_sync_proxy_rules_last_timestamp_seconds, the latest over the
// IP families); the zero time when it has not yet.
func LastSync(ctx context.Context, c cluster.Cluster, node string) (time.Time, error) {
	out, err := Request(ctx, c, node, http.MethodGet, "/metrics", nil)
	if err != nil {
		return time.Time{}, fmt.Errorf("asking the proxier on node %s for its metrics (is kube-proxy running there?): %w", node, err)
	}
	return lastSync(string(out)), nil
}

// lastSync reads the last sync's time from the proxier's metrics.
func lastSync(metrics string) time.Time {
	const name = "kubeproxy_sync_proxy_rules_last_timestamp_seconds"
	var last float64
	for line := range strings.Lines(metrics) {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		if _, after, found := strings.Cut(rest, "}"); found {
			rest = after
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil && v > last {
			last = v
		}
	}
	if last <= 0 {
		return time.Time{}
	}
	sec, frac := math.Modf(last)
	return time.Unix(int64(sec), int64(frac*1e9))
}

// Programmed asks the proxier on node how far its rules follow the API:
// every Service and EndpointSlice change up to the resourceVersion rv is
// programmed; held names the fault that holds its syncs back, if one does.
// A proxier other than svclab's has no answer (an error). What a lab's
// proxier answers is the lab's to say: it only tells svclab how long to
// wait.
func Programmed(ctx context.Context, c cluster.Cluster, node string) (rv uint64, held string, err error) {
	out, err := Request(ctx, c, node, http.MethodGet, events.ProgrammedPath, nil)
	if err != nil {
		return 0, "", fmt.Errorf("asking the proxier on node %s how far its rules follow the API: %w", node, err)
	}
	var p events.Programmed
	if err := json.Unmarshal(out, &p); err != nil {
		return 0, "", fmt.Errorf("the proxier on node %s answered %s with no state svclab reads: %w", node, events.ProgrammedPath, err)
	}
	if rv, err = strconv.ParseUint(p.ResourceVersion, 10, 64); err != nil {
		return 0, "", fmt.Errorf("the proxier on node %s answered %s with resourceVersion %q, not a number", node, events.ProgrammedPath, p.ResourceVersion)
	}
	return rv, p.Held, nil
}

// Faults reads the fault switches of the proxier on node (svclab's own
// request, signed with the cluster's control key when it has one).
func Faults(ctx context.Context, c cluster.Cluster, node string) (faults.State, error) {
	out, err := Request(ctx, c, node, http.MethodGet, "/faults", nil)
	if err != nil {
		return faults.State{}, fmt.Errorf("reading the fault switches of the proxier on node %s: %w", node, err)
	}
	var st faults.State
	if err := json.Unmarshal(out, &st); err != nil {
		return faults.State{}, fmt.Errorf("the proxier on node %s answered /faults with no state svclab reads: %w", node, err)
	}
	return st, nil
}
