package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/clustertest"
)

func TestReadJUnit(t *testing.T) {
	ran, skipped, setup, err := readJUnit("testdata/junit_01.xml")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range ran {
		names = append(names, s.State+" "+s.Name)
	}
	want := []string{
		"passed [sig-network] Services should serve a basic endpoint from pods  [Conformance]",
		"failed [sig-network] Services should be able to change the type from ExternalName to NodePort [Conformance]",
	}
	if !slices.Equal(names, want) {
		t.Errorf("specs:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	if skipped != 2 || len(setup) != 0 {
		t.Errorf("skipped %d, failed suite nodes %v", skipped, setup)
	}
	if got := ran[1].Reason(); got != "[FAILED] service is not reachable within 2m0s timeout on endpoint 10.96.12.7:80 over TCP protocol" {
		t.Errorf("reason %q", got)
	}
	if !strings.Contains(ran[1].Message, "service is not reachable within 2m0s") || ran[1].Duration != 121300*time.Millisecond {
		t.Errorf("failure %q after %s", ran[1].Message, ran[1].Duration)
	}

	// A failed suite node is the suite's set-up failing, not a spec.
	dir := t.TempDir()
	data, _ := os.ReadFile("testdata/junit_01.xml")
	data = bytes.Replace(data, []byte(`"[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed"`),
		[]byte(`"[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="failed"`), 1)
	os.WriteFile(filepath.Join(dir, "j.xml"), data, 0o644)
	if _, _, setup, _ := readJUnit(filepath.Join(dir, "j.xml")); len(setup) != 1 || setup[0].Name != "[SynchronizedBeforeSuite]" {
		t.Errorf("failed suite nodes %+v", setup)
	}
	os.WriteFile(filepath.Join(dir, "bad.xml"), []byte("<testsuites><testsuite>"), 0o644)
	if _, _, _, err := readJUnit(filepath.Join(dir, "bad.xml")); err == nil {
		t.Error("a truncated report was read without an error")
	}
}

// lines records progress.
type lines struct {
	mu    sync.Mutex
	steps []string
	infos []string
}

func (l *lines) Start(step string) func(error) {
	l.mu.Lock()
	l.steps = append(l.steps, step)
	l.mu.Unlock()
	return func(error) {}
}
func (l *lines) Infof(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.infos = append(l.infos, fmt.Sprintf(format, args...))
}

// A progress line per finished spec, read from the suite's verbose output
// (written in pieces, as a pipe delivers it), with the number of specs
// from its progress post; garbage posts are refused.
func TestSpecProgress(t *testing.T) {
	var l lines
	sp := &specProgress{p: &l}
	srv, url, err := serveProgress(sp)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	post := func(body string) int {
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	post(`{"msg":"","total":3,"completed":0}`)
	if code := post(`{not json`); code != http.StatusBadRequest {
		t.Errorf("garbage answered %d", code)
	}
	out := `------------------------------
[sig-network] DNS should provide DNS for the cluster [Conformance] [sig-network, Conformance]
k8s.io/kubernetes@v1.37.2/test/e2e/network/dns.go:50
  STEP: Creating a kubernetes client @ 12/02/26 13:17:43.456
• [7.514 seconds]
------------------------------
[sig-network] DNS should provide DNS for ExternalName services [Conformance] [sig-network, Conformance]
  [FAILED] in [It] - k8s.io/kubernetes@v1.37.2/test/e2e/network/dns_common.go:476 @ 12/02/26 13:18:53.653
• [FAILED] [126.641 seconds]
[sig-network] DNS [It] should provide DNS for ExternalName services [Conformance] [sig-network, Conformance]
------------------------------
[sig-network] Services should serve a basic endpoint from pods [Conformance] [sig-network, Conformance]
• [0.061 seconds]
`
	for len(out) > 0 {
		n := min(len(out), 37)
		sp.Write([]byte(out[:n]))
		out = out[n:]
	}
	want := []string{"3 specs to run",
		"1 of 3 specs done: PASSED [sig-network] DNS should provide DNS for the cluster [Conformance]",
		"2 of 3 specs done, 1 failed: FAILED [sig-network] DNS should provide DNS for ExternalName services [Conformance]",
		"3 of 3 specs done, 1 failed: PASSED [sig-network] Services should serve a basic endpoint from pods [Conformance]"}
	if !slices.Equal(l.infos, want) {
		t.Errorf("lines\n%q\nwant\n%q", l.infos, want)
	}
}

// fakeSuite stands in for e2e.test: it checks what a run gives it (a
// kubeconfig, kubectl on its PATH, the flags), copies $REPORT to the
// report directory, and fails as the suite does when a spec failed. With
// $HANG it waits to be interrupted and writes its report then.
const fakeSuite = `#!/bin/sh
echo "args: $*"
for a in "$@"; do
  case "$a" in --report-dir=*) dir=${a#--report-dir=} ;; esac
done
[ -f "$KUBECONFIG" ] || { echo "no kubeconfig"; exit 3; }
[ -x "$(command -v kubectl)" ] || { echo "no kubectl"; exit 4; }
if [ -n "$HANG" ]; then
  trap 'cp "$REPORT" "$dir/junit_01.xml"; exit 1' INT
  sleep 30 & wait
fi
[ -n "$REPORT" ] && cp "$REPORT" "$dir/junit_01.xml"
exit 1
`

func testOptions(t *testing.T, p *clustertest.Provider) (Options, *lines) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "e2e.test")
	if err := os.WriteFile(bin, []byte(fakeSuite), 0o755); err != nil {
		t.Fatal(err)
	}
	report, _ := filepath.Abs("testdata/junit_01.xml")
	t.Setenv("REPORT", report)
	l := &lines{}
	return Options{
		Provider:  p,
		ReportDir: t.TempDir(),
		Focus:     ServicesFocus,
		Suite:     func(context.Context, cluster.Progress) (string, error) { return bin, nil },
		KubeBin:   func(context.Context, cluster.Progress) (string, error) { return "/bin/true", nil },
		Progress:  l,
	}, l
}

