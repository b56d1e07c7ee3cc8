package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/owner"
	"github.com/svclab/svclab/lab/kubebin"
)

// The focuses a run is usually given.
const (
	// AllFocus selects every [sig-network] Conformance spec (47 in
	// v1.37.2).
	AllFocus = `\[sig-network\].*\[Conformance\]`
	// ServicesFocus selects the [sig-network] Services Conformance specs
	// (15 in v1.37.2).
	ServicesFocus = `\[sig-network\] Services .*\[Conformance\]`
	// NetworkFocus selects every [sig-network] spec; run it with
	// NetworkSkip for the ones a lab can run that are not Conformance
	// specs.
	NetworkFocus = `\[sig-network\]`
)

// NetworkSkips are the [sig-network] specs a run of NetworkFocus leaves
// out, by what they are tagged with, and why.
var NetworkSkips = []struct{ Pattern, Why string }{
	{`\[Conformance\]`, "the Conformance specs: --focus all runs them"},
	{`\[Feature:IPv6DualStack\]`, "a lab's network is IPv4 only"},
	{`\[Feature:Networking-IPv6\]`, "a lab's network is IPv4 only"},
	{`\[Feature:LoadBalancer\]`, "they need a cloud provider's load balancer; the suite runs with the skeleton provider (the lab's own load balancer has svclab's tests)"},
	{`\[Provider:`, "they need that cloud provider"},
	{`\[Feature:Networking-IPv4\]`, "they reach the internet (8.8.8.8); a lab's traffic never leaves the machine"},
	{`\[Feature:Networking-DNS\]`, "they resolve internet names; a lab's traffic never leaves the machine"},
	{`\[Feature:Networking-Performance\]`, "a throughput benchmark (iperf2 between nodes), not behaviour"},
	{`\[Feature:PerformanceDNS\]`, "a DNS benchmark at scale, not behaviour"},
	{`\[Disruptive\]`, "they restart or reboot nodes and control-plane components over SSH, which the skeleton provider has not"},
}

// NetworkSkip is NetworkSkips as one Ginkgo skip expression.
func NetworkSkip() string {
	var parts []string
	for _, s := range NetworkSkips {
		parts = append(parts, s.Pattern)
	}
	return strings.Join(parts, "|")
}

// Options say what to run where.
type Options struct {
	// Provider makes the run's cluster; Backend names it in claims and
	// in the summary (default embedded).
	Provider cluster.Provider
	Backend  string
	// Owners claims the cluster while the run uses it (nil: no claim).
	Owners *owner.Registry
	// Cluster names the cluster the run creates (default "cf-" and five
	// random letters and digits); it must not exist: the suite runs on a
	// fresh cluster. Keep leaves it running afterwards.
	Cluster string
	Keep    bool
	// Workers is the number of worker nodes (default 2); ProxyMode the
	// kube-proxy mode (default nftables).
	Workers   int
	ProxyMode string
	// Focus and Skip are the suite's --ginkgo.focus and --ginkgo.skip
	// (default AllFocus, nothing skipped).
	Focus, Skip string
	// ReportDir receives the JUnit report, the suite's log and the
	// cluster's kubeconfig. Required.
	ReportDir string
	// Timeout bounds the suite (default 2h).
	Timeout time.Duration
	// Suite finds the suite's test binary (default kubebin.E2E.Locate,
	// which builds it when it is missing); KubeBin finds svclab-kube, whose
	// kubectl the suite runs (default kubebin.Locate).
	Suite   func(context.Context, cluster.Progress) (string, error)
	KubeBin func(context.Context, cluster.Progress) (string, error)
	// Progress receives the run's steps and a line per finished spec.
	Progress cluster.Progress
	Log      *slog.Logger
}

// Result is what a run showed.
type Result struct {
	Cluster, Backend string
	Focus            string
	// Specs are the specs that ran, in the report's order; Skipped counts
	// the suite's other specs; Setup holds the suite's own nodes that
	// failed (its set-up, before any spec).
	Specs    []Spec
	Skipped  int
	Setup    []Spec
	Duration time.Duration
	// JUnit and Log are the report's and the suite's output's paths.
	JUnit, Log string
}

// Failed returns the specs that did not pass.
func (r *Result) Failed() []Spec {
	var out []Spec
	for _, s := range r.Specs {
		if !s.Passed() {
			out = append(out, s)
		}
	}
	return out
}

// OK says whether every spec passed and the suite's set-up did too.
func (r *Result) OK() bool {
	return len(r.Specs) > 0 && len(r.Failed()) == 0 && len(r.Setup) == 0
}

// Summary is the run in one line: "sig-network conformance: 47 of 47
// specs passed in 24m13s on embedded cluster cf-1a2b3 (JUnit: …)".
func (r *Result) Summary() string {
	passed := len(r.Specs) - len(r.Failed())
	line := fmt.Sprintf("sig-network conformance: %d of %d specs passed in %s on %s cluster %s", passed, len(r.Specs),
		r.Duration.Round(time.Second), r.Backend, r.Cluster)
	if len(r.Setup) > 0 {
		line += fmt.Sprintf("; the suite's set-up failed (%s)", r.Setup[0].Name)
	}
	return line + " (JUnit: " + r.JUnit + ")"
}

