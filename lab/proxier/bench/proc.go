package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/svclab/svclab/lab/proxier/flowtest"
)

// The histograms both proxiers report (seconds).
const (
	metricSync    = "kubeproxy_sync_proxy_rules_duration_seconds"
	metricFull    = "kubeproxy_sync_full_proxy_rules_duration_seconds"
	metricPartial = "kubeproxy_sync_partial_proxy_rules_duration_seconds"
)

// Proc is a proxier process running in a network namespace, with its
// metrics server on MetricsAddr inside it.
type Proc struct {
	NS          flowtest.Netns
	MetricsAddr string
	LogPath     string

	cmd    *exec.Cmd
	exited chan struct{}
	err    error
	client *http.Client
}

// StartProc runs argv in ns ("ip netns exec" execs it, so the process is
// the proxier itself) with env added to the environment, its output in
// logPath.
func StartProc(ns flowtest.Netns, metricsAddr, logPath string, env []string, argv ...string) (*Proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	p := &Proc{NS: ns, MetricsAddr: metricsAddr, LogPath: logPath, exited: make(chan struct{})}
	p.cmd = exec.Command("ip", append([]string{"netns", "exec", ns.Name}, argv...)...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	// Its own process group, so that a terminal's ^C goes to the
	// benchmark, which stops it.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	go func() {
		p.err = p.cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	p.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := ns.Do(func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
		DisableKeepAlives: true,
	}}
	return p, nil
}

// PID is the proxier's process ID.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Stop ends the process: SIGTERM, then SIGKILL after grace.
func (p *Proc) Stop(grace time.Duration) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
	}
	p.cmd.Process.Kill()
	select {
	case <-p.exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("process %d did not exit after SIGKILL", p.PID())
	}
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// LogTail returns the last n lines of the process's output.
func (p *Proc) LogTail(n int) string {
	b, _ := os.ReadFile(p.LogPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Sample is one scrape of the metrics: each sample name (histograms as
// NAME_sum and NAME_count) summed over its label sets.
type Sample map[string]float64

// Count and Sum read a histogram.
func (s Sample) Count(h string) float64 { return s[h+"_count"] }
func (s Sample) Sum(h string) float64   { return s[h+"_sum"] }

// Metrics scrapes /metrics.
func (p *Proc) Metrics(ctx context.Context) (Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.MetricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads the Prometheus text format, keeping the kubeproxy_
// samples of IPv4. (Upstream kube-proxy runs an IPv6 proxier too wherever
// the kernel has IPv6, and its syncs of an empty IPv6 table land in the
// same histograms: summed in, they made its full syncs look up to twice
// as fast.)
func parseMetrics(r io.Reader) (Sample, error) {
	out := Sample{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "kubeproxy_") || strings.Contains(line, `ip_family="IPv6"`) {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
			// Label values may contain spaces: the value follows "} ".
			if _, after, ok := strings.Cut(line, "} "); ok {
				rest = after
			}
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		out[name] += v
	}
	return out, sc.Err()
}

// ErrTimeout is returned by WaitFor when the condition did not come true.
var ErrTimeout = errors.New("timed out")

// WaitFor polls the metrics until cond holds, the process exits or
// timeout passes.
func (p *Proc) WaitFor(ctx context.Context, timeout time.Duration, cond func(Sample) bool) (Sample, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		s, err := p.Metrics(ctx)
		if err == nil && cond(s) {
			return s, nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			if last != nil {
				return s, fmt.Errorf("%w after %s (last scrape error: %v)", ErrTimeout, timeout, last)
			}
			return s, fmt.Errorf("%w after %s", ErrTimeout, timeout)
		}
		select {
		case <-p.exited:
			return s, fmt.Errorf("proxier exited: %v; log:\n%s", p.err, p.LogTail(20))
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Settle waits until no sync has happened for quiet (at most timeout):
// after the first sync, late informers may cause another.
func (p *Proc) Settle(ctx context.Context, quiet, timeout time.Duration) (Sample, error) {
	deadline := time.Now().Add(timeout)
	prev, err := p.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	since := time.Now()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		cur, err := p.Metrics(ctx)
		if err != nil {
			return nil, err
		}
		if cur.Count(metricSync) != prev.Count(metricSync) {
			prev, since = cur, time.Now()
			continue
		}
		if time.Since(since) >= quiet {
			return cur, nil
		}
	}
	return prev, nil
}

// Memory is the process's resident set now and at its peak (MiB).
func (p *Proc) Memory() (rss, hwm float64, err error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.PID()), "status"))
	if err != nil {
		return 0, 0, err
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		f := bytes.Fields(v)
		if len(f) == 0 {
			continue
		}
		kb, _ := strconv.ParseFloat(string(f[0]), 64)
		switch string(k) {
		case "VmRSS":
			rss = kb / 1024
		case "VmHWM":
			hwm = kb / 1024
		}
	}
	return rss, hwm, nil
}