func TestRun(t *testing.T) {
	ctx := context.Background()
	p := clustertest.NewProvider()
	o, l := testOptions(t, p)
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Created) != 1 || !strings.HasPrefix(p.Created[0], "cf-") || !slices.Equal(p.Deleted, p.Created) {
		t.Errorf("created %v, deleted %v", p.Created, p.Deleted)
	}
	if res.OK() || len(res.Specs) != 2 || len(res.Failed()) != 1 || res.Skipped != 2 {
		t.Errorf("result %+v", res)
	}
	sum := res.Summary()
	if !strings.HasPrefix(sum, "sig-network conformance: 1 of 2 specs passed in ") || !strings.Contains(sum, "embedded cluster "+p.Created[0]) ||
		!strings.HasSuffix(sum, "(JUnit: "+filepath.Join(o.ReportDir, "junit_01.xml")+")") {
		t.Errorf("summary %q", sum)
	}
	log, _ := os.ReadFile(res.Log)
	for _, want := range []string{"--provider=skeleton", "--ginkgo.focus=" + ServicesFocus, "--kubectl-path=" + filepath.Join(o.ReportDir, "bin", "kubectl"), "--progress-report-url=http://127.0.0.1:"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("the suite was not given %s:\n%s", want, log)
		}
	}
	if !slices.ContainsFunc(l.steps, func(s string) bool { return strings.HasPrefix(s, "Running the specs matching") }) ||
		!slices.Contains(l.steps, "Deleting cluster "+p.Created[0]) {
		t.Errorf("steps %q", l.steps)
	}
}

func TestRunRefusesAnExistingCluster(t *testing.T) {
	p := clustertest.NewProvider("lab")
	o, _ := testOptions(t, p)
	o.Cluster = "lab"
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "fresh cluster") {
		t.Errorf("err %v", err)
	}
	if len(p.Created) != 0 || len(p.Deleted) != 0 || !slices.Equal(p.Names(), []string{"lab"}) {
		t.Errorf("created %v, deleted %v", p.Created, p.Deleted)
	}
}

func TestRunKeep(t *testing.T) {
	p := clustertest.NewProvider()
	o, _ := testOptions(t, p)
	o.Keep, o.Cluster = true, "kept"
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Names(), []string{"kept"}) {
		t.Errorf("clusters %v", p.Names())
	}
}

// An interrupted run interrupts the suite, which still writes its report,
// and deletes the cluster.
func TestRunInterrupted(t *testing.T) {
	p := clustertest.NewProvider()
	o, _ := testOptions(t, p)
	t.Setenv("HANG", "1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	res, err := Run(ctx, o)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v", err)
	}
	if res == nil || len(res.Specs) != 2 {
		t.Errorf("no report after the interrupt: %+v", res)
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("the suite was not interrupted: %s", time.Since(start))
	}
	if len(p.Names()) != 0 {
		t.Errorf("clusters left: %v", p.Names())
	}
}

// A suite that writes no report is an error that points at its output.
func TestRunWithoutReport(t *testing.T) {
	p := clustertest.NewProvider()
	o, _ := testOptions(t, p)
	t.Setenv("REPORT", "")
	_, err := Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "wrote no report") || !strings.Contains(err.Error(), "e2e.log") {
		t.Errorf("err %v", err)
	}
	if len(p.Names()) != 0 {
		t.Errorf("clusters left: %v", p.Names())
	}
}

// The network run leaves out exactly the tagged specs it names, and each
// with a reason.
func TestNetworkSkip(t *testing.T) {
	re := regexp.MustCompile(NetworkSkip())
	for spec, skipped := range map[string]bool{
		"[sig-network] Services should be rejected for evicted pods (no endpoints exist) [sig-network]":                            false,
		"[sig-network] Services should serve a basic endpoint from pods [Conformance] [sig-network]":                               true,
		"[sig-network] [Feature:IPv6DualStack] should create pod, add ipv6 and ipv4 ip to pod ips [sig-network]":                   true,
		"[sig-network] LoadBalancers [Feature:LoadBalancer] should be able to change the type and ports of a TCP service [Slow]":   true,
		"[sig-network] Networking should provide Internet connection for containers [Feature:Networking-IPv4] [sig-network]":       true,
		"[sig-network] Services should work after restarting kube-proxy [Disruptive] [sig-network]":                                true,
		"[sig-network] Netpol NetworkPolicy between server and client should enforce policy [Feature:NetworkPolicy] [sig-network]": false,
	} {
		if re.MatchString(spec) != skipped {
			t.Errorf("%q: skipped %v, want %v", spec, !skipped, skipped)
		}
	}
	for _, s := range NetworkSkips {
		if s.Why == "" {
			t.Errorf("%s is skipped without a reason", s.Pattern)
		}
	}
}