// Run creates a fresh cluster, runs the suite's focused specs on it,
// deletes the cluster and returns what the suite reported. An error is
// about the run itself (no suite, no cluster, no report); failed specs
// are in the result.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Provider == nil {
		return nil, errors.New("conformance: no cluster provider")
	}
	if o.ReportDir == "" {
		return nil, errors.New("conformance: no report directory")
	}
	if o.Backend == "" {
		o.Backend = "embedded"
	}
	if o.Workers == 0 {
		o.Workers = 2
	}
	if o.Focus == "" {
		o.Focus = AllFocus
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Hour
	}
	if o.Suite == nil {
		o.Suite = kubebin.E2E.Locate
	}
	if o.KubeBin == nil {
		o.KubeBin = kubebin.Locate
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	p := cluster.OrNop(o.Progress)
	if err := os.MkdirAll(o.ReportDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the report directory: %w", err)
	}
	reportDir, err := filepath.Abs(o.ReportDir)
	if err != nil {
		return nil, err
	}
	suite, err := o.Suite(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("the conformance suite: %w", err)
	}
	kube, err := o.KubeBin(ctx, p)
	if err != nil {
		return nil, err
	}
	if o.Cluster == "" {
		if o.Cluster, err = cluster.FreeName(ctx, o.Provider, "cf-"); err != nil {
			return nil, err
		}
	}
	if o.Owners != nil {
		lease, err := o.Owners.Acquire(ctx, owner.Claim{Backend: o.Backend, Cluster: o.Cluster}, false)
		if err != nil {
			return nil, err
		}
		defer lease.Release()
	}
	if _, err := o.Provider.Get(ctx, o.Cluster); err == nil {
		return nil, fmt.Errorf("cluster %s exists: the suite runs on a fresh cluster of its own (leave --cluster out, or delete it first)", o.Cluster)
	} else if !errors.Is(err, cluster.ErrNotFound) {
		return nil, err
	}
	c, err := o.Provider.Create(ctx, cluster.CreateOptions{Name: o.Cluster, Workers: o.Workers, ProxyMode: o.ProxyMode, Progress: p})
	if err != nil {
		return nil, fmt.Errorf("creating cluster %s: %w", o.Cluster, err)
	}
	if !o.Keep {
		defer func() {
			done := p.Start("Deleting cluster " + o.Cluster)
			done(o.Provider.Delete(context.WithoutCancel(ctx), o.Cluster))
		}()
	}
	res := &Result{Cluster: o.Cluster, Backend: o.Backend, Focus: o.Focus,
		JUnit: filepath.Join(reportDir, "junit_01.xml"), Log: filepath.Join(reportDir, "e2e.log")}
	start := time.Now()
	runErr := runSuite(ctx, o, c, suite, kube, reportDir, res.Log, p)
	res.Duration = time.Since(start)
	specs, skipped, setup, err := readJUnit(res.JUnit)
	if err != nil {
		if runErr != nil {
			return res, fmt.Errorf("the suite did not finish (%w); its output is in %s", runErr, res.Log)
		}
		return res, fmt.Errorf("the suite wrote no report: %w; its output is in %s", err, res.Log)
	}
	res.Specs, res.Skipped, res.Setup = specs, skipped, setup
	if runErr != nil && ctx.Err() != nil {
		return res, ctx.Err()
	}
	return res, nil
}

// runSuite runs the suite's binary against c, its output to logPath and
// a progress line per finished spec.
func runSuite(ctx context.Context, o Options, c cluster.Cluster, suite, kube, reportDir, logPath string, p cluster.Progress) error {
	kc, err := c.Kubeconfig()
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(reportDir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return err
	}
	// The suite runs kubectl (kubectl exec above all): svclab-kube is
	// kubectl when called by that name.
	binDir := filepath.Join(reportDir, "bin")
	kubectl := filepath.Join(binDir, "kubectl")
	os.RemoveAll(binDir)
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	if err := os.Symlink(kube, kubectl); err != nil {
		return err
	}
	os.Remove(filepath.Join(reportDir, "junit_01.xml"))
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	sp := &specProgress{p: p}
	srv, url, err := serveProgress(sp)
	if err != nil {
		return err
	}
	defer srv.Close()
	args := suiteArgs(o, kubeconfig, kubectl, reportDir, url)
	o.Log.Info("running the conformance suite", "suite", suite, "args", strings.Join(args, " "))
	done := p.Start(fmt.Sprintf("Running the specs matching %s (one after another; the suite's output goes to %s)", o.Focus, logPath))
	cmd := exec.CommandContext(ctx, suite, args...)
	cmd.Dir = reportDir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	// The suite writes to the file itself (a pipe would keep Wait waiting
	// for anything the suite started that holds it); the progress reads
	// the file as it grows.
	cmd.Stdout, cmd.Stderr = logFile, logFile
	stopTail := tailFile(logPath, sp)
	// Interrupted, the suite still writes its report: ask it as a
	// terminal's Ctrl-C does, and kill it if it does not stop.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 2 * time.Minute
	err = cmd.Run()
	stopTail()
	var exit *exec.ExitError
	if errors.As(err, &exit) && ctx.Err() == nil {
		err = nil // failed specs: the report says which
	}
	done(err)
	return err
}

