//go:build linux

package embedded

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/svclab/svclab/lab/embedded/cgroups"
	"github.com/svclab/svclab/lab/embedded/nodeagent"
	"github.com/svclab/svclab/lab/embedded/nsenter"
)

// labOOMScoreAdj is the oom_score_adj of what svclab starts for the lab's
// nodes — the node agents, whose containers inherit it, and the load
// balancer — where the control plane keeps 0: at the lab's memory limit
// the kernel stops the lab's Pods and shells before etcd and the
// Kubernetes components. (Raising a score needs no privilege; lowering
// one needs CAP_SYS_RESOURCE, which root lacks on this project's hosts,
// and which the lab never has, so it cannot undo this.)
const labOOMScoreAdj = 500

// Component states recorded in status.json.
const (
	StateStarting   = "starting"
	StateHealthy    = "healthy"
	StateUnhealthy  = "unhealthy"
	StateRestarting = "restarting"
	StateStopped    = "stopped"
)

// ComponentStatus is the supervisor's view of one component.
type ComponentStatus struct {
	Name     string    `json:"name"`
	PID      int       `json:"pid,omitempty"`
	State    string    `json:"state"`
	Since    time.Time `json:"since"`
	Restarts int       `json:"restarts"`
	// LastExit describes the last time the process ended on its own.
	LastExit     string    `json:"lastExit,omitempty"`
	LastExitTime time.Time `json:"lastExitTime,omitzero"`
	// EverHealthy is true once the component has passed its health check.
	EverHealthy bool `json:"everHealthy"`
}

// Status is what the supervisor writes to status.json on every change.
type Status struct {
	SupervisorPID int               `json:"supervisorPID"`
	Updated       time.Time         `json:"updated"`
	Components    []ComponentStatus `json:"components"`
}

// Component returns the status of the component called name.
func (s Status) Component(name string) (ComponentStatus, bool) {
	for _, c := range s.Components {
		if c.Name == name {
			return c, true
		}
	}
	return ComponentStatus{}, false
}

// EnvClusterDir marks every process svclab starts for a cluster with the
// cluster's state directory, so that a sweep after a crash can find them.
const EnvClusterDir = "SVCLAB_CLUSTER_DIR"

