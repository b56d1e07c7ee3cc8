package run

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/svclab/svclab/lab/proxier/events"
)

// The daemon under test runs in a child process (this test binary,
// re-executed inside the network namespace) so that it, and the nft and
// iptables commands it runs, live entirely in the namespace.
const helperEnv = "SVCLAB_PROXIER_RUN_HELPER_ARGS"

func TestDaemonHelper(t *testing.T) {
	raw := os.Getenv(helperEnv)
	if raw == "" {
		t.Skip("helper process only")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		t.Fatal(err)
	}
	cmd := NewRunCommand()
	cmd.SetArgs(args)
	cmd.SetErr(os.Stderr)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "daemon error:", err)
		os.Exit(1)
	}
}

const itObjects = `
apiVersion: v1
kind: Service
metadata: {namespace: demo, name: web}
spec:
  clusterIP: 172.30.0.10
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {namespace: demo, name: dns}
spec:
  clusterIP: 172.30.0.53
  ports: [{name: dns, port: 53, protocol: UDP}]
---
apiVersion: v1
kind: Service
metadata: {namespace: demo, name: lb}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  healthCheckNodePort: 32100
  clusterIP: 172.30.0.70
  ports: [{name: http, port: 80, nodePort: 30070}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: demo, name: lb-1, labels: {kubernetes.io/service-name: lb}}
addressType: IPv4
endpoints:
- {addresses: [10.180.0.70], nodeName: it-node}
- {addresses: [10.180.0.71], nodeName: it-node}
ports: [{name: http, port: 80, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: demo, name: web-1, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints:
- {addresses: [10.180.0.1], nodeName: it-node}
- {addresses: [10.180.2.1], nodeName: other}
ports: [{name: http, port: 8080, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: demo, name: dns-1, labels: {kubernetes.io/service-name: dns}}
addressType: IPv4
endpoints:
- {addresses: [10.180.0.53], nodeName: it-node}
ports: [{name: dns, port: 53, protocol: UDP}]
---
apiVersion: v1
kind: Node
metadata: {name: it-node, labels: {topology.kubernetes.io/zone: a}}
status:
  addresses: [{type: InternalIP, address: 192.168.77.2}]
`

