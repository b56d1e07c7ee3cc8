//go:build linux

package embedded

import (
	"context"
	"errors"
	"fmt"
	"github.com/svclab/svclab/lab/flock"
	"github.com/svclab/svclab/lab/mounts"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupRoot is the cgroup (the same path in every hierarchy) under which
// every cluster's processes live: svclab/CLUSTER/control-plane, and
// svclab/CLUSTER/nodes/NODE/CONTAINER.
const cgroupRoot = "svclab"

// nodeCgroup is the cgroup of node's containers and commands.
func nodeCgroup(clusterName, node string) string {
	return filepath.Join(nodesCgroup(clusterName), node)
}

// removeCgroups removes the cgroups of cluster name's containers in every
// hierarchy, deepest first. runc removes a container's cgroup only when the container is
// deleted, which a cluster's removal does not do one by one. Pass "" for
// every cluster's.
func removeCgroups(name string) error {
	deadline := time.Now().Add(cgroupDrainTimeout)
	var errs []error
	for _, top := range clusterCgroups(name) {
		var dirs []string
		filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		// Children before their parents.
		slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
		for _, d := range dirs {
			if err := rmdirCgroup(d, deadline); err != nil {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
		if name != "" {
			syscall.Rmdir(filepath.Dir(top)) // svclab itself, once no cluster is left
		}
	}
	return errors.Join(errs...)
}

// cgroupDrainTimeout bounds the wait for killed processes to leave their
// cgroups: a dead process stays in its cgroup until it is reaped, and
// the containers of a removed cluster are reaped by the host's init, in
// its own time.
const cgroupDrainTimeout = 10 * time.Second

// rmdirCgroup removes cgroup dir, waiting (until deadline) while it still
// holds processes that are being reaped; a missing dir is fine.
func rmdirCgroup(dir string, deadline time.Time) error {
	for {
		err := syscall.Rmdir(dir)
		switch {
		case err == nil, errors.Is(err, syscall.ENOENT):
			return nil
		case !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline):
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clusterCgroups lists cluster name's cgroup in every hierarchy (cgroup v1
// mounts each controller apart; v2 has one); "" lists svclab's.
func clusterCgroups(name string) []string {
	var out []string
	for _, pattern := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/*"} {
		m, _ := filepath.Glob(filepath.Join(pattern, cgroupRoot, name))
		out = append(out, m...)
	}
	return out
}

// lockCreation marks cluster name as being created by this process until
// release: between its first network namespace and its supervisor no
// process carries the cluster's marker, and a crashed cluster is told from
// one being made by this lock (an flock, which the kernel drops when its
// holder dies). fabric records in the lock the fabric index the cluster took,
// so that a Sweep in another process spares its bridge and veths, which no
// supervisor claims yet (creatingIndices).
func lockCreation(name string) (release func(), fabric func(index int) error, err error) {
	if err := os.MkdirAll(creationLockDir, 0o700); err != nil {
		return nil, nil, err
	}
	f, err := flock.TryLock(filepath.Join(creationLockDir, name+".lock"), 0o600)
	if errors.Is(err, flock.ErrLocked) {
		return nil, nil, fmt.Errorf("another svclab process is creating a cluster named %q: %w", name, err)
	}
	if err != nil {
		return nil, nil, err
	}
	release = func() {
		os.Remove(f.Name())
		f.Close()
	}
	fabric = func(index int) error {
		if _, err := f.WriteAt([]byte(strconv.Itoa(index)), 0); err != nil {
			return fmt.Errorf("recording the fabric index in the creation lock: %w", err)
		}
		return nil
	}
	return release, fabric, nil
}

// creatingIndices are the fabric indices of the clusters being created
// (their creation locks held), from whichever state directory, with the
// name of the cluster each is for.
func creatingIndices() map[int]string {
	out := map[int]string{}
	entries, err := os.ReadDir(creationLockDir)
	if err != nil {
		return out
	}
	for _, e := range entries {
		path := filepath.Join(creationLockDir, e.Name())
		name, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok || !flock.Held(path) {
			continue
		}
		if b, err := os.ReadFile(path); err == nil {
			if i, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				out[i] = name
			}
		}
	}
	return out
}

// creationLockDir holds the creation locks; /run empties at boot.
const creationLockDir = svclabRun + "/creating"

// beingCreated tells whether a process holds cluster name's creation lock.
func beingCreated(name string) bool {
	return flock.Held(filepath.Join(creationLockDir, name+".lock"))
}

// clusterAlive tells whether cluster name is running or being created, from
// whichever state directory: a process carries its marker, or holds its
// creation lock.
func clusterAlive(name string) bool {
	return beingCreated(name) || len(markedProcesses(func(d string) bool { return filepath.Base(d) == name })) > 0
}

// reclaimCrashed removes what a crashed cluster called name left on the
// host — Pods' containers still running in its network namespaces, the
// namespaces, the root filesystems mounted under its state directory, its
// containers' cgroups, its bridge and its nft table — when it is not
// alive, in whichever state directory it was made. It reports false, and
// touches nothing, while it is.
func (p *Provider) reclaimCrashed(ctx context.Context, name string) (bool, error) {
	if clusterAlive(name) {
		return false, nil
	}
	netns := clusterNetns(name)
	st := &State{Name: name}
	for _, ns := range netns {
		st.Nodes = append(st.Nodes, NodeSpec{Netns: ns})
	}
	for _, ns := range []string{st.FabricNetns(), netnsPrefix + name + apiSuffix} {
		if out, err := p.Runner.Run(ctx, nil, "ip", "-n", ns, "-o", "link", "show"); err == nil && st.Bridge == "" {
			st.Bridge = hostLinkIn(string(out))
		}
	}
	if fabricHeldByOther(linkIndex(st.Bridge), name) {
		st = st.withoutFabricLinks()
	}
	p.Log.Warn("removing what a crashed cluster left behind", "cluster", name, "netns", len(netns), "bridge", st.Bridge)
	killAll(processesInNetns(netns), 5*time.Second)
	errs := []error{
		mounts.DetachMatching(mounts.Below(runDir(name))),
		mounts.DetachMatching(func(mp string) bool { return strings.Contains(mp, "/clusters/"+name+"/") }),
		removeCgroups(name),
		fabricDown(ctx, p.Runner, st),
	}
	os.RemoveAll(runDir(name))
	return true, errors.Join(errs...)
}

// reclaimAllCrashed reclaims every crashed cluster on the host (see
// reclaimCrashed) but those of this provider's state directory, which
// 'svclab cluster list' shows and 'svclab cluster delete' removes: a
// cluster is known by its nft table, made with its network.
func (p *Provider) reclaimAllCrashed(ctx context.Context) error {
	out, err := p.Runner.Run(ctx, nil, "nft", "list", "tables", "inet")
	if err != nil {
		return nil // nothing to go by; Preflight has checked nft
	}
	live := map[string]bool{}
	markedProcesses(func(d string) bool { live[filepath.Base(d)] = true; return false })
	var errs []error
	for _, t := range leftoverTables(string(out), "inet") {
		name := strings.TrimPrefix(t, firewallTablePrefix)
		if live[name] {
			continue
		}
		if _, err := os.Stat(p.dir(name)); err == nil {
			continue
		}
		if _, err := p.reclaimCrashed(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
