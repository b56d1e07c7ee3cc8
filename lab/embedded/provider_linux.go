package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded/cgroups"
	"github.com/svclab/svclab/lab/embedded/hostexec"
	"github.com/svclab/svclab/lab/embedded/nodeagent"
	"github.com/svclab/svclab/lab/embedded/userns"
	"github.com/svclab/svclab/lab/images"
	"github.com/svclab/svclab/lab/mounts"
	"github.com/svclab/svclab/lab/proxier/control"
)

// RequiredCommands are the host commands the embedded backend runs.
var RequiredCommands = []string{"ip", "nft", "sysctl", "mkfs.ext4", "mount", "unshare"}

// Preflight checks that this process can create embedded clusters.
func Preflight() error {
	if os.Geteuid() != 0 {
		return errors.New("the embedded backend needs root (it creates network namespaces and firewall rules): run svclab with sudo, or as a user with CAP_SYS_ADMIN and CAP_NET_ADMIN")
	}
	var missing []string
	for _, c := range RequiredCommands {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing system commands %s: run 'go tool task setup' (or apt-get install iproute2 nftables procps)", strings.Join(missing, ", "))
	}
	return nil
}

// Create creates and starts a cluster, reporting each step. On any failure,
// or when ctx is cancelled, everything made so far is removed again.
func (p *Provider) Create(ctx context.Context, opts cluster.CreateOptions) (_ cluster.Cluster, err error) {
	pr := cluster.OrNop(opts.Progress)
	if err := cluster.ValidateName(opts.Name); err != nil {
		return nil, err
	}
	if err := cluster.ValidateProxyMode(opts.ProxyMode); err != nil {
		return nil, err
	}
	if err := Preflight(); err != nil {
		return nil, err
	}
	if err := p.Limits.Validate(); err != nil {
		return nil, fmt.Errorf("the lab's limits: %w", err)
	}
	if err := os.MkdirAll(p.clustersDir(), 0o755); err != nil {
		return nil, fmt.Errorf("the state directory %s is not writable: %w (choose another with --state-dir or %s)", p.StateDir, err, EnvStateDir)
	}
	dir := p.dir(opts.Name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("a cluster named %q exists already: delete it with 'svclab cluster delete --name %s' or choose another --name: %w", opts.Name, opts.Name, cluster.ErrExists)
		}
		return nil, fmt.Errorf("the state directory %s is not writable: %w (choose another with --state-dir or %s)", p.StateDir, err, EnvStateDir)
	}
	// What crashed clusters left (a killed test run, a machine that lost
	// power mid-run) goes before it takes up addresses and bridges.
	if err := p.reclaimAllCrashed(ctx); err != nil {
		p.Log.Warn("could not remove everything crashed clusters left behind", "err", err)
	}
	if left := clusterNetns(opts.Name); len(left) > 0 {
		reclaimed, rerr := p.reclaimCrashed(ctx, opts.Name)
		if !reclaimed || rerr != nil {
			os.Remove(dir)
			if rerr != nil {
				return nil, fmt.Errorf("removing what a crashed cluster %q left behind: %w", opts.Name, rerr)
			}
			return nil, fmt.Errorf("network namespace %s exists already and is in use (a cluster of that name runs from another svclab state directory): delete it there, or choose another --name: %w", left[0], cluster.ErrExists)
		}
	}
	release, recordFabric, err := lockCreation(opts.Name)
	if err != nil {
		os.Remove(dir)
		return nil, err
	}
	defer release()
	var st *State
	defer func() {
		if err == nil {
			return
		}
		// Roll back with a fresh context: ctx may be the one that was
		// cancelled.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		done := pr.Start("Removing the half-created cluster")
		derr := p.destroy(cctx, dir, st)
		done(derr)
	}()
	c := &Cluster{dir: dir}
	var store *images.Store
	actions := []cluster.Action{
		{Name: "Finding svclab-kube " + cluster.KubernetesVersion, Run: func(ctx context.Context) error {
			bin, err := p.KubeBin(ctx, pr)
			if err != nil {
				return err
			}
			st = &State{KubeBin: bin}
			return nil
		}},
		{Name: "Preparing images", Run: func(ctx context.Context) error {
			dir, err := p.imagesDir()
			if err != nil {
				return err
			}
			exe, _ := os.Executable()
			store = images.NewStore(dir, images.Options{SvclabBin: exe, KubeBin: st.KubeBin, Logger: p.Log})
			st.ImagesDir = dir
			return store.Build(ctx, pr)
		}},
		{Name: "Creating the network fabric", Run: func(ctx context.Context) error {
			index, err := createBridge(ctx, p.Runner)
			if err != nil {
				return err
			}
			if err := recordFabric(index); err != nil {
				p.Runner.Run(ctx, nil, "ip", "link", "del", fmt.Sprintf("%s%d", bridgePrefix, index))
				return err
			}
			ns, err := NewState(opts, index)
			if err != nil {
				p.Runner.Run(ctx, nil, "ip", "link", "del", fmt.Sprintf("%s%d", bridgePrefix, index))
				return err
			}
			ns.KubeBin, ns.ImagesDir, ns.Created, ns.Limits = st.KubeBin, st.ImagesDir, time.Now().UTC(), p.Limits
			st = ns
			c.st = st
			// The lab's own ids, recorded before anything is made with
			// them, so that a crash leaves nothing unaccounted for.
			claim, err := p.IDs.Allocate(dir, claimFree)
			if err != nil {
				return err
			}
			st.IDs = &claim
			if err := writeJSON(paths{dir}.state(), st); err != nil {
				return err
			}
			if err := nodeagent.PrepareRunDir(svclabRun, runDir(st.Name)); err != nil {
				return err
			}
			if err := userns.Create(paths{dir}.userns(), claim.Range); err != nil {
				return err
			}
			return fabricUp(ctx, p.Runner, st, paths{dir}.userns())
		}},
		{Name: "Setting the lab's limits", Run: func(context.Context) error {
			// Before any of the lab's processes: they all start under it.
			return applyLimits(st)
		}},
		{Name: "Generating certificates and kubeconfigs", Run: func(context.Context) error {
			return writeControlPlaneFiles(st, dir)
		}},
		{Name: "Making the lab's disk", Run: func(ctx context.Context) error {
			return mountDisk(ctx, p.Runner, paths{dir}, st.Limits.DiskBytes)
		}},
		{Name: "Preparing the nodes' filesystems", Run: func(context.Context) error {
			return prepareNodeContainers(st, dir, store)
		}},
		{Name: "Starting the control-plane supervisor", Run: func(context.Context) error {
			return spawnSupervisor(dir)
		}},
	}
	// The deadline starts with the control plane: building images or
	// svclab-kube before that may take minutes on a cold cache.
	var deadline time.Time
	for _, comp := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		actions = append(actions, cluster.Action{Name: "Starting " + comp, Run: func(ctx context.Context) error {
			if deadline.IsZero() {
				deadline = time.Now().Add(p.ReadyTimeout)
			}
			if err := waitComponent(ctx, dir, comp, deadline); err != nil {
				return err
			}
			if comp != "kube-apiserver" {
				return nil
			}
			client, err := c.Client()
			if err != nil {
				return err
			}
			return nodeAgentRBAC(ctx, client)
		}})
	}
	actions = append(actions,
		cluster.Action{Name: "Starting the node agents", Run: func(ctx context.Context) error {
			return waitComponent(ctx, dir, nodeAgentsName, deadline)
		}},
		cluster.Action{Name: "Waiting for the nodes to be Ready", Run: func(ctx context.Context) error {
			client, err := c.Client()
			if err != nil {
				return err
			}
			if err := waitNodesReady(ctx, client, st, deadline); err != nil {
				return err
			}
			return markNodes(ctx, client, st)
		}},
		cluster.Action{Name: "Installing kube-proxy (the bundled proxier) and CoreDNS", Run: func(ctx context.Context) error {
			client, err := c.Client()
			if err != nil {
				return err
			}
			objs, err := addonObjects(st, dir)
			if err != nil {
				return err
			}
			if err := createObjects(ctx, client, objs); err != nil {
				return err
			}
			return waitAddons(ctx, client, len(st.Nodes), deadline)
		}},
	)
	if err := cluster.RunActions(ctx, pr, actions); err != nil {
		return nil, err
	}
	pr.Infof("kubeconfig: %s", c.KubeconfigPath())
	return c, nil
}