// suiteArgs are the suite's flags: upstream's skeleton provider (a cluster
// that is reached through its kubeconfig and nothing else), the report
// directory, the focus, and the progress address.
func suiteArgs(o Options, kubeconfig, kubectl, reportDir, progressURL string) []string {
	args := []string{
		"--provider=skeleton",
		"--kubeconfig=" + kubeconfig,
		"--kubectl-path=" + kubectl,
		"--report-dir=" + reportDir,
		"--e2e-output-dir=" + reportDir,
		"--progress-report-url=" + progressURL,
		"--ginkgo.focus=" + o.Focus,
		"--ginkgo.timeout=" + o.Timeout.String(),
		"--ginkgo.no-color",
		"--ginkgo.v",
	}
	if o.Skip != "" {
		args = append(args, "--ginkgo.skip="+o.Skip)
	}
	return args
}

// progressUpdate is what upstream's e2e progress reporter posts
// (test/e2e/reporters.ProgressReporter).
type progressUpdate struct {
	Msg   string `json:"msg"`
	Total int    `json:"total"`
}

// specProgress turns a run into a progress line per finished spec: how
// many specs will run comes from the suite's progress posts (its
// ReportBeforeSuite), each finished spec from its verbose output (the
// reporter's per-spec posts do not arrive from a suite built outside
// test/e2e), so that the count never depends on both.
type specProgress struct {
	p            cluster.Progress
	mu           sync.Mutex
	total        int
	done, failed int
	spec         string // the spec running now, from its header line
	buf          []byte
}

// Write reads the suite's output (ginkgo -v, no colour): a spec starts
// with its full text ("[sig-network] DNS should …") and ends with a line
// that starts with "•" ("• [7.5 seconds]", "• [FAILED] [126.6 seconds]").
func (sp *specProgress) Write(b []byte) (int, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.buf = append(sp.buf, b...)
	for {
		i := bytes.IndexByte(sp.buf, '\n')
		if i < 0 {
			break
		}
		sp.line(string(sp.buf[:i]))
		sp.buf = sp.buf[i+1:]
	}
	if len(sp.buf) > 64<<10 {
		sp.buf = sp.buf[:0] // a line that long is no spec header
	}
	return len(b), nil
}

func (sp *specProgress) line(l string) {
	switch {
	case strings.HasPrefix(l, "[sig-"):
		// "[sig-network] DNS should … [Conformance] [sig-network, Conformance]":
		// the labels at the end go.
		if i := strings.LastIndex(l, " [sig-"); i > 0 {
			l = l[:i]
		}
		sp.spec = l
	case strings.HasPrefix(l, "• "):
		outcome := "passed"
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], "[") && !strings.ContainsAny(f[1][1:2], "0123456789") {
			outcome = strings.ToLower(strings.Trim(f[1], "[]"))
		}
		if outcome == "skipped" {
			return
		}
		sp.done++
		if outcome != "passed" {
			sp.failed++
		}
		line := fmt.Sprintf("%d", sp.done)
		if sp.total > 0 {
			line += fmt.Sprintf(" of %d", sp.total)
		}
		line += " specs done"
		if sp.failed > 0 {
			line += fmt.Sprintf(", %d failed", sp.failed)
		}
		sp.p.Infof("%s: %s %s", line, strings.ToUpper(outcome), sp.spec)
		sp.spec = ""
	}
}

// tailFile copies what is written to path into w, from its start, until
// the returned stop is called (which copies what is left first).
func tailFile(path string, w io.Writer) (stop func()) {
	f, err := os.Open(path)
	if err != nil {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		defer f.Close()
		for {
			_, _ = io.Copy(w, f)
			select {
			case <-quit:
				_, _ = io.Copy(w, f)
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return func() { close(quit); <-done }
}

// serveProgress listens on a loopback port for the suite's progress posts,
// which tell sp how many specs will run.
func serveProgress(sp *specProgress) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("listening for the suite's progress: %w", err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var u progressUpdate
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&u); err != nil {
			http.Error(w, "bad progress update", http.StatusBadRequest)
			return
		}
		sp.mu.Lock()
		defer sp.mu.Unlock()
		if u.Total > 0 && sp.total == 0 {
			sp.total = u.Total
			sp.p.Infof("%d specs to run", u.Total)
		}
	})}
	go srv.Serve(ln)
	return srv, "http://" + ln.Addr().String() + "/", nil
}
