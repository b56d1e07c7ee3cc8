//go:build linux

package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/svclab/svclab/lab/embedded/cgroups"
)

// nodeInit is the node container's init: it waits, and exits on SIGTERM
// (a plain sleep as PID 1 would ignore it).
var nodeInit = []string{"/bin/sh", "-c", `trap "exit 0" TERM INT; while :; do sleep 3600 & wait $!; done`}

// PrepareNodeContainer writes the bundle of node's own container nc and
// mounts its filesystem: the tools image under a writable layer that lasts
// as long as the cluster, privileged in the lab's user namespace iso (root
// over the node, nothing beyond it), in the node's network namespace, with
// the node's hostname. Node shells and node-level commands run in it, so
// they see the node's network and rules but never the host's filesystem or
// processes; hostPath volumes of the node's Pods are inside its filesystem.
// The node's agent runs it (see NodeContainer). Its cgroup is under
// cgroupParent (see Config.CgroupParent).
func PrepareNodeContainer(nc NodeContainer, img Image, netnsPath, node, cgroupParent string, iso Isolation) error {
	r := &runc{cgroupParent: cgroupParent, iso: iso, node: node}
	return r.prepare(containerSpec{
		ID:         nc.ID,
		Bundle:     nc.Bundle,
		Image:      img,
		Args:       nodeInit,
		Env:        append(append([]string(nil), img.Env...), "TERM=xterm-256color", "HOME=/root"),
		Cwd:        "/root",
		Hostname:   node,
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

// Command returns a command that runs argv in the node's container as
// `runc exec` would — in its namespaces (the lab's user namespace first),
// root and working directory, with its environment and privileges (the
// container is privileged in the lab and has no seccomp profile) — but
// entered with nsenter from
// the container's first process: a fork and an exec instead of a runc
// process, a tenth of the CPU (the live views run a command on every node
// of a lab every second). It fails when the container is not running.
func (nc NodeContainer) Command(ctx context.Context, argv []string) (*exec.Cmd, error) {
	pid, err := nc.initPID()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(nc.Bundle, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("reading the node container's spec: %w", err)
	}
	var spec struct {
		Process struct {
			Env []string `json:"env"`
		} `json:"process"`
	}
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, fmt.Errorf("reading the node container's spec: %w", err)
	}
	// The command joins the node container's cgroups first, and so the
	// lab's limits (see package cgroups): a shell's fork bomb counts
	// against the lab, not the host. A host shell moves itself there and
	// then becomes nsenter.
	procs, err := cgroups.ProcsFiles(pid)
	if err != nil {
		return nil, fmt.Errorf("the node container's cgroups: %w", err)
	}
	args := append([]string{"-c", joinCgroups, "sh"}, procs...)
	args = append(append(args, "--", "nsenter", "--target", strconv.Itoa(pid), "--user", "--mount", "--uts", "--ipc", "--net", "--pid", "--root", "--wd", "--"), argv...)
	cmd := exec.CommandContext(ctx, "/bin/sh", args...)
	cmd.Env = spec.Process.Env
	return cmd, nil
}

// joinCgroups writes the shell's PID into each cgroup.procs file it is
// given up to "--", then runs the rest; a cgroup it cannot join stops it
// (exit 125) rather than letting the command run outside the lab's limits.
const joinCgroups = `for f; do shift; [ "$f" = -- ] && break; echo $$ > "$f" || { echo "svclab: cannot join $f" >&2; exit 125; }; done; exec "$@"`

// initPID reads the node container's first process from runc's state,
// checking its start time so that a recycled PID is never entered.
func (nc NodeContainer) initPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(nc.RuncRoot, nc.ID, "state.json"))
	if err != nil {
		return 0, fmt.Errorf("the node's container is not running: %w", err)
	}
	var st struct {
		Pid   int    `json:"init_process_pid"`
		Start uint64 `json:"init_process_start"`
	}
	if err := json.Unmarshal(b, &st); err != nil || st.Pid <= 0 {
		return 0, fmt.Errorf("reading the state of the node's container: %v", err)
	}
	if !processAlive(st.Pid, st.Start) {
		return 0, fmt.Errorf("the node's container is not running (its process %d has ended)", st.Pid)
	}
	return st.Pid, nil
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