// imagesDir is where pods' images live: $SVCLAB_CACHE_DIR/images or the
// user's cache.
func (p *Provider) imagesDir() (string, error) {
	if p.ImagesDir != "" {
		return p.ImagesDir, nil
	}
	return images.DefaultDir()
}

// writeControlPlaneFiles writes the PKI and the kubeconfigs of st into dir.
func writeControlPlaneFiles(st *State, dir string) error {
	pa := paths{dir}
	_, svcNet, err := net.ParseCIDR(st.ServiceCIDR)
	if err != nil {
		return err
	}
	svcIP := append(net.IP(nil), svcNet.IP.To4()...)
	svcIP[3]++
	now := time.Now()
	pki, err := NewPKI(net.ParseIP(st.API.IP), svcIP, now)
	if err != nil {
		return err
	}
	for _, n := range st.Nodes {
		if err := pki.AddNode(n.Name, net.ParseIP(n.IP), now); err != nil {
			return err
		}
	}
	if err := pki.Write(pa.pki()); err != nil {
		return err
	}
	// The key of the proxiers' teaching hooks: svclab's alone.
	if _, err := control.WriteKeyPair(pa.controlKey()); err != nil {
		return err
	}
	for _, d := range []string{pa.logs(), filepath.Dir(pa.config("x")), pa.nodes()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	kubeconfigs := []struct{ path, user, leaf string }{
		{pa.kubeconfig(), "kubernetes-admin", "admin"},
		{pa.config("controller-manager.conf"), "system:kube-controller-manager", "controller-manager"},
		{pa.config("scheduler.conf"), "system:kube-scheduler", "scheduler"},
	}
	for _, n := range st.Nodes {
		kubeconfigs = append(kubeconfigs, struct{ path, user, leaf string }{pa.config("node-" + n.Name + ".conf"), "system:node:" + n.Name, "node-" + n.Name})
	}
	for _, k := range kubeconfigs {
		b, err := Kubeconfig(st.Name, st.Server(), pki.ServerCA.CertPEM(), k.user, pki.Leaves[k.leaf])
		if err != nil {
			return err
		}
		if err := os.WriteFile(k.path, b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// crashLoopLimit is how many restarts of a component Create tolerates
// before it gives up.
const crashLoopLimit = 3

// waitComponent waits until the supervisor reports comp healthy.
func waitComponent(ctx context.Context, dir, comp string, deadline time.Time) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	pa := paths{dir}
	sawSupervisor := time.Now()
	for {
		var s Status
		if err := readJSON(pa.status(), &s); err == nil {
			if cs, ok := s.Component(comp); ok {
				if cs.EverHealthy {
					return nil
				}
				if cs.Restarts >= crashLoopLimit {
					return fmt.Errorf("%s keeps crashing (%d restarts); last exit: %s (logs: %s)", comp, cs.Restarts, cs.LastExit, pa.logs())
				}
			}
		}
		if _, ok := supervisorPID(dir); ok {
			sawSupervisor = time.Now()
		} else if time.Since(sawSupervisor) > 5*time.Second {
			return fmt.Errorf("the control-plane supervisor is not running: %s", logTail(filepath.Join(pa.logs(), "supervisor.log"), 5))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s was not healthy in time (see %s)", comp, filepath.Join(pa.logs(), comp+".log"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Get returns the cluster called name.
func (p *Provider) Get(_ context.Context, name string) (cluster.Cluster, error) {
	if err := cluster.ValidateName(name); err != nil {
		return nil, err
	}
	dir := p.dir(name)
	st, err := loadState(paths{dir})
	if err != nil {
		if errors.Is(err, cluster.ErrNotFound) {
			return nil, fmt.Errorf("no cluster named %q (see 'svclab cluster list'): %w", name, err)
		}
		return nil, err
	}
	return &Cluster{st: st, dir: dir}, nil
}

// List summarises every cluster in the state directory.
func (p *Provider) List(context.Context) ([]cluster.Summary, error) {
	entries, err := os.ReadDir(p.clustersDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []cluster.Summary
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		out = append(out, p.summary(e.Name()))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (p *Provider) summary(name string) cluster.Summary {
	dir := p.dir(name)
	s := cluster.Summary{Name: name, Backend: BackendName}
	st, err := loadState(paths{dir})
	if errors.Is(err, ErrOldLayout) {
		s.State, s.Detail = "broken", ErrOldLayout.Error()
		return s
	}
	if err != nil {
		s.State, s.Detail = "broken", "its state is missing or damaged; delete it with 'svclab cluster delete --name "+name+"'"
		return s
	}
	s.Server = st.Server()
	if _, ok := supervisorPID(dir); !ok {
		s.State, s.Detail = "stopped", "its supervisor is not running; delete it and create it again"
		return s
	}
	var status Status
	if err := readJSON(paths{dir}.status(), &status); err != nil {
		s.State = "starting"
		return s
	}
	s.State = "running"
	var notes []string
	for _, c := range status.Components {
		if c.State != StateHealthy {
			s.State = "degraded"
			notes = append(notes, fmt.Sprintf("%s %s", c.Name, c.State))
		}
		if c.Restarts > 0 {
			notes = append(notes, fmt.Sprintf("%s restarted %d times", c.Name, c.Restarts))
		}
	}
	u := cgroups.Read(labCgroup(name))
	if u.OOMKills > 0 {
		notes = append(notes, fmt.Sprintf("reached its memory limit %d times", u.OOMKills))
	}
	if u.PidsRefused > 0 {
		notes = append(notes, fmt.Sprintf("reached its process limit (%d refused)", u.PidsRefused))
	}
	if _, err := os.Stat(paths{dir}.storeFull()); err == nil {
		notes = append(notes, fmt.Sprintf("its API objects fill their %s: the API server refuses changes until objects are deleted", size(st.Limits.store())))
	}
	if d := readDisk(paths{dir}); d.Full() {
		notes = append(notes, fmt.Sprintf("its disk (%s) is full", size(d.SizeBytes)))
	}
	s.Detail = strings.Join(notes, "; ")
	return s
}

// Delete stops and removes the cluster called name.
func (p *Provider) Delete(ctx context.Context, name string) error {
	if err := cluster.ValidateName(name); err != nil {
		return err
	}
	dir := p.dir(name)
	st, err := loadState(paths{dir})
	if err != nil && !errors.Is(err, cluster.ErrNotFound) {
		p.Log.Warn("cluster state unreadable; sweeping by name", "cluster", name, "err", err)
	}
	if _, serr := os.Stat(dir); errors.Is(serr, os.ErrNotExist) && len(clusterNetns(name)) == 0 {
		return fmt.Errorf("no cluster named %q (see 'svclab cluster list'): %w", name, cluster.ErrNotFound)
	}
	return p.destroy(ctx, dir, st)
}

// destroy stops the cluster's processes and removes its network and state.
// st may be nil (state unreadable or not yet written): then resources are
// found by name.
func (p *Provider) destroy(ctx context.Context, dir string, st *State) error {
	name := filepath.Base(dir)
	stopSupervisor(dir)
	killAll(markedProcesses(func(d string) bool { return d == dir }), 5*time.Second)
	// Containers run in the cluster's namespaces without the marker;
	// whatever a learner moved out of them is still in the lab's user
	// namespace.
	killAll(processesInNetns(clusterNetns(name)), 5*time.Second)
	killAll(userns.Members(paths{dir}.userns()), 5*time.Second)
	var errs []error
	if err := mounts.DetachMatching(mounts.Below(runDir(name))); err != nil {
		errs = append(errs, err)
	} else {
		os.RemoveAll(runDir(name))
	}
	if err := mounts.DetachMatching(mounts.Below(dir)); err != nil {
		errs = append(errs, err)
	}
	if st == nil {
		st = &State{Name: name}
	}
	// Namespaces that exist but are not in the state (a crash between
	// creating them and saving the state) are swept by name.
	known := map[string]bool{}
	for _, n := range st.Nodes {
		known[n.Netns] = true
	}
	for _, ns := range clusterNetns(name) {
		if !known[ns] {
			st.Nodes = append(st.Nodes, NodeSpec{Netns: ns})
		}
	}
	if fabricHeldByOther(st.Index, name) {
		p.Log.Warn("the cluster's fabric index went to another cluster: leaving the host's link of that index alone", "cluster", name, "index", st.Index)
		st = st.withoutFabricLinks()
	}
	if err := fabricDown(ctx, p.Runner, st); err != nil {
		errs = append(errs, err)
	}
	// The cgroups go once the namespaces have: until then a live view or
	// check of the lab (svclab serve) keeps starting readers in the
	// readers' cgroup, which no new one joins once the namespaces are
	// gone (NodeNetns fails); stop the last of them.
	drainReaders(name)
	if err := removeCgroups(name); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	// The ids go back once nothing made with them is left.
	if st.IDs != nil {
		errs = append(errs, p.IDs.Release(*st.IDs))
	} else {
		errs = append(errs, p.IDs.ReleaseStale(func(c userns.Claim) bool { return c.Owner == dir && staleClaim(c) }))
	}
	return errors.Join(errs...)
}

// claimFree tells whether c's range may be handed out again: its lab is
// gone (staleClaim), or it crashed and nothing of it runs any more (its
// state directory may stay behind; nothing in it can reach another lab).
func claimFree(c userns.Claim) bool {
	if staleClaim(c) {
		return true
	}
	name := filepath.Base(c.Owner)
	return !clusterAlive(name) && len(userns.Members(paths{c.Owner}.userns())) == 0 && len(processesInNetns(clusterNetns(name))) == 0
}

// staleClaim tells whether the lab that claimed c is gone: its state no
// longer records the claim, and no process is creating it.
func staleClaim(c userns.Claim) bool {
	if beingCreated(filepath.Base(c.Owner)) {
		return false
	}
	st, err := loadState(paths{c.Owner})
	return err != nil && errors.Is(err, cluster.ErrNotFound) || err == nil && (st.IDs == nil || st.IDs.Token != c.Token)
}

// hostLinkIn finds the host's link to a cluster (svlbrN) from `ip -o
// link show` in its fabric's namespace (whose bridge has the same name) or
// its control plane's (which holds the link's far end, svlN-cp): "" when
// neither is there.
func hostLinkIn(links string) string {
	for _, l := range strings.Split(links, "\n") {
		m := linkName.FindStringSubmatch(l)
		if m == nil || !svclabLink.MatchString(m[1]) {
			continue
		}
		if strings.HasPrefix(m[1], bridgePrefix) || strings.HasSuffix(m[1], "-cp") {
			return fmt.Sprintf("%s%d", bridgePrefix, linkIndex(m[1]))
		}
	}
	return ""
}

// stopSupervisor asks the supervisor to stop its components and waits for it
// to exit, killing it if it takes too long.
func stopSupervisor(dir string) {
	pid, ok := supervisorPID(dir)
	if !ok {
		return
	}
	syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(stopTimeout + 5*time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if alive(pid) {
		killAll([]int{pid}, 5*time.Second)
	}
}

// clusterNetns lists the network namespaces named like the nodes and Pods
// of cluster name.
func clusterNetns(name string) []string {
	re := regexp.MustCompile("^" + regexp.QuoteMeta(netnsPrefix+name) + `-(control-plane|worker[0-9]*|pod-[0-9a-f]+|lb|api|fabric)$`)
	var out []string
	for _, ns := range listNetns() {
		if re.MatchString(ns) {
			out = append(out, ns)
		}
	}
	return out
}

func listNetns() []string {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// DeleteAll deletes every cluster in the state directory but those keep
// names, then sweeps the host for anything a svclab cluster that is not
// alive left behind: marked processes, svclab-* network namespaces, svlbr*
// bridges and svl*-* veths, and inet svclab-* nft tables.
func (p *Provider) DeleteAll(ctx context.Context, keep func(name string) bool) error {
	var errs []error
	if entries, err := os.ReadDir(p.clustersDir()); err == nil {
		for _, e := range entries {
			if !e.IsDir() || (keep != nil && keep(e.Name())) {
				continue
			}
			dir := p.dir(e.Name())
			st, _ := loadState(paths{dir})
			if err := p.destroy(ctx, dir, st); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", e.Name(), err))
			}
		}
	}
	if err := Sweep(ctx, p.Runner); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Sweep removes what svclab labs left on the host, whichever state
// directory made them — but nothing of a live lab: one whose processes run
// (its supervisor, from any state directory) or that is being created.
// What it removes: processes marked for a cluster whose state is gone,
// the network namespaces, root filesystems, cgroups, bridges, veths, nft
// tables and id ranges of clusters that are not alive.
func Sweep(ctx context.Context, r hostexec.Runner) error {
	live := liveClusters()
	dead := func(name string) bool { return name != "" && !live.names[name] && !beingCreated(name) }
	// A lab lives while its supervisor runs (or while it is created);
	// processes marked for any other are orphans of a crash.
	orphans := markedProcesses(func(d string) bool { return !live.dirs[d] && dead(filepath.Base(d)) })
	killAll(orphans, 5*time.Second)
	var gone []string
	for _, ns := range listNetns() {
		if name := netnsCluster(ns); strings.HasPrefix(ns, netnsPrefix) && dead(name) {
			gone = append(gone, ns)
		}
	}
	killAll(processesInNetns(gone), 5*time.Second)
	var errs []error
	if entries, err := os.ReadDir(runBase); err == nil {
		for _, e := range entries {
			if !dead(e.Name()) {
				continue
			}
			if err := mounts.DetachMatching(mounts.Below(runDir(e.Name()))); err != nil {
				errs = append(errs, err)
			} else {
				os.RemoveAll(runDir(e.Name()))
			}
		}
	}
	if err := mounts.DetachMatching(func(mp string) bool {
		name, ok := pinCluster(mp)
		return ok && dead(name)
	}); err != nil {
		errs = append(errs, err)
	}
	for _, ns := range gone {
		if err := deleteNetns(ctx, r, ns); err != nil {
			errs = append(errs, err)
		}
	}
	if out, err := r.Run(ctx, nil, "ip", "-o", "link", "show"); err == nil {
		for _, l := range leftoverLinks(string(out)) {
			if live.indices[linkIndex(l)] != "" {
				continue
			}
			if err := ignoreMissing(run(ctx, r, "ip", "link", "del", l)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, top := range clusterCgroups("*") {
		if name := filepath.Base(top); dead(name) {
			if err := removeCgroups(name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := userns.DefaultAllocator().ReleaseStale(claimFree); err != nil {
		errs = append(errs, err)
	}
	if out, err := r.Run(ctx, nil, "nft", "list", "tables", "inet"); err == nil {
		for _, t := range leftoverTables(string(out), "inet") {
			if !dead(strings.TrimPrefix(t, firewallTablePrefix)) {
				continue
			}
			if err := ignoreMissing(run(ctx, r, "nft", "delete", "table", "inet", t)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// live are the clusters whose supervisors run, from whichever state
// directory: their directories, names and fabric indexes, each with the
// name of the cluster that holds it (and the indexes of clusters being
// created, which have no supervisor yet).
type live struct {
	dirs    map[string]bool
	names   map[string]bool
	indices map[int]string
}

func liveClusters() live {
	l := live{dirs: map[string]bool{}, names: map[string]bool{}, indices: creatingIndices()}
	for _, d := range markedSupervisors() {
		l.dirs[d], l.names[filepath.Base(d)] = true, true
		if st, _ := loadState(paths{d}); st != nil {
			l.indices[st.Index] = st.Name
		}
	}
	return l
}

// fabricHeldByOther tells whether fabric index is held by a live cluster
// other than name: one that took the index once name's was freed (a
// crashed cluster swept by another process, and deleted later by its
// own). The bridge and host veths of that index are named alike for both
// clusters, and are the other one's.
func fabricHeldByOther(index int, name string) bool {
	owner := liveClusters().indices[index]
	return index > 0 && owner != "" && owner != name
}

// withoutFabricLinks is st without the name of the host's link to it
// (see fabricHeldByOther).
func (st *State) withoutFabricLinks() *State {
	c := *st
	c.Bridge = ""
	return &c
}

// netnsCluster is the cluster a network namespace of svclab's belongs to
// (svclab-NAME-control-plane, -workerN, -pod-HASH, -lb, -api, -fabric), or "".
func netnsCluster(ns string) string {
	rest, ok := strings.CutPrefix(ns, netnsPrefix)
	if !ok {
		return ""
	}
	for _, suffix := range []string{lbSuffix, apiSuffix, fabricSuffix} {
		if name, ok := strings.CutSuffix(rest, suffix); ok && name != "" {
			return name
		}
	}
	for _, sep := range []string{"-pod-", "-control-plane", "-worker"} {
		if i := strings.LastIndex(rest, sep); i > 0 {
			return rest[:i]
		}
	}
	return ""
}

// pinCluster is the cluster of a user namespace pin (…/clusters/NAME/userns)
// or of a pod's own (…/clusters/NAME/nodes/…/userns).
func pinCluster(mp string) (string, bool) {
	_, after, ok := strings.Cut(mp, "/clusters/")
	if !ok || !strings.HasSuffix(mp, "/userns") {
		return "", false
	}
	name, _, _ := strings.Cut(after, "/")
	return name, name != ""
}

// linkIndex is the fabric index of an svclab bridge (svlbrN) or veth
// (svlN-M); 0 for neither.
func linkIndex(l string) int {
	s := strings.TrimPrefix(l, bridgePrefix)
	if s == l {
		s = strings.TrimPrefix(l, "svl")
		s, _, _ = strings.Cut(s, "-")
	}
	n, _ := strconv.Atoi(s)
	return n
}

// markedSupervisors lists the cluster directories whose supervisors run.
func markedSupervisors() []string {
	seen := map[string]bool{}
	markedProcesses(func(d string) bool { seen[d] = true; return false })
	var out []string
	for d := range seen {
		if _, ok := supervisorPID(d); ok {
			out = append(out, d)
		}
	}
	return out
}

var linkName = regexp.MustCompile(`^\d+:\s+([^:@\s]+)`)
var svclabLink = regexp.MustCompile(`^(svlbr\d+|svl\d+-(\d+|lb|api|cp))$`)

// leftoverLinks picks svclab's links out of `ip -o link show`: the host's
// links to control planes (svlbrN and, before it moves, its far end
// svlN-cp), and the bridges and veths older versions put on the host.
func leftoverLinks(out string) []string {
	var links []string
	for _, line := range strings.Split(out, "\n") {
		m := linkName.FindStringSubmatch(line)
		if m != nil && svclabLink.MatchString(m[1]) {
			links = append(links, m[1])
		}
	}
	return links
}

// leftoverTables picks svclab's tables out of `nft list tables FAMILY`.
func leftoverTables(out, family string) []string {
	var tables []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "table" && f[1] == family && strings.HasPrefix(f[2], firewallTablePrefix) {
			tables = append(tables, f[2])
		}
	}
	return tables
}
