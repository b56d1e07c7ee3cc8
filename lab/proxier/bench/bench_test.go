//go:build linux

package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded"
	"github.com/svclab/svclab/lab/kubebin"
	"github.com/svclab/svclab/lab/proxier/flowtest"
	"github.com/svclab/svclab/lab/proxier/run"
	"github.com/svclab/svclab/lab/roles"
)

var (
	flagSizes    = flag.String("sizes", "100,1000,10000", "numbers of Services to measure (each with one EndpointSlice)")
	flagTimeout  = flag.Duration("sync-timeout", 5*time.Minute, "how long a proxier may take for its first (full) sync; slower ones are reported as not finished")
	flagPartials = flag.Int("partials", 3, "partial syncs (one Service's endpoints change) measured per proxier; the median is reported")
	flagProfile  = flag.String("profile-dir", "", "write CPU and heap profiles of our proxier to this directory")
	flagMaxBusy  = flag.Float64("max-busy", 0.3, "before each measurement wait until the CPUs are less busy than this (0..1; the machine may be shared)")
	flagQuiet    = flag.Duration("quiet-wait", 90*time.Second, "how long to wait for quiet CPUs before measuring anyway")
	flagRetries  = flag.Int("retries", 1, "how often to repeat a measurement that started on busy CPUs")
	flagCheck    = flag.Bool("check-rules", true, "compare both proxiers' rules (normalised) after the partial syncs")
)

// Environment variables of the re-executed test binary that runs our
// proxier ("svclab proxier run" in-process).
const (
	envOurs        = "SVCLAB_BENCH_PROXIER"
	envOursProfile = "SVCLAB_BENCH_PROXIER_PROFILE"
)

const (
	metricsAddr = "127.0.0.1:10249"
	healthzAddr = "127.0.0.1:10256"
	modeNFT     = "nftables"
	modeIPT     = "iptables"
)

func TestMain(m *testing.M) {
	if os.Getenv(envOurs) != "" {
		os.Exit(runOurs(os.Args[1:]))
	}
	// The embedded cluster's supervisor is this binary re-executed.
	roles.Dispatch()
	code := m.Run()
	printTable(os.Stdout)
	os.Exit(code)
}

