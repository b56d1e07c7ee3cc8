//go:build linux

package embedded

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded/netpol"
)

var _ cluster.PolicyCluster = (*Cluster)(nil)

// policyWait is how long WaitPolicy waits for the slowest node.
const policyWait = 30 * time.Second

// WaitPolicy returns once every node's NetworkPolicy agent has enforced
// the Pods and Namespaces up to the given resource versions: it asks the
// node agents' process, on its socket in the state directory (nothing of
// the lab's can answer in its place).
func (c *Cluster) WaitPolicy(ctx context.Context, pods, namespaces string) error {
	client := socketClient(paths{c.dir}.agentsSocket())
	defer client.CloseIdleConnections()
	synced := func(node string) (netpol.Synced, error) {
		var s netpol.Synced
		resp, err := client.Get("http://node-agents" + policyPath + "?node=" + url.QueryEscape(node))
		if err != nil {
			return s, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return s, fmt.Errorf("the node agents answered %s", resp.Status)
		}
		return s, json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&s)
	}
	deadline := time.Now().Add(policyWait)
	for _, n := range c.st.Nodes {
		for {
			s, err := synced(n.Name)
			if err == nil && reached(s.Pods, pods) && reached(s.Namespaces, namespaces) {
				break
			}
			if time.Now().After(deadline) {
				if err != nil {
					return fmt.Errorf("asking node %s's NetworkPolicy agent how far it has got: %w", n.Name, err)
				}
				return fmt.Errorf("node %s's NetworkPolicy agent has not taken in the latest Pods within %s (it enforces Pods up to version %q, Namespaces up to %q)", n.Name, policyWait, s.Pods, s.Namespaces)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// socketClient asks one of the cluster's processes over its Unix socket in
// the state directory, where nothing of the lab's can answer in its place.
func socketClient(sock string) *http.Client {
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

// reached tells whether resource version have is want or later. Versions
// are etcd revisions here (kube-apiserver's storage); an empty want is
// reached by anything, and a version that is no number reaches nothing.
func reached(have, want string) bool {
	if want == "" {
		return true
	}
	h, err1 := strconv.ParseUint(have, 10, 64)
	w, err2 := strconv.ParseUint(want, 10, 64)
	return err1 == nil && err2 == nil && h >= w
}
