package kind

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/svclab/svclab/lab/cluster"
)

// Each node of a svclab kind cluster runs a tools container: the lab's
// tools image (nft, iptables, conntrack, tcpdump, curl, dig, ...) in the
// node's network namespace, privileged, with the node's /run (the xtables
// lock) and /lib/modules — what an embedded node's node container is.
// NodeExec runs commands there, so graders, faults and node shells find the
// same tools on both backends; kind's node image has no nft. It runs under
// containerd directly (ctr, namespace k8s.io, where the images are), not as
// a pod, so it is not among the learner's pods.
const (
	// NodeToolsContainer is the tools container's containerd name.
	NodeToolsContainer = "svclab-node"
	ctrNamespace       = "k8s.io"
)

// nodeToolsScript (re)starts a node's tools container.
var nodeToolsScript = strings.Join([]string{
	"ctr -n " + ctrNamespace + " task kill -s SIGKILL " + NodeToolsContainer + " >/dev/null 2>&1 || true",
	"ctr -n " + ctrNamespace + " task delete -f " + NodeToolsContainer + " >/dev/null 2>&1 || true",
	"ctr -n " + ctrNamespace + " container delete " + NodeToolsContainer + " >/dev/null 2>&1 || true",
	"exec ctr -n " + ctrNamespace + " run -d --privileged --net-host" +
		" --mount type=bind,src=/run,dst=/run,options=rbind:rw" +
		" --mount type=bind,src=/lib/modules,dst=/lib/modules,options=rbind:ro" +
		" docker.io/" + NodeToolsImage + " " + NodeToolsContainer + " sleep infinity",
}, "\n")

// startNodeTools (re)starts the tools container on every node.
func (c *Cluster) startNodeTools(ctx context.Context) error {
	list, err := c.engine.Nodes(ctx, c.name)
	if err != nil {
		return err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, n := range list {
		if role, _ := n.Role(); role != string(cluster.RoleControlPlane) && role != string(cluster.RoleWorker) {
			continue
		}
		wg.Go(func() {
			var stderr bytes.Buffer
			if err := n.Exec(ctx, []string{"sh", "-c", nodeToolsScript}, cluster.Stdio{Stderr: &stderr}); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("starting the tools container on node %s: %w: %s", n.Name(), err, strings.TrimSpace(stderr.String())))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// inNodeTools wraps cmd to run in a node's tools container.
func inNodeTools(cmd []string) []string {
	b := make([]byte, 6)
	rand.Read(b)
	return append([]string{"ctr", "-n", ctrNamespace, "task", "exec", "--exec-id", "svclab-" + hex.EncodeToString(b), NodeToolsContainer}, cmd...)
}