// runOurs is "svclab proxier run args...", with CPU and heap profiles if
// envOursProfile names a path prefix.
func runOurs(args []string) int {
	prefix := os.Getenv(envOursProfile)
	if prefix != "" {
		f, err := os.Create(prefix + ".cpu.pprof")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	cmd := run.NewRunCommand()
	cmd.SetArgs(args)
	err := cmd.Execute()
	if prefix != "" {
		pprof.StopCPUProfile()
		if f, ferr := os.Create(prefix + ".heap.pprof"); ferr == nil {
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	if err != nil {
		return 1
	}
	return 0
}

// nodePortBudget is how many Services get a NodePort: nine tenths of the
// cluster's NodePort range, the rest left to the cluster.
func nodePortBudget() (int, error) {
	lo, hi, ok := strings.Cut(cluster.DefaultNodePortRange, "-")
	l, err1 := strconv.Atoi(lo)
	h, err2 := strconv.Atoi(hi)
	if !ok || err1 != nil || err2 != nil || h < l {
		return 0, fmt.Errorf("cannot parse the NodePort range %q", cluster.DefaultNodePortRange)
	}
	return (h - l + 1) * 9 / 10, nil
}

func newWorkload() (Workload, error) {
	budget, err := nodePortBudget()
	if err != nil {
		return Workload{}, err
	}
	return Workload{
		Namespace:           "bench",
		EndpointsPerService: 10,
		NodePortServices:    budget,
		Nodes: []Node{
			{Name: "bench-node", IP: netip.MustParseAddr("192.168.80.1")},
			{Name: "bench-node-b", IP: netip.MustParseAddr("192.168.80.2")},
			{Name: "bench-node-c", IP: netip.MustParseAddr("192.168.80.3")},
		},
		EndpointBase: netip.MustParseAddr("10.128.0.1"),
		ClusterCIDR:  netip.MustParsePrefix("10.128.0.0/9"),
	}, nil
}

// Run is one proxier's measurement.
type Run struct {
	Full     time.Duration
	FullDone bool
	Partials []time.Duration
	RSS, HWM float64
	Busy     float64 // CPUs busy (0..1) just before it started
	Quiet    bool
	LoadAvg  string
	Rules    string
	Attempts int
}

// Partial is the median partial sync time.
func (r Run) Partial() time.Duration {
	if len(r.Partials) == 0 {
		return 0
	}
	s := slices.Clone(r.Partials)
	slices.Sort(s)
	return s[len(s)/2]
}

// Row is one line of the table.
type Row struct {
	Mode      string
	Services  int
	NodePorts int
	Ours      Run
	Upstream  Run
	Rules     string
}

var (
	rowsMu sync.Mutex
	rows   []Row
	// upstreamVersion is "svclab-kube kube-proxy --version".
	upstreamVersion = "kube-proxy"
)

// env is what the measurements share: the cluster holding the objects and
// the namespaces.
type env struct {
	lab     *flowtest.Sandbox
	cluster *embedded.Cluster
	client  kubernetes.Interface
	kubeBin string
	self    string
	work    Workload
	logger  *slog.Logger
	runs    int
	gen     int
}

func requireLab(b *testing.B) {
	b.Helper()
	if testing.Short() {
		b.Skip("proxier benchmark with network namespaces and an embedded cluster: skipped with -short")
	}
	if os.Geteuid() != 0 {
		b.Skip("proxier benchmark: needs root to create network namespaces and load rules")
	}
	for _, c := range []string{"ip", "nft", "iptables", "iptables-restore", "iptables-save"} {
		if _, err := exec.LookPath(c); err != nil {
			b.Skipf("proxier benchmark: %s is not installed (go tool task setup installs it)", c)
		}
	}
	if err := embedded.Preflight(); err != nil {
		b.Skipf("proxier benchmark: %v", err)
	}
}

type bWriter struct{ b testing.TB }

func (w bWriter) Write(p []byte) (int, error) {
	w.b.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func newEnv(b *testing.B) *env {
	ctx := b.Context()
	bin, err := kubebin.Locate(ctx, nil)
	if err != nil {
		b.Skipf("proxier benchmark: svclab-kube not available: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	work, err := newWorkload()
	if err != nil {
		b.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(bWriter{b}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e := &env{kubeBin: bin, self: self, work: work, logger: logger}
	if out, err := exec.CommandContext(ctx, bin, "kube-proxy", "--version").CombinedOutput(); err == nil {
		upstreamVersion = strings.TrimSpace(string(out))
	}

	e.lab = flowtest.NewSandbox("b", logger)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.lab.Close(ctx); err != nil {
			b.Errorf("delete namespaces: %v", err)
		}
		left, err := flowtest.Leftovers(ctx, e.lab.ID)
		if err != nil {
			b.Errorf("check for leftovers: %v", err)
		}
		for _, l := range left {
			b.Errorf("left behind: %s", l)
		}
	})

	p := embedded.New(b.TempDir(), logger)
	rnd := make([]byte, 2)
	rand.Read(rnd)
	name := "pbench-" + hex.EncodeToString(rnd)
	start := time.Now()
	cc, err := p.Create(ctx, cluster.CreateOptions{Name: name, Workers: 0})
	if err != nil {
		b.Fatalf("create cluster: %v", err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := p.Delete(ctx, name); err != nil {
			b.Errorf("delete cluster: %v", err)
		}
	})
	b.Logf("cluster %s up in %s", name, time.Since(start).Round(time.Second))
	e.cluster = cc.(*embedded.Cluster)
	rc, err := e.cluster.RESTConfig()
	if err != nil {
		b.Fatal(err)
	}
	// Create thousands of objects quickly.
	rc.QPS, rc.Burst = 2000, 4000
	if e.client, err = kubernetes.NewForConfig(rc); err != nil {
		b.Fatal(err)
	}
	// The cluster's own kube-proxy (our proxier) and CoreDNS would sync
	// and watch every benchmark object on the same CPUs: remove them.
	if err := e.client.AppsV1().DaemonSets("kube-system").Delete(ctx, "kube-proxy", metav1.DeleteOptions{}); err != nil {
		b.Fatalf("delete the cluster's kube-proxy DaemonSet: %v", err)
	}
	scale, err := e.client.AppsV1().Deployments("kube-system").GetScale(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		b.Fatalf("get coredns scale: %v", err)
	}
	scale.Spec.Replicas = 0
	if _, err := e.client.AppsV1().Deployments("kube-system").UpdateScale(ctx, "coredns", scale, metav1.UpdateOptions{}); err != nil {
		b.Fatalf("scale coredns to 0: %v", err)
	}
	// Both proxiers must see the same objects: wait until kube-dns has
	// lost its endpoints.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		sl, err := e.client.DiscoveryV1().EndpointSlices("kube-system").List(ctx, metav1.ListOptions{LabelSelector: discovery.LabelServiceName + "=kube-dns"})
		if err != nil {
			b.Fatalf("list kube-dns EndpointSlices: %v", err)
		}
		endpoints := 0
		for _, s := range sl.Items {
			endpoints += len(s.Endpoints)
		}
		if endpoints == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("kube-dns still has %d endpoints after CoreDNS was scaled to 0", endpoints)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err := work.Setup(ctx, e.client); err != nil {
		b.Fatal(err)
	}
	return e
}

func sizes(b *testing.B) []int {
	var out []int
	for _, s := range strings.Split(*flagSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			b.Fatalf("-sizes: bad number %q", s)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkSync measures full and partial syncs of our proxier and of
// upstream kube-proxy, side by side, at each size and in both modes.
func BenchmarkSync(b *testing.B) {
	requireLab(b)
	e := newEnv(b)
	for _, n := range sizes(b) {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			start := time.Now()
			created, deleted, err := e.work.Scale(b.Context(), e.client, n, 24)
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("%d Services: created %d and deleted %d objects in %s", n, created, deleted, time.Since(start).Round(time.Millisecond))
			for _, mode := range []string{modeNFT, modeIPT} {
				b.Run(mode, func(b *testing.B) {
					for b.Loop() {
						row := e.measure(b, n, mode)
						rowsMu.Lock()
						rows = append(rows, row)
						rowsMu.Unlock()
						report(b, row)
					}
				})
			}
		})
	}
}

func report(b *testing.B, r Row) {
	b.ReportMetric(0, "ns/op")
	if r.Ours.FullDone {
		b.ReportMetric(r.Ours.Full.Seconds(), "ours-full-s")
		b.ReportMetric(r.Ours.Partial().Seconds(), "ours-partial-s")
		b.ReportMetric(r.Ours.RSS, "ours-rss-MiB")
	}
	if r.Upstream.FullDone {
		b.ReportMetric(r.Upstream.Full.Seconds(), "upstream-full-s")
		b.ReportMetric(r.Upstream.Partial().Seconds(), "upstream-partial-s")
		b.ReportMetric(r.Upstream.RSS, "upstream-rss-MiB")
	}
	if r.Ours.FullDone && r.Upstream.FullDone {
		b.ReportMetric(r.Ours.Full.Seconds()/r.Upstream.Full.Seconds(), "full-ratio")
		if r.Upstream.Partial() > 0 {
			b.ReportMetric(r.Ours.Partial().Seconds()/r.Upstream.Partial().Seconds(), "partial-ratio")
		}
	}
}

// change is one partial-sync change: Service index's endpoints.
type change struct {
	index, gen int
}

// measure runs our proxier, then upstream kube-proxy, on the objects the
// cluster holds now, making the same endpoint changes for both.
func (e *env) measure(b *testing.B, n int, mode string) Row {
	ctx := b.Context()
	objs, err := ReadObjects(ctx, e.client)
	if err != nil {
		b.Fatal(err)
	}
	var changes []change
	for k := range *flagPartials {
		e.gen++
		changes = append(changes, change{index: (k + 1) * n / (*flagPartials + 1), gen: e.gen})
	}
	row := Row{Mode: mode, Services: n, NodePorts: min(n, e.work.NodePortServices)}
	row.Ours = e.retry(b, "ours", func(attempt int) Run { return e.runOurs(b, n, mode, objs, changes, attempt) })
	row.Upstream = e.retry(b, "upstream", func(attempt int) Run {
		if err := e.restoreSlices(ctx, objs, changes); err != nil {
			b.Fatal(err)
		}
		return e.runUpstream(b, n, mode, changes)
	})
	row.Rules = compareRules(row.Ours, row.Upstream)
	b.Logf("%s %d: ours full %s partial %s RSS %.0f MiB; upstream full %s partial %s RSS %.0f MiB; rules %s",
		mode, n, fmtFull(row.Ours), fmtDur(row.Ours.Partial()), row.Ours.RSS,
		fmtFull(row.Upstream), fmtDur(row.Upstream.Partial()), row.Upstream.RSS, row.Rules)
	return row
}

// retry repeats a measurement that started on busy CPUs (up to -retries
// times) and keeps the one that started on the quietest.
func (e *env) retry(b *testing.B, who string, measure func(attempt int) Run) Run {
	var best Run
	for attempt := 0; attempt <= *flagRetries; attempt++ {
		r := measure(attempt)
		r.Attempts = attempt + 1
		if attempt == 0 || r.Busy < best.Busy {
			best = r
		}
		if r.Quiet || attempt == *flagRetries {
			break
		}
		b.Logf("%s: measured with the CPUs %.0f%% busy beforehand (load %s); repeating", who, r.Busy*100, r.LoadAvg)
	}
	return best
}

// quiet waits for quiet CPUs and records the load.
func quiet(b *testing.B, r *Run) {
	busy, ok, err := WaitQuiet(b.Context(), *flagMaxBusy, *flagQuiet)
	if err != nil {
		b.Fatal(err)
	}
	r.Busy, r.Quiet, r.LoadAvg = busy, ok, LoadAvg()
}

// newNetns creates a namespace with the proxier node's IP on lo.
func (e *env) newNetns(b *testing.B, short string) flowtest.Netns {
	ctx := b.Context()
	e.runs++
	ns, err := e.lab.Netns(ctx, fmt.Sprintf("%s%d", short, e.runs))
	if err != nil {
		b.Fatal(err)
	}
	if err := ns.IP(ctx, "addr", "add", e.work.Nodes[0].IP.String()+"/32", "dev", "lo"); err != nil {
		b.Fatal(err)
	}
	return ns
}

func deleteNetns(b *testing.B, ns flowtest.Netns, hostLink string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if hostLink != "" {
		if out, err := exec.CommandContext(ctx, "ip", "link", "del", hostLink).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find device") {
			b.Errorf("delete %s: %v: %s", hostLink, err, out)
		}
	}
	if out, err := exec.CommandContext(ctx, "ip", "netns", "del", ns.Name).CombinedOutput(); err != nil {
		b.Errorf("delete namespace %s: %v: %s", ns.Name, err, out)
	}
}

// observe takes the measurements of a started proxier: its first (full)
// sync, then a partial sync per change, its memory and its rules.
func (e *env) observe(b *testing.B, who, mode string, p *Proc, r *Run, apply func(c change) error, changes []change) {
	ctx := b.Context()
	s, err := p.WaitFor(ctx, *flagTimeout, func(s Sample) bool { return s.Count(metricFull) >= 1 })
	if errors.Is(err, ErrTimeout) {
		b.Logf("%s %s: no full sync within %s; log tail:\n%s", who, mode, *flagTimeout, p.LogTail(10))
		r.RSS, r.HWM, _ = p.Memory()
		return
	}
	if err != nil {
		b.Fatalf("%s %s: %v", who, mode, err)
	}
	r.FullDone = true
	r.Full = seconds(s.Sum(metricFull) / s.Count(metricFull))
	if _, err := p.Settle(ctx, 2*time.Second, time.Minute); err != nil {
		b.Fatalf("%s %s: %v", who, mode, err)
	}
	// A partial sync may wait for the periodic full resync or a retry:
	// give it a generous bound.
	partialTimeout := max(time.Minute, 4*r.Full)
	for _, c := range changes {
		before, err := p.Metrics(ctx)
		if err != nil {
			b.Fatalf("%s %s: %v", who, mode, err)
		}
		if err := apply(c); err != nil {
			b.Fatalf("%s %s: change endpoints of %s: %v", who, mode, ServiceName(c.index), err)
		}
		after, err := p.WaitFor(ctx, partialTimeout, func(s Sample) bool { return s.Count(metricPartial) > before.Count(metricPartial) })
		if err != nil {
			b.Fatalf("%s %s: partial sync: %v", who, mode, err)
		}
		dc := after.Count(metricPartial) - before.Count(metricPartial)
		r.Partials = append(r.Partials, seconds((after.Sum(metricPartial)-before.Sum(metricPartial))/dc))
		if f := after.Count(metricFull) - before.Count(metricFull); f > 0 {
			b.Logf("%s %s: %v full sync(s) during the partial measurement", who, mode, f)
		}
	}
	if r.RSS, r.HWM, err = p.Memory(); err != nil {
		b.Logf("%s %s: memory: %v", who, mode, err)
	}
	if *flagCheck {
		r.Rules, err = listRules(ctx, p.NS, mode)
		if err != nil {
			b.Logf("%s %s: list rules: %v", who, mode, err)
		}
	}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func listRules(ctx context.Context, ns flowtest.Netns, mode string) (string, error) {
	if mode == modeNFT {
		l, err := flowtest.ListNFTables(ctx, ns)
		if err != nil {
			return "", err
		}
		return flowtest.NormalizeNFTables(l)
	}
	l, err := flowtest.IPTablesSave(ctx, ns)
	if err != nil {
		return "", err
	}
	return flowtest.NormalizeIPTablesSave(l)
}

// runOurs measures "svclab proxier run --objects" (this test binary
// re-executed) on objs, changing endpoints in the file.
func (e *env) runOurs(b *testing.B, n int, mode string, objs *Objects, changes []change, attempt int) Run {
	var r Run
	dir := b.TempDir()
	m, err := objs.Manifest()
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "objects.yaml")
	if err := m.WriteFile(path); err != nil {
		b.Fatal(err)
	}
	quiet(b, &r)
	ns := e.newNetns(b, "o")
	defer deleteNetns(b, ns, "")
	env := []string{envOurs + "=1"}
	if *flagProfile != "" {
		if err := os.MkdirAll(*flagProfile, 0o755); err != nil {
			b.Fatal(err)
		}
		env = append(env, fmt.Sprintf("%s=%s", envOursProfile, filepath.Join(*flagProfile, fmt.Sprintf("ours-%s-%d-%d", mode, n, attempt))))
	}
	node := e.work.Nodes[0]
	p, err := StartProc(ns, metricsAddr, filepath.Join(dir, "proxier.log"), env, e.self,
		"--objects", path, "--hostname-override", node.Name, "--bind-address", node.IP.String(),
		"--cluster-cidr", e.work.ClusterCIDR.String(), "--service-cidr", strings.Join(objs.ServiceCIDRs, ","),
		"--proxy-mode", mode, "--metrics-bind-address", metricsAddr, "--healthz-bind-address", healthzAddr,
		// Raw sync speed: no rule listing before and after each sync.
		"--rule-diff-limit", "-1")
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := p.Stop(30 * time.Second); err != nil {
			b.Error(err)
		}
	}()
	apply := func(c change) error {
		s := objs.Slice(e.work.Namespace, ServiceName(c.index)+"-0")
		if s == nil {
			return fmt.Errorf("no EndpointSlice for %s", ServiceName(c.index))
		}
		s = s.DeepCopy()
		e.work.ReplaceEndpoint(s, c.gen)
		// A new resourceVersion, as the API server would give it.
		s.ResourceVersion = fmt.Sprintf("bench-%d", c.gen)
		if err := m.SetSlice(s); err != nil {
			return err
		}
		if err := m.WriteFile(path); err != nil {
			return err
		}
		return p.Signal(syscall.SIGHUP)
	}
	e.observe(b, "ours", mode, p, &r, apply, changes)
	return r
}

// restoreSlices puts the changed EndpointSlices back as they are in objs
// (a repeated upstream measurement starts from the same objects).
func (e *env) restoreSlices(ctx context.Context, objs *Objects, changes []change) error {
	for _, c := range changes {
		orig := objs.Slice(e.work.Namespace, ServiceName(c.index)+"-0")
		if orig == nil {
			return fmt.Errorf("no EndpointSlice for %s", ServiceName(c.index))
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := e.client.DiscoveryV1().EndpointSlices(orig.Namespace).Get(ctx, orig.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if slices.EqualFunc(cur.Endpoints, orig.Endpoints, func(a, b discovery.Endpoint) bool { return slices.Equal(a.Addresses, b.Addresses) }) {
				return nil
			}
			cur.Endpoints = orig.Endpoints
			_, err = e.client.DiscoveryV1().EndpointSlices(orig.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("restore EndpointSlice %s: %w", orig.Name, err)
		}
	}
	return nil
}

// runUpstream measures "svclab-kube kube-proxy" against the cluster,
// changing endpoints through the API server.
func (e *env) runUpstream(b *testing.B, n int, mode string, changes []change) Run {
	ctx := b.Context()
	var r Run
	quiet(b, &r)
	ns := e.newNetns(b, "u")
	// kube-proxy reaches the API server over a veth on the cluster's
	// bridge, from an address high in the cluster's subnet.
	st := e.cluster.State()
	prefix, err := netip.ParsePrefix(st.Subnet)
	if err != nil {
		b.Fatalf("cluster subnet: %v", err)
	}
	addr := prefix.Addr().As4()
	addr[3] = byte(250 - e.runs%50)
	hostIf := fmt.Sprintf("%su%d", e.lab.ID, e.runs)
	defer deleteNetns(b, ns, hostIf)
	if err := e.lab.BridgePort(ctx, st.FabricNetns(), st.Bridge, hostIf, ns, "eth0", fmt.Sprintf("%s/%d", netip.AddrFrom4(addr), prefix.Bits())); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	kubeconfig, err := e.cluster.Kubeconfig()
	if err != nil {
		b.Fatal(err)
	}
	kcPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kcPath, kubeconfig, 0o600); err != nil {
		b.Fatal(err)
	}
	// conntrack: leave every sysctl alone (nf_conntrack_max is not per
	// namespace). Everything else is kube-proxy's default.
	config := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
mode: %s
clusterCIDR: %s
detectLocalMode: ClusterCIDR
healthzBindAddress: %s
metricsBindAddress: %s
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kcPath, e.work.Nodes[0].Name, mode, e.work.ClusterCIDR, healthzAddr, metricsAddr)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		b.Fatal(err)
	}
	p, err := StartProc(ns, metricsAddr, filepath.Join(dir, "kube-proxy.log"), nil, e.kubeBin, "kube-proxy", "--config", cfgPath)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := p.Stop(30 * time.Second); err != nil {
			b.Error(err)
		}
	}()
	apply := func(c change) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			s, err := e.client.DiscoveryV1().EndpointSlices(e.work.Namespace).Get(ctx, ServiceName(c.index)+"-0", metav1.GetOptions{})
			if err != nil {
				return err
			}
			e.work.ReplaceEndpoint(s, c.gen)
			_, err = e.client.DiscoveryV1().EndpointSlices(e.work.Namespace).Update(ctx, s, metav1.UpdateOptions{})
			return err
		})
	}
	e.observe(b, "upstream", mode, p, &r, apply, changes)
	return r
}