// nsEnv is a network namespace created by the test.
type nsEnv struct {
	t    *testing.T
	name string
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func newNS(t *testing.T, suffix string) *nsEnv {
	t.Helper()
	name := fmt.Sprintf("svpx-it-%d-%s", os.Getpid(), suffix)
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	run(t, "ip", "-n", name, "link", "set", "lo", "up")
	// A veth pair with both ends in the namespace gives it a node IP
	// (no traffic leaves the namespace).
	run(t, "ip", "-n", name, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1")
	run(t, "ip", "-n", name, "addr", "add", "192.168.77.2/24", "dev", "eth0")
	run(t, "ip", "-n", name, "link", "set", "eth0", "up")
	run(t, "ip", "-n", name, "link", "set", "eth1", "up")
	return &nsEnv{t: t, name: name}
}

func (n *nsEnv) exec(args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", n.name}, args...)...).CombinedOutput()
	return string(out), err
}

// client returns an HTTP client whose connections are made inside the
// namespace (the socket is created there; it stays there).
func (n *nsEnv) client() *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		ch := make(chan result, 1)
		go func() {
			runtime.LockOSThread()
			// The thread is left in a changed state on error: let it die.
			orig, err := netns.Get()
			if err != nil {
				ch <- result{nil, err}
				return
			}
			defer orig.Close()
			target, err := netns.GetFromName(n.name)
			if err != nil {
				ch <- result{nil, err}
				return
			}
			defer target.Close()
			if err := netns.Set(target); err != nil {
				ch <- result{nil, err}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if serr := netns.Set(orig); serr == nil {
				runtime.UnlockOSThread()
			}
			ch <- result{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
	return &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}, Timeout: 10 * time.Second}
}

func (n *nsEnv) get(path string) (int, string) {
	n.t.Helper()
	resp, err := n.client().Get("http://127.0.0.1" + path)
	if err != nil {
		n.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (n *nsEnv) do(method, path, body string) (int, string) {
	n.t.Helper()
	req, _ := http.NewRequest(method, "http://127.0.0.1"+path, strings.NewReader(body))
	resp, err := n.client().Do(req)
	if err != nil {
		n.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func eventually(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startDaemon runs the daemon in ns; logs go to a file shown on failure.
func startDaemon(t *testing.T, ns *nsEnv, args []string) {
	t.Helper()
	raw, _ := json.Marshal(args)
	logPath := filepath.Join(t.TempDir(), "daemon.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns.name, os.Args[0], "-test.run=^TestDaemonHelper$", "-test.v=false")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(raw))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logFile.Close()
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("daemon log:\n%s", data)
		}
	})
}

// readEvents reads the remembered events (no follow).
func readEvents(t *testing.T, ns *nsEnv) []events.Event {
	t.Helper()
	_, body := ns.get(":10249/events?follow=false")
	var out []events.Event
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for sc.Scan() {
		var ev events.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("bad event %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	return out
}

func hasEvent(evs []events.Event, match func(events.Event) bool) bool {
	for _, ev := range evs {
		if match(ev) {
			return true
		}
	}
	return false
}

func TestDaemonInNetworkNamespace(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test (-short)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	for _, bin := range []string{"ip", "nft", "iptables-save", "iptables-restore"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed", bin)
		}
	}

	type modeCase struct {
		mode string
		// rules lists the programmed rules of the mode.
		rules func(ns *nsEnv) (string, error)
		// breakRule deletes the rules of demo/web by hand.
		breakRule func(t *testing.T, ns *nsEnv)
		// hasWebRule finds the rule of demo/web that breakRule deletes.
		hasWebRule func(rules string) bool
	}
	cases := []modeCase{
		{
			mode:  "nftables",
			rules: func(ns *nsEnv) (string, error) { return ns.exec("nft", "list", "table", "ip", "kube-proxy") },
			breakRule: func(t *testing.T, ns *nsEnv) {
				out, err := ns.exec("nft", "list", "chains", "ip")
				if err != nil {
					t.Fatalf("nft list chains: %v %s", err, out)
				}
				chain := ""
				for _, f := range strings.Fields(out) {
					if strings.HasPrefix(f, "service-") && strings.HasSuffix(f, "-demo/web/tcp/http") {
						chain = f
					}
				}
				if chain == "" {
					t.Fatalf("no service chain for demo/web in:\n%s", out)
				}
				if out, err := ns.exec("nft", "flush", "chain", "ip", "kube-proxy", chain); err != nil {
					t.Fatalf("nft flush chain: %v %s", err, out)
				}
			},
			// demo/web's DNAT rule: "... numgen random mod 2 map { 0 : 10.180.0.1 . 8080, ... }".
			hasWebRule: func(rules string) bool { return strings.Contains(rules, ": 10.180.0.1 . 8080") },
		},
		{
			mode:  "iptables",
			rules: func(ns *nsEnv) (string, error) { return ns.exec("iptables-save") },
			breakRule: func(t *testing.T, ns *nsEnv) {
				out, err := ns.exec("iptables-save", "-t", "nat")
				if err != nil {
					t.Fatal(err)
				}
				var rule string
				for _, l := range strings.Split(out, "\n") {
					if iptablesWebRule(l) {
						rule = l
					}
				}
				if rule == "" {
					t.Fatalf("no KUBE-SVC rule for demo/web:\n%s", out)
				}
				if out, err := ns.exec("sh", "-c", "iptables -t nat -D "+strings.TrimPrefix(rule, "-A ")); err != nil {
					t.Fatalf("iptables -D: %v %s", err, out)
				}
			},
			hasWebRule: func(rules string) bool {
				for _, l := range strings.Split(rules, "\n") {
					if iptablesWebRule(l) {
						return true
					}
				}
				return false
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			ns := newNS(t, tc.mode[:3])
			objects := filepath.Join(t.TempDir(), "objects.yaml")
			if err := os.WriteFile(objects, []byte(itObjects), 0o644); err != nil {
				t.Fatal(err)
			}
			startDaemon(t, ns, []string{
				"--objects", objects, "--hostname-override", "it-node", "--proxy-mode", tc.mode,
				"--cluster-cidr", "10.0.0.0/8", "--service-cidr", "172.30.0.0/16",
				"--healthz-bind-address", "127.0.0.1:10256", "--metrics-bind-address", "127.0.0.1:10249",
				"--iptables-min-sync-period", "100ms",
			})

			// Rules are programmed.
			eventually(t, "rules for demo/web", 20*time.Second, func() bool {
				out, err := tc.rules(ns)
				return err == nil && strings.Contains(out, "172.30.0.10") && tc.hasWebRule(out)
			})
			if tc.mode == "nftables" {
				out, _ := tc.rules(ns)
				if !strings.Contains(out, "192.168.77.2") {
					t.Errorf("the node IP is not in nodeport-ips:\n%s", out)
				}
			}

			// The servers.
			if code, body := ns.get(":10249/proxyMode"); code != 200 || body != tc.mode {
				t.Errorf("/proxyMode: %d %q", code, body)
			}
			code, body := ns.get(":10256/healthz")
			var health struct {
				Healthy      bool  `json:"healthy"`
				NodeEligible *bool `json:"nodeEligible"`
			}
			if err := json.Unmarshal([]byte(body), &health); err != nil || code != 200 || !health.Healthy || health.NodeEligible == nil || !*health.NodeEligible {
				t.Errorf("/healthz: %d %s (%v)", code, body, err)
			}
			if code, _ := ns.get(":10256/livez"); code != 200 {
				t.Errorf("/livez: %d", code)
			}
			_, metricsText := ns.get(":10249/metrics")
			for _, want := range []string{
				`kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"}`,
				`kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"} `,
				`kubeproxy_proxy_healthz_total{code="200"} `,
			} {
				if !strings.Contains(metricsText, want) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
			// The healthCheckNodePort of the eTP Local LoadBalancer Service.
			resp, err := ns.client().Get("http://192.168.77.2:32100/")
			if err != nil {
				t.Fatalf("health check node port: %v", err)
			}
			hcBody, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("X-Load-Balancing-Endpoint-Weight") != "2" || !strings.Contains(string(hcBody), `"localEndpoints": 2`) {
				t.Errorf("health check node port: %d %v %s", resp.StatusCode, resp.Header, hcBody)
			}
			if code, body := ns.get(":10249/configz"); code != 200 || !strings.Contains(body, "kubeproxy.config.k8s.io") {
				t.Errorf("/configz: %d %s", code, body)
			}
			// The rules are in place before the sync's event is published
			// (after the rule listing for its diff): wait for it.
			evs := readEvents(t, ns)
			for deadline := time.Now().Add(10 * time.Second); len(evs) == 0 && time.Now().Before(deadline); evs = readEvents(t, ns) {
				time.Sleep(100 * time.Millisecond)
			}
			if len(evs) == 0 || !evs[0].Full || evs[0].Reason != "initial" || evs[0].Mode != tc.mode || len(evs[0].RulesAdded) == 0 {
				t.Fatalf("first event %+v", evs)
			}

			// A live subscriber sees the next sync.
			live := make(chan events.Event, 16)
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			go func() {
				req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:10249/events?replay=0", nil)
				c := ns.client()
				c.Timeout = 0
				resp, err := c.Do(req)
				if err != nil {
					return
				}
				defer resp.Body.Close()
				sc := bufio.NewScanner(resp.Body)
				sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
				for sc.Scan() {
					var ev events.Event
					if json.Unmarshal(sc.Bytes(), &ev) == nil {
						live <- ev
					}
				}
			}()
			time.Sleep(300 * time.Millisecond) // let the subscription start

			// An edit of the objects file is picked up: a partial sync.
			if err := os.WriteFile(objects, []byte(strings.Replace(itObjects, "10.180.2.1", "10.180.2.9", 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			select {
			case ev := <-live:
				if ev.Kind != "sync" || ev.Full || len(ev.EndpointsChanged) != 1 || ev.EndpointsChanged[0] != "demo/web" {
					t.Errorf("live event %+v", ev)
				}
				if !slicesContainsSub(ev.RulesAdded, "10.180.2.9") || !slicesContainsSub(ev.RulesRemoved, "10.180.2.1") {
					t.Errorf("rule diff +%v -%v", ev.RulesAdded, ev.RulesRemoved)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("no live event after editing the objects file")
			}

			// A rule deleted by hand is repaired by the next full sync.
			tc.breakRule(t, ns)
			if out, _ := tc.rules(ns); tc.hasWebRule(out) {
				t.Fatalf("rule still there after deleting it:\n%s", out)
			}
			if code, _ := ns.do("POST", ":10249/sync?full=true", ""); code != 200 {
				t.Fatalf("POST /sync: %d", code)
			}
			eventually(t, "the repair", 15*time.Second, func() bool {
				out, err := tc.rules(ns)
				return err == nil && tc.hasWebRule(out)
			})
			eventually(t, "the repair event", 5*time.Second, func() bool {
				return hasEvent(readEvents(t, ns), func(ev events.Event) bool {
					return ev.Full && ev.Reason == "requested" && len(ev.RulesAdded) > 0
				})
			})

			// A fault switch: leave demo/web out, then put it back.
			if code, body := ns.do("POST", ":10249/faults", `{"omitService":"demo/web"}`); code != 200 || !strings.Contains(body, `"omitService":"demo/web"`) {
				t.Fatalf("POST /faults: %d %s", code, body)
			}
			eventually(t, "demo/web to be left out", 15*time.Second, func() bool {
				out, err := tc.rules(ns)
				return err == nil && !strings.Contains(out, "172.30.0.10") && strings.Contains(out, "172.30.0.53")
			})
			_, metricsText = ns.get(":10249/metrics")
			if !strings.Contains(metricsText, `svclab_proxier_fault_active{fault="omit-service"} 1`) {
				t.Error("fault metric not set")
			}
			if code, _ := ns.do("DELETE", ":10249/faults", ""); code != 200 {
				t.Fatalf("DELETE /faults: %d", code)
			}
			eventually(t, "demo/web to come back", 15*time.Second, func() bool {
				out, err := tc.rules(ns)
				return err == nil && strings.Contains(out, "172.30.0.10")
			})
			if !hasEvent(readEvents(t, ns), func(ev events.Event) bool { return ev.Kind == "fault" }) {
				t.Error("no fault event")
			}
		})
	}
}

// iptablesWebRule matches the masquerade rule of demo/web's service
// chain, which only a full sync (or a change of demo/web) rewrites.
func iptablesWebRule(line string) bool {
	return strings.HasPrefix(line, "-A KUBE-SVC-") && strings.Contains(line, "demo/web:http cluster IP") && strings.Contains(line, "KUBE-MARK-MASQ")
}

func slicesContainsSub(list []string, sub string) bool {
	for _, l := range list {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}
