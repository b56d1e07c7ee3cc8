package kind_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/kind"
	"github.com/svclab/svclab/lab/kind/dockerd"
	"github.com/svclab/svclab/lab/kind/nodeimage"
	"github.com/svclab/svclab/lab/kubebin"
	"github.com/svclab/svclab/lab/proxier/deploy"
	proxierfaults "github.com/svclab/svclab/lab/proxier/faults"
	"github.com/svclab/svclab/lab/proxierctl"
	"github.com/svclab/svclab/lab/scenario"
	"github.com/svclab/svclab/lab/session"
	"github.com/svclab/svclab/scenarios"
)

type logProgress struct{ t *testing.T }

func (p logProgress) Start(step string) func(error) {
	start := time.Now()
	p.t.Logf("• %s", step)
	return func(err error) { p.t.Logf("  %s (%s): %v", step, time.Since(start).Round(100*time.Millisecond), err) }
}
func (p logProgress) Infof(format string, args ...any) { p.t.Logf("  "+format, args...) }

// e2e is what the end-to-end tests share: the svclab binary built from
// this tree, a Docker engine held for the whole run (svclab's own when
// none answers, started by the set-up) and the node image (built once,
// cached by its inputs).
type e2e struct {
	svclab   string
	state    string
	kubeBin  string
	daemon   *dockerd.Daemon
	host     string
	skip     string
	err      error
	setupLog bytes.Buffer
}

var (
	shared     e2e
	sharedOnce sync.Once
	sharedDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.daemon != nil {
		// Stops svclab's own engine unless another svclab process uses it
		// or it has containers left.
		if err := shared.daemon.Release(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "releasing the Docker engine:", err)
			code = 1
		}
		if shared.daemon.Own {
			// Still running: another svclab process uses it (fine), or the
			// tests left a container on it (a leak).
			if st, _ := dockerd.OwnStatus(context.Background(), dockerd.Options{}); st.Running {
				out, _ := exec.Command("docker", "-H", shared.host, "ps", "-a", "--format", "{{.Names}} ({{.Image}}, {{.Status}})").Output()
				if left := strings.TrimSpace(string(out)); left != "" {
					fmt.Fprintf(os.Stderr, "the tests left containers on svclab's Docker engine, which keeps it running:\n%s\n", left)
					code = 1
				} else if heldBySelf(shared.daemon.UsersLock()) {
					fmt.Fprintln(os.Stderr, "this test process still uses svclab's Docker engine (an engine or a provider not released), which keeps it running")
					code = 1
				} else {
					fmt.Fprintln(os.Stderr, "svclab's Docker engine keeps running: another svclab process uses it")
				}
			}
		}
	}
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
	os.Exit(code)
}

// heldBySelf tells whether this process holds an flock on path
// (/proc/locks names the holder's pid and the file's inode).
func heldBySelf(path string) bool {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return false
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(locks), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && f[1] == "FLOCK" && f[4] == strconv.Itoa(os.Getpid()) && strings.HasSuffix(f[5], ":"+strconv.FormatUint(st.Ino, 10)) {
			return true
		}
	}
	return false
}

// env sets the end-to-end tests up once, or skips with the reason.
func env(t *testing.T) *e2e {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test of the kind backend: skipped with -short")
	}
	sharedOnce.Do(func() { shared.setup() })
	t.Log(shared.setupLog.String())
	if shared.skip != "" {
		t.Skip(shared.skip)
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return &shared
}

