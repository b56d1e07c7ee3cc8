package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// nodeInit is the node container's init: it waits, and exits on SIGTERM
// (a plain sleep as PID 1 would ignore it).
var nodeInit = []string{"/bin/sh", "-c", `trap "exit 0" TERM INT; while :; do sleep 3600 & wait $!; done`}

// PrepareNodeContainer writes the bundle of a node's own container: the
// node's filesystem (the tools image under a writable layer that lasts as
// long as the cluster), privileged, in the node's network namespace, with
// the node's hostname. Node shells and node-level commands run in it, so
// they see the node's network and rules but never the host's filesystem or
// processes. The node's agent runs it (see NodeContainer).
func PrepareNodeContainer(bundle string, img Image, netnsPath, hostname string) error {
	r := &runc{}
	return r.prepare(containerSpec{
		Bundle:     bundle,
		Image:      img,
		Args:       nodeInit,
		Env:        append(append([]string(nil), img.Env...), "TERM=xterm-256color", "HOME=/root"),
		Cwd:        "/root",
		Hostname:   hostname,
		Netns:      netnsPath,
		Privileged: true,
	})
}

// NodeContainer is the node's own container (see PrepareNodeContainer),
// which the agent keeps running, detached: like the machine under a
// kubelet, it goes on while the agent is stopped.
type NodeContainer struct {
	RuncRoot, Bundle, ID string
}

// keepNodeContainer starts the node's container unless it runs already
// (an earlier agent started it), and starts it again whenever it ends,
// until ctx ends. It returns once the container runs.
func keepNodeContainer(ctx context.Context, nc NodeContainer, marker, exits string, log *slog.Logger) error {
	r := &runc{root: nc.RuncRoot, marker: marker, exits: exits}
	pid, start, err := r.ensureQuiet(ctx, nc)
	if err != nil {
		return fmt.Errorf("starting the node's container: %w", err)
	}
	go func() {
		for {
			waitExit(pid, start, ctx.Done())
			if ctx.Err() != nil {
				return // the agent stops; the node's container goes on
			}
			code, _ := r.exitCode(pid, start)
			log.Warn("the node's container ended; starting it again", "exitCode", code)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			if pid, start, err = r.ensureQuiet(ctx, nc); err != nil {
				log.Error("starting the node's container", "err", err)
				return
			}
		}
	}()
	return nil
}

// ensureQuiet returns the process of container nc, creating and starting
// it (output discarded) unless it runs.
func (r *runc) ensureQuiet(ctx context.Context, nc NodeContainer) (int, uint64, error) {
	if out, err := r.cmd(ctx, "state", nc.ID).Output(); err == nil {
		var st struct {
			Status string `json:"status"`
			Pid    int    `json:"pid"`
		}
		if json.Unmarshal(out, &st) == nil && st.Status == "running" && st.Pid > 0 {
			if start, err := processStart(st.Pid); err == nil {
				return st.Pid, start, nil
			}
		}
	}
	r.delete(ctx, nc.ID)
	devNull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return 0, 0, err
	}
	defer devNull.Close()
	pidFile, runcLog := filepath.Join(nc.Bundle, "pid"), filepath.Join(nc.Bundle, "runc.log")
	create := r.cmd(ctx, "--log", runcLog, "--log-format", "json", "create", "--bundle", nc.Bundle, "--pid-file", pidFile, nc.ID)
	create.Stdin, create.Stdout, create.Stderr = devNull, devNull, devNull
	if err := create.Run(); err != nil {
		return 0, 0, fmt.Errorf("runc create: %s", runcError(runcLog, err))
	}
	pid, err := readPidFile(pidFile)
	if err != nil {
		return 0, 0, err
	}
	start, err := processStart(pid)
	if err != nil {
		return 0, 0, err
	}
	if err := r.cmd(ctx, "--log", runcLog, "--log-format", "json", "start", nc.ID).Run(); err != nil {
		r.delete(ctx, nc.ID)
		return 0, 0, fmt.Errorf("runc start: %s", runcError(runcLog, err))
	}
	return pid, start, nil
}