// compareRules says whether both proxiers left the same rules.
func compareRules(ours, upstream Run) string {
	if ours.Rules == "" || upstream.Rules == "" {
		return "not compared"
	}
	if ours.Rules == upstream.Rules {
		return fmt.Sprintf("identical (%d lines)", strings.Count(ours.Rules, "\n"))
	}
	// A multiset difference: cheap at any size.
	count := map[string]int{}
	for _, l := range strings.Split(ours.Rules, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(upstream.Rules, "\n") {
		count[l]--
	}
	var onlyOurs, onlyUp []string
	for l, c := range count {
		for ; c > 0; c-- {
			onlyOurs = append(onlyOurs, l)
		}
		for ; c < 0; c++ {
			onlyUp = append(onlyUp, l)
		}
	}
	if len(onlyOurs) == 0 && len(onlyUp) == 0 {
		return "same lines, different order"
	}
	slices.Sort(onlyOurs)
	slices.Sort(onlyUp)
	first := func(ls []string) string {
		if len(ls) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.120q", ls[0])
	}
	return fmt.Sprintf("DIFFER: %d lines only ours (first %s), %d only upstream (first %s)", len(onlyOurs), first(onlyOurs), len(onlyUp), first(onlyUp))
}

func fmtDur(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f s", d.Seconds())
}

func fmtFull(r Run) string {
	if !r.FullDone {
		return fmt.Sprintf("did not finish in %.0f s", flagTimeout.Seconds())
	}
	return fmtDur(r.Full)
}

func fmtMiB(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f MiB", v)
}

func ratio(ours, upstream Run, pick func(Run) time.Duration, full bool) string {
	switch {
	case ours.FullDone && upstream.FullDone && pick(upstream) > 0:
		return fmt.Sprintf("%.2f×", pick(ours).Seconds()/pick(upstream).Seconds())
	case full && ours.FullDone && !upstream.FullDone:
		return fmt.Sprintf("< %.2f×", ours.Full.Seconds()/flagTimeout.Seconds())
	default:
		return "-"
	}
}

func fmtLoad(r Run) string {
	s := fmt.Sprintf("%.0f%% [%s]", r.Busy*100, r.LoadAvg)
	if !r.Quiet {
		s += " BUSY"
	}
	if r.Attempts > 1 {
		s += fmt.Sprintf(" (attempt %d)", r.Attempts)
	}
	return s
}

// printTable prints every measurement with ratios ours/upstream.
func printTable(w io.Writer) {
	rowsMu.Lock()
	defer rowsMu.Unlock()
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "svclab proxier vs upstream %s, same objects, each in a fresh network namespace; ratio = ours/upstream\n", upstreamVersion)
	fmt.Fprintln(w, "full = first sync into an empty namespace; partial = median of one Service's endpoints changing; RSS after the partial syncs")
	fmt.Fprintln(w, "rule diffs are off in our proxier (--rule-diff-limit -1), so it is measured at raw sync speed")
	fmt.Fprintln(w, "busy = CPUs busy in the second before the proxier started [1/5/15-min load average]")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "mode\tservices\tnodeports\tfull ours\tfull upstream\tratio\tpartial ours\tpartial upstream\tratio\tRSS ours\tRSS upstream\tbusy ours\tbusy upstream\trules")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Mode, r.Services, r.NodePorts,
			fmtFull(r.Ours), fmtFull(r.Upstream), ratio(r.Ours, r.Upstream, func(x Run) time.Duration { return x.Full }, true),
			fmtDur(r.Ours.Partial()), fmtDur(r.Upstream.Partial()), ratio(r.Ours, r.Upstream, Run.Partial, false),
			fmtMiB(r.Ours.RSS), fmtMiB(r.Upstream.RSS), fmtLoad(r.Ours), fmtLoad(r.Upstream), r.Rules)
	}
	tw.Flush()
}