func (e *e2e) setup() {
	ctx := context.Background()
	logf := func(format string, args ...any) { fmt.Fprintf(&e.setupLog, format+"\n", args...) }
	var err error
	if os.Geteuid() != 0 {
		if _, perr := (dockerd.Host{}).Ping(ctx, cmpOr(os.Getenv(dockerd.EnvHost), dockerd.DefaultSocket)); perr != nil {
			e.skip = "end-to-end test of the kind backend: no Docker daemon answers and only root can start svclab's own"
			return
		}
	}
	if e.kubeBin, err = kubebin.Locate(ctx, nil); err != nil {
		e.skip = fmt.Sprintf("end-to-end test of the kind backend: %v", err)
		return
	}
	if sharedDir, err = os.MkdirTemp("", "svclab-kind-e2e-"); err != nil {
		e.err = err
		return
	}
	e.svclab, e.state = filepath.Join(sharedDir, "svclab"), filepath.Join(sharedDir, "state")
	start := time.Now()
	if out, err := exec.Command("go", "build", "-o", e.svclab, "github.com/svclab/svclab/cmd/svclab").CombinedOutput(); err != nil {
		e.err = fmt.Errorf("building svclab: %v\n%s", err, out)
		return
	}
	logf("built svclab in %s", time.Since(start).Round(time.Second))
	// The tests hold the engine for their whole run, so that it does not
	// stop (nothing left on it) between two clusters.
	start = time.Now()
	e.daemon, err = dockerd.Ensure(ctx, dockerd.Options{Env: os.Getenv(dockerd.EnvHost), Svclab: e.svclab})
	if errors.Is(err, dockerd.ErrNeedRoot) {
		e.skip = fmt.Sprintf("end-to-end test of the kind backend: %v", err)
		return
	}
	if err != nil {
		e.err = fmt.Errorf("the Docker engine: %w", err)
		return
	}
	e.host = e.daemon.Host
	logf("Docker %s at %s (svclab's own: %v, capability wrapper: %v) in %s", e.daemon.Version, e.host, e.daemon.Own, e.daemon.Wrapped, time.Since(start).Round(time.Second))
	start = time.Now()
	out, err := e.run(ctx, "kind", "node-image", "build")
	if err != nil {
		e.err = fmt.Errorf("building the node image: %w\n%s", err, out)
		return
	}
	logf("node image in %s:\n%s", time.Since(start).Round(time.Second), lastLines(out, 3))
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// run runs the svclab binary with the tests' state directory and engine.
func (e *e2e) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, e.svclab, append([]string{"--state-dir", e.state}, args...)...)
	cmd.Env = append(os.Environ(), dockerd.EnvHost+"="+e.host)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// docker runs the docker command line against the tests' engine.