// spawnSupervisor starts the supervisor of the cluster in dir as a daemon in
// its own session, so it outlives the command that created the cluster.
func spawnSupervisor(dir string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding svclab's own executable: %w", err)
	}
	// What the supervisor prints itself (a crash's stack) goes beside its
	// log, which it rotates.
	logf, err := os.OpenFile(filepath.Join(paths{dir}.logs(), "supervisor.stderr"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := &exec.Cmd{
		Path:        exe,
		Args:        []string{SupervisorArg0, dir},
		Env:         append(os.Environ(), EnvClusterDir+"="+dir),
		Stdout:      logf,
		Stderr:      logf,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the supervisor: %w", err)
	}
	go cmd.Wait() // reap it if it exits while we still run
	return nil
}

func runSupervisor(dir string) int {
	p := paths{dir}
	logf, err := openRotatingLog(filepath.Join(p.logs(), "supervisor.log"), componentLogMaxBytes, componentLogFiles)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer logf.Close()
	log := slog.New(slog.NewTextHandler(logf, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	signal.Ignore(syscall.SIGHUP)
	st, err := loadState(p)
	if err != nil {
		log.Error("cannot read the cluster state", "err", err)
		return 1
	}
	// The control plane is the lab's to load: it runs within the lab's
	// limits, in a cgroup of its own below the lab's, and so does every
	// process started from here.
	if err := cgroups.Join(controlPlaneCgroup(st.Name), os.Getpid()); err != nil {
		log.Error("joining the lab's cgroup", "err", err)
		return 1
	}
	if err := os.WriteFile(p.supervisorPID(), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		log.Error("cannot write the pid file", "err", err)
		return 1
	}
	s := newSupervisor(st, dir, log)
	if err := s.run(ctx); err != nil {
		log.Error("supervisor failed", "err", err)
		return 1
	}
	log.Info("supervisor stopped")
	return 0
}

type supervisor struct {
	st   *State
	dir  string
	log  *slog.Logger
	comp []Component

	mu     sync.Mutex
	status Status

	// pidsMu guards pids, the components' processes, which the orphan
	// reaper leaves to their exec.Cmd.
	pidsMu sync.Mutex
	pids   map[int]bool
}

func newSupervisor(st *State, dir string, log *slog.Logger) *supervisor {
	s := &supervisor{st: st, dir: dir, log: log, comp: Components(st, dir), pids: map[int]bool{}}
	s.status.SupervisorPID = os.Getpid()
	for _, c := range s.comp {
		s.status.Components = append(s.status.Components, ComponentStatus{Name: c.Name, State: StateStopped, Since: time.Now()})
	}
	return s
}

func (s *supervisor) update(name string, f func(*ComponentStatus)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.status.Components {
		if s.status.Components[i].Name == name {
			f(&s.status.Components[i])
		}
	}
	s.status.Updated = time.Now()
	if err := writeJSON(paths{s.dir}.status(), s.status); err != nil {
		s.log.Error("writing status", "err", err)
	}
}

func (s *supervisor) healthy(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, _ := s.status.Component(name)
	return c.EverHealthy
}

// run starts the components in order, each once the component it comes
// after has been healthy, keeps them running, and stops them in reverse order when ctx
// ends.
func (s *supervisor) run(ctx context.Context) error {
	clients, err := s.healthClients()
	if err != nil {
		return err
	}
	// Containers outlive a node agent that dies, and pass to us.
	if err := nodeagent.SetSubreaper(); err != nil {
		return fmt.Errorf("becoming the containers' reaper: %w", err)
	}
	go s.reapOrphans(ctx)
	var wg sync.WaitGroup
	procs := make([]*process, len(s.comp))
	for i, c := range s.comp {
		if c.After != "" && !s.waitHealthy(ctx, c.After) {
			break
		}
		procs[i] = &process{s: s, c: c, health: clients[c.Name]}
		wg.Add(1)
		go func() { defer wg.Done(); procs[i].loop(ctx) }()
	}
	<-ctx.Done()
	for i := len(procs) - 1; i >= 0; i-- {
		if procs[i] != nil {
			procs[i].stop()
		}
	}
	wg.Wait()
	return nil
}

// reapOrphans reaps the containers of dead node agents as they end,
// recording their exit codes for the agents that adopt them.
func (s *supervisor) reapOrphans(ctx context.Context) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	ours := func(pid int) bool {
		s.pidsMu.Lock()
		defer s.pidsMu.Unlock()
		return s.pids[pid]
	}
	for {
		if err := nodeagent.ReapOrphans(paths{s.dir}.exits(), ours); err != nil {
			s.log.Error("reaping containers of a stopped node agent", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-sigs:
		case <-time.After(10 * time.Second):
		}
	}
}

func (s *supervisor) waitHealthy(ctx context.Context, name string) bool {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !s.healthy(name) {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// Health checks run every healthInterval once a component is healthy, on a
// connection kept for healthIdleTimeout.
const (
	healthInterval    = 5 * time.Second
	healthIdleTimeout = 3 * healthInterval
)

// healthClients builds one HTTPS client per component, trusting the CA that
// signed its serving certificate and presenting its health client
// certificate, that connects from inside the control plane's network
// namespace.
func (s *supervisor) healthClients() (map[string]*http.Client, error) {
	pki := paths{s.dir}.pki()
	ns := nsenter.Netns{Path: filepath.Join("/run/netns", s.st.API.Netns)}
	out := map[string]*http.Client{}
	for _, c := range s.comp {
		if c.Health == "" {
			continue
		}
		if c.HealthSocket != "" {
			sock := c.HealthSocket
			out[c.Name] = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{IdleConnTimeout: healthIdleTimeout,
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, "unix", sock)
				}}}
			continue
		}
		caPEM, err := os.ReadFile(filepath.Join(pki, c.HealthCA+".crt"))
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		if c.HealthCert != "" {
			cert, err := tls.LoadX509KeyPair(filepath.Join(pki, c.HealthCert+".crt"), filepath.Join(pki, c.HealthCert+".key"))
			if err != nil {
				return nil, err
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		// One connection kept open between checks: a TLS handshake per
		// check cost the supervisor and the component more CPU than
		// everything else an idle lab does but the API server.
		out[c.Name] = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, IdleConnTimeout: healthIdleTimeout, DialContext: ns.DialContext}}
	}
	return out, nil
}

// process runs one component and restarts it with backoff when it exits.
type process struct {
	s      *supervisor
	c      Component
	health *http.Client
	// log is the component's log, kept across its restarts.
	log *rotatingLog

	mu      sync.Mutex
	cmd     *exec.Cmd
	stopped bool
	exited  chan struct{}
}

const (
	minBackoff = time.Second
	maxBackoff = 30 * time.Second
	// stableAfter resets the backoff: a process that ran this long before
	// crashing is restarted quickly again.
	stableAfter = time.Minute
	stopTimeout = 10 * time.Second
)

func (p *process) loop(ctx context.Context) {
	backoff := minBackoff
	for {
		started := time.Now()
		err := p.runOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		ran := time.Since(started)
		if ran > stableAfter {
			backoff = minBackoff
		}
		tail := logTail(filepath.Join(paths{p.s.dir}.logs(), p.c.Name+".log"), 5)
		p.s.log.Error("component exited; restarting", "component", p.c.Name, "err", err, "ran", ran.Round(time.Millisecond), "backoff", backoff, "log", tail)
		p.s.update(p.c.Name, func(cs *ComponentStatus) {
			cs.State, cs.Since, cs.PID = StateRestarting, time.Now(), 0
			cs.Restarts++
			cs.LastExit = fmt.Sprintf("%v after %s: %s", err, ran.Round(time.Millisecond), tail)
			cs.LastExitTime = time.Now()
		})
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// runOnce starts the component in the control plane's network namespace
// (or, for Self components, the host's) and waits for it to exit, probing its health meanwhile.
func (p *process) runOnce(ctx context.Context) error {
	if p.log == nil {
		l, err := openRotatingLog(filepath.Join(paths{p.s.dir}.logs(), p.c.Name+".log"), componentLogMaxBytes, componentLogFiles)
		if err != nil {
			return err
		}
		p.log = l
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", p.s.st.API.Netns, p.s.st.KubeBin, p.c.Name}, p.c.Args...)...)
	if p.c.Self {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		cmd = &exec.Cmd{Path: exe, Args: append([]string{p.c.Argv0}, p.c.Args...)}
	}
	cmd.Env = append(os.Environ(), EnvClusterDir+"="+p.s.dir, "GOGC="+strconv.Itoa(DefaultGOGC))
	cmd.Stdout, cmd.Stderr = p.log, p.log
	// What the component started may hold its output open after it
	// ends (the node agents' containers are detached from it).
	cmd.WaitDelay = time.Second
	// Its own process group, so stop reaches everything it started; and
	// killed with the supervisor, so a crashed supervisor leaves no
	// orphans running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return context.Canceled
	}
	p.s.pidsMu.Lock()
	if err := cmd.Start(); err != nil {
		p.s.pidsMu.Unlock()
		p.mu.Unlock()
		return err
	}
	pid := cmd.Process.Pid
	p.s.pids[pid] = true
	p.s.pidsMu.Unlock()
	if p.c.Self {
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid), []byte(strconv.Itoa(labOOMScoreAdj)), 0o644); err != nil {
			p.s.log.Warn("putting the lab's processes before its control plane at its memory limit", "component", p.c.Name, "err", err)
		}
	}
	defer func() {
		p.s.pidsMu.Lock()
		delete(p.s.pids, pid)
		p.s.pidsMu.Unlock()
	}()
	p.cmd = cmd
	p.exited = make(chan struct{})
	exited := p.exited
	p.mu.Unlock()
	p.s.update(p.c.Name, func(cs *ComponentStatus) {
		cs.State, cs.Since, cs.PID = StateStarting, time.Now(), cmd.Process.Pid
	})
	go p.probe(exited)
	err := cmd.Wait()
	close(exited)
	return err
}

func (p *process) probe(exited <-chan struct{}) {
	if p.c.Health == "" {
		// Nothing to probe: running is healthy.
		p.s.update(p.c.Name, func(cs *ComponentStatus) { cs.State, cs.Since, cs.EverHealthy = StateHealthy, time.Now(), true })
		return
	}
	interval := 100 * time.Millisecond
	last := ""
	for {
		select {
		case <-exited:
			return
		case <-time.After(interval):
		}
		state := StateUnhealthy
		if resp, err := p.health.Get(p.c.Health); err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so that the connection is reused
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				state = StateHealthy
			}
		}
		if state == StateHealthy {
			interval = healthInterval
		}
		if state == StateUnhealthy && last == "" {
			continue // still starting
		}
		if state != last {
			last = state
			p.s.update(p.c.Name, func(cs *ComponentStatus) {
				if cs.State == StateRestarting {
					return
				}
				cs.State, cs.Since = state, time.Now()
				if state == StateHealthy {
					cs.EverHealthy = true
				}
			})
		}
	}
}

// stop ends the component: SIGTERM to its process group, SIGKILL after
// stopTimeout.
func (p *process) stop() {
	p.mu.Lock()
	p.stopped = true
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	pgid := cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(stopTimeout):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	}
	p.s.update(p.c.Name, func(cs *ComponentStatus) { cs.State, cs.Since, cs.PID = StateStopped, time.Now(), 0 })
}

// logTail returns the last n non-empty lines of a log file.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > 64*1024 {
		b = b[len(b)-64*1024:]
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