func (e *e2e) docker(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("docker", append([]string{"-H", e.host}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.Fields(string(out))
}

// The kind backend end to end, once per shape, on the real engine and
// svclab's node image: svclab cluster create --backend kind, every node
// Ready, kube-proxy is the bundled proxier answering /proxyMode, the
// proxier's rules on the nodes, svclab node exec and node shell, and
// delete leaves no container, volume or network behind. Each shape costs
// about four minutes on 2 cores: the nftables shape runs by default, every
// shape with SVCLAB_E2E_KIND=all (go tool task test:kind).
func TestKindShapes(t *testing.T) {
	e := env(t)
	all := os.Getenv("SVCLAB_E2E_KIND") == "all"
	for _, tc := range []struct {
		shape, mode string
		nodes       int
		zones       []string
		always      bool
	}{
		{shape: "nftables", mode: "nftables", nodes: 3, always: true},
		{shape: "iptables", mode: "iptables", nodes: 3},
		{shape: "three-zones", mode: "nftables", nodes: 4, zones: []string{"zone-a", "zone-a", "zone-b", "zone-c"}},
	} {
		t.Run(tc.shape, func(t *testing.T) {
			if !tc.always && !all {
				t.Skip("shape " + tc.shape + ": runs with SVCLAB_E2E_KIND=all (go tool task test:kind)")
			}
			ctx := context.Background()
			name := "kx-" + strings.ReplaceAll(tc.shape, "-", "")
			volumesBefore := e.docker(t, "volume", "ls", "-q")
			start := time.Now()
			out, err := e.run(ctx, "cluster", "create", "--backend", "kind", "--kind-config", tc.shape, "--name", name)
			t.Cleanup(func() { e.deleteAndCheck(t, name, volumesBefore) })
			if err != nil {
				t.Fatalf("svclab cluster create: %v\n%s", err, out)
			}
			created := time.Since(start)
			t.Logf("cluster %s (%s) created in %s\n%s", name, tc.shape, created.Round(time.Second), out)
			e.memory(t, name)

			p := kind.New(e.state, slog.New(slog.DiscardHandler))
			// This process's use of the engine ends with the test (the
			// engine stops once nothing uses it).
			t.Cleanup(func() { p.Engine.Release(context.Background()) })
			c, err := p.Get(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			client, err := c.Client()
			if err != nil {
				t.Fatal(err)
			}
			nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(nodes.Items) != tc.nodes {
				t.Errorf("%d nodes, want %d", len(nodes.Items), tc.nodes)
			}
			var zones []string
			for _, n := range nodes.Items {
				ready := false
				for _, cond := range n.Status.Conditions {
					ready = ready || (cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue)
				}
				if !ready {
					t.Errorf("node %s is not Ready", n.Name)
				}
				if v := n.Status.NodeInfo.KubeletVersion; v != cluster.KubernetesVersion {
					t.Errorf("node %s runs kubelet %s, want %s", n.Name, v, cluster.KubernetesVersion)
				}
				if z := n.Labels["topology.kubernetes.io/zone"]; z != "" {
					zones = append(zones, z)
				}
			}
			slices.Sort(zones)
			if !slices.Equal(zones, tc.zones) && !(len(zones) == 0 && tc.zones == nil) {
				t.Errorf("zones %q, want %q", zones, tc.zones)
			}

			// kube-system/ds/kube-proxy is the bundled proxier.
			ds, err := client.AppsV1().DaemonSets(deploy.Namespace).Get(ctx, deploy.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if img := ds.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, kind.ProxierRepository+":") {
				t.Errorf("kube-proxy runs %s, not the bundled proxier", img)
			}
			if ds.Status.NumberReady != int32(tc.nodes) {
				t.Errorf("kube-proxy ready on %d of %d nodes", ds.Status.NumberReady, tc.nodes)
			}
			out, err = e.run(ctx, "kubectl", "--name", name, "-n", "kube-system", "exec", "ds/kube-proxy", "--", "wget", "-qO-", "127.0.0.1:10249/proxyMode")
			if err != nil || strings.TrimSpace(lastLines(out, 1)) != tc.mode {
				t.Errorf("kubectl exec ds/kube-proxy -- wget /proxyMode: %v\n%s", err, out)
			}

			// svclab node exec: the proxier's rules, seen with the tools
			// of the node's tools container.
			worker := name + "-worker"
			check := []string{"nft", "list", "table", "ip", "kube-proxy"}
			want := "chain services"
			if tc.mode == "iptables" {
				check, want = []string{"iptables-save", "-t", "nat"}, "-A KUBE-SERVICES"
			}
			out, err = e.run(ctx, append([]string{"node", "exec", "--name", name, worker, "--"}, check...)...)
			if err != nil || !strings.Contains(out, want) {
				t.Errorf("svclab node exec %s -- %s: %v\n%s", worker, strings.Join(check, " "), err, lastLines(out, 20))
			}
			// The proxier's teaching hooks are svclab's: a learner's curl on
			// the node gets 403, svclab's signed request is obeyed, and
			// the proxier's log does not name the fault.
			out, err = e.run(ctx, "node", "exec", "--name", name, worker, "--", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
				"-X", "POST", "-d", `{"stopSyncing":true}`, "http://"+proxierctl.Addr()+"/faults")
			if strings.TrimSpace(lastLines(out, 1)) != "403" {
				t.Errorf("a learner's POST /faults on the node: %v\n%s; want 403", err, out)
			}
			on, off := true, false
			for _, v := range []*bool{&on, &off} {
				if err := proxierctl.SetFaults(ctx, c, worker, proxierfaults.Patch{StopSyncing: v}); err != nil {
					t.Errorf("svclab's signed POST /faults: %v", err)
				}
			}
			out, err = e.run(ctx, "kubectl", "--name", name, "-n", "kube-system", "logs", "-l", "k8s-app=kube-proxy", "--tail=-1")
			if err != nil || strings.Contains(strings.ToLower(out), "stopsyncing") || strings.Contains(strings.ToLower(out), "stop syncing") {
				t.Errorf("kube-proxy's log names the fault (or cannot be read: %v):\n%s", err, lastLines(out, 20))
			}
			// A failing command's exit status comes through.
			if _, err := e.run(ctx, "node", "exec", "--name", name, worker, "--", "sh", "-c", "exit 7"); exitCode(err) != 7 {
				t.Errorf("svclab node exec -- sh -c 'exit 7': %v, want exit status 7", err)
			}
			e.shell(t, name, worker)

			if tc.shape == "nftables" {
				e.scenario(t, c)
			}

			// CoreDNS answers inside the lab.
			out, err = e.run(ctx, "node", "exec", "--name", name, worker, "--", "dig", "+short", "@10.96.0.10", "kubernetes.default.svc.cluster.local")
			if err != nil || strings.TrimSpace(out) != "10.96.0.1" {
				t.Errorf("dig kubernetes.default via CoreDNS: %v\n%s", err, out)
			}
		})
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// shell drives svclab node shell through a terminal.
func (e *e2e) shell(t *testing.T, name, node string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.svclab, "--state-dir", e.state, "node", "shell", "--name", name, node)
	cmd.Env = append(os.Environ(), dockerd.EnvHost+"="+e.host)
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	io.WriteString(tty, "echo shell-on-$(hostname)-$((6*7)); exit\n")
	var out bytes.Buffer
	io.Copy(&out, tty) // until the shell exits (EIO)
	if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), "shell-on-"+node+"-42") {
		t.Errorf("svclab node shell %s: %v\n%s", node, err, out.String())
	}
}

// memory logs what the cluster's node containers use.
func (e *e2e) memory(t *testing.T, name string) {
	t.Helper()
	ids := e.docker(t, "ps", "-q", "--filter", "label=io.x-k8s.kind.cluster="+name)
	out, err := exec.Command("docker", append([]string{"-H", e.host, "stats", "--no-stream", "--format", "{{.Name}} {{.MemUsage}}"}, ids...)...).CombinedOutput()
	if err != nil {
		t.Logf("docker stats: %v\n%s", err, out)
		return
	}
	t.Logf("memory of %s's nodes:\n%s", name, out)
}

// deleteAndCheck deletes the cluster with svclab and checks that nothing of
// it is left in the engine: no node container, no volume, no kind network
// once no kind cluster is left, no build container.
func (e *e2e) deleteAndCheck(t *testing.T, name string, volumesBefore []string) {
	ctx := context.Background()
	out, err := e.run(ctx, "cluster", "delete", "--backend", "kind", "--name", name)
	if err != nil && !strings.Contains(out, "no kind cluster named") {
		t.Errorf("svclab cluster delete: %v\n%s", err, out)
	}
	if left := e.docker(t, "ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster="+name); len(left) > 0 {
		t.Errorf("containers of %s left: %q", name, left)
	}
	for _, v := range e.docker(t, "volume", "ls", "-q") {
		if !slices.Contains(volumesBefore, v) {
			t.Errorf("volume %s left", v)
		}
	}
	if clusters := e.docker(t, "ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster"); len(clusters) == 0 {
		if nets := e.docker(t, "network", "ls", "-q", "--filter", "name=^kind$"); len(nets) > 0 {
			t.Errorf("kind's network left: %q", nets)
		}
	}
	if builds := e.docker(t, "ps", "-aq", "--filter", "label="+nodeimage.LabelBuild); len(builds) > 0 {
		t.Errorf("node image build containers left: %q", builds)
	}
	if _, err := os.Stat(filepath.Join(e.state, "kind", name)); err == nil {
		t.Errorf("state of %s left", name)
	}
}

// scenario runs the selector-typo scenario on a kind cluster of svclab's
// node image: broken, the checks fail; solved, they pass.
func (e *e2e) scenario(t *testing.T, c cluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	cat, problems := scenarios.Load(scenario.Options{})
	if err := problems.Err(); err != nil {
		t.Fatal(err)
	}
	s := cat.Get("selector-typo")
	if s == nil {
		t.Fatal("no scenario selector-typo")
	}
	ses, err := session.Start(ctx, s, c, session.Options{Progress: logProgress{t}, Svclab: []string{e.svclab, "--state-dir", e.state}})
	if err != nil {
		t.Fatal(err)
	}
	defer ses.Teardown(context.Background(), false)
	if rep := ses.Grade(ctx); rep.Passed {
		t.Errorf("the broken scenario passed its checks")
	}
	var solveOut bytes.Buffer
	if err := ses.Solve(ctx, e.kubeBin, &solveOut); err != nil {
		t.Fatalf("solve: %v\n%s", err, solveOut.String())
	}
	rep := ses.GradeUntilPassed(ctx, session.SolveGradeTimeout)
	for _, r := range rep.Results {
		t.Logf("%v %s: %s", r.Passed, r.ID, r.Detail)
	}
	if !rep.Passed {
		t.Errorf("the solved scenario fails its checks (score %.0f%%)", rep.Score)
	}

	// A scenario for embedded clusters only is refused, with its reason.
	if np := cat.Get("networkpolicy-blocks-service"); np != nil {
		if _, err := session.Start(ctx, np, c, session.Options{}); !errors.Is(err, session.ErrWrongBackend) || !strings.Contains(err.Error(), "NetworkPolicy") {
			t.Errorf("networkpolicy-blocks-service on kind: %v", err)
		}
	}
}
