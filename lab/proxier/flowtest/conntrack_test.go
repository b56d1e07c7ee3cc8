//go:build linux

package flowtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/proxier/conntrack"
	"github.com/svclab/svclab/lab/proxier/events"
	"github.com/svclab/svclab/lab/proxier/render"
)

// The Service of the conntrack test: UDP on a ClusterIP and a NodePort.
const (
	ctClusterIP = "10.96.0.60"
	ctPort      = 53
	ctNodePort  = 30053
	ctService   = "flow/udp"
)

// ctObjects are the objects of the conntrack test with the given
// endpoints ("ip@node" each).
func ctObjects(endpoints ...string) string {
	var eps []string
	for _, e := range endpoints {
		ip, node, _ := strings.Cut(e, "@")
		eps = append(eps, fmt.Sprintf("{addresses: [%s], nodeName: %s}", ip, node))
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Node
metadata: {name: %s}
status:
  addresses: [{type: InternalIP, address: %s}]
---
apiVersion: v1
kind: Service
metadata: {namespace: flow, name: udp}
spec:
  type: NodePort
  clusterIP: %s
  ports: [{name: dns, protocol: UDP, port: %d, targetPort: %d, nodePort: %d}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: flow, name: udp-1, labels: {kubernetes.io/service-name: udp}}
addressType: IPv4
ports: [{name: dns, protocol: UDP, port: %d}]
endpoints: [%s]
`, flowNode, nodeIP, ctClusterIP, ctPort, echoUDPPort, ctNodePort, echoUDPPort, strings.Join(eps, ", "))
}

// TestUDPConntrackCleanup sends real UDP flows to a ClusterIP (from a pod)
// and to a NodePort (from outside) while "svclab proxier run --objects"
// programs the node. Both flows are pinned in conntrack to endpoint A;
// then A leaves the EndpointSlice (it keeps answering: the pod is still
// there) and B joins. The proxier deletes the stale conntrack entries, so
// the next datagram of the same flow reaches B. With the
// skip-conntrack-cleanup fault on, the entries stay and the flows keep
// talking to A, as a learner's DNS client does with a deleted CoreDNS pod.
func TestUDPConntrackCleanup(t *testing.T) {
	requireRoot(t, "nft", "iptables", "iptables-restore", "sysctl")
	for _, mode := range []string{render.ModeNFTables, render.ModeIPTables} {
		for _, fault := range []bool{false, true} {
			name := mode + "/cleanup"
			if fault {
				name = mode + "/skip-conntrack-cleanup"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				udpConntrackCase(t, mode, fault)
			})
		}
	}
}

// ctWorld is the conntrack test's namespaces and proxier.
type ctWorld struct {
	node, ext, client Netns
	objects           string // the objects file
	proxier           *exec.Cmd
	http              *http.Client
}

func udpConntrackCase(t *testing.T, mode string, fault bool) {
	const podA, podB = "10.244.0.11", "10.244.1.21"
	w := newCTWorld(t, mode, map[string]string{"a": podA, "b": podB}, ctObjects(podA+"@"+flowNode))

	clusterIP := netip.AddrPortFrom(netip.MustParseAddr(ctClusterIP), ctPort)
	nodePort := netip.AddrPortFrom(netip.MustParseAddr(nodeIP), ctNodePort)
	// The rules are in place once a fresh flow gets through.
	w.waitReached(t, w.client, clusterIP, "a")

	flows := []struct {
		name string
		conn *udpFlow
	}{
		{"pod → cluster IP", w.dial(t, w.client, clusterIP)},
		{"outside → NodePort", w.dial(t, w.ext, nodePort)},
	}
	for _, f := range flows {
		if got, err := f.conn.ping(); err != nil || got != "a" {
			t.Fatalf("%s: first datagram answered by %q (%v), want a", f.name, got, err)
		}
	}
	if n := w.staleEntries(t, podA); n < 2 {
		t.Fatalf("%d conntrack entries answered by A, want one per flow", n)
	}

	if fault {
		w.post(t, "/faults", `{"skipConntrackCleanup":true}`)
	}
	// A leaves, B joins.
	seq := w.lastSeq(t)
	w.writeObjects(t, ctObjects(podB+"@other-node"))
	ev := w.waitEvent(t, seq, func(ev events.Event) bool {
		return ev.Kind == events.KindSync && ev.Error == "" && slices.Contains(ev.EndpointsChanged, ctService)
	})
	// A new flow goes to B either way: the rules changed.
	w.waitReached(t, w.client, clusterIP, "b")

	stale := w.staleEntries(t, podA)
	want := "b"
	if fault {
		want = "a"
		if ev.ConntrackDeleted != 0 || !strings.Contains(ev.Message, "skipped") {
			t.Errorf("sync event with the fault on: conntrackDeleted %d, message %q", ev.ConntrackDeleted, ev.Message)
		}
		if stale < 2 {
			t.Errorf("%d conntrack entries still answered by A, want both flows' (the fault keeps them)", stale)
		}
	} else {
		if ev.ConntrackDeleted < 2 {
			t.Errorf("sync event: conntrackDeleted %d, want the two flows' entries", ev.ConntrackDeleted)
		}
		if stale != 0 {
			t.Errorf("%d conntrack entries answered by A left after the cleanup", stale)
		}
	}
	for _, f := range flows {
		if got, err := f.conn.ping(); err != nil || got != want {
			t.Errorf("%s: next datagram of the same flow answered by %q (%v), want %s", f.name, got, err, want)
		}
	}
	if fault || t.Failed() {
		return
	}

	// B leaves too. As in v1.37, the flows to the ClusterIP of a Service
	// without endpoints are deleted (the next datagram is rejected), but
	// not those to its NodePorts.
	seq = w.lastSeq(t)
	w.writeObjects(t, ctObjects())
	ev = w.waitEvent(t, seq, func(ev events.Event) bool {
		return ev.Kind == events.KindSync && ev.Error == "" && slices.Contains(ev.EndpointsChanged, ctService)
	})
	if ev.ConntrackDeleted == 0 {
		t.Error("no endpoints: no conntrack entries deleted")
	}
	if n := w.staleEntries(t, podB); n != 1 {
		t.Errorf("no endpoints: %d conntrack entries answered by B, want the NodePort flow's only", n)
	}
	if _, err := flows[0].conn.ping(); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("%s without endpoints: %v, want connection refused", flows[0].name, err)
	}
	if got, err := flows[1].conn.ping(); err != nil || got != "b" {
		t.Errorf("%s without endpoints: answered by %q (%v), want b (NodePort entries are kept)", flows[1].name, got, err)
	}
}

func newCTWorld(t *testing.T, mode string, pods map[string]string, objects string) *ctWorld {
	t.Helper()
	ctx := t.Context()
	lab := newSandbox(t, "c"+mode[:1])
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	netnsOf := func(short string) Netns {
		ns, err := lab.Netns(ctx, short)
		must(err)
		return ns
	}
	w := &ctWorld{node: netnsOf("node"), ext: netnsOf("ext")}
	_, err := w.node.Exec(ctx, nil, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1", "net.ipv4.icmp_ratelimit=0")
	must(err)
	must(lab.Veth(ctx, w.node, lab.ID+"x", nodeIP+"/24", w.ext, "eth0", extClientIP+"/24"))
	must(w.ext.IP(ctx, "route", "add", "default", "via", nodeIP))
	// A default route (towards the outside client), as real nodes have
	// one: without it, traffic to a ClusterIP that is not DNATed has no
	// route and never reaches the filter hooks that reject it.
	must(w.node.IP(ctx, "route", "add", "default", "via", extClientIP))
	var servers []*EchoServer
	t.Cleanup(func() {
		for _, s := range servers {
			if err := s.Close(); err != nil {
				t.Errorf("close echo server %s: %v", s.Name, err)
			}
		}
	})
	i := 0
	addPod := func(name, ip string, echo bool) Netns {
		ns := netnsOf(name)
		hostIf := fmt.Sprintf("%sp%d", lab.ID, i)
		i++
		must(lab.Veth(ctx, w.node, hostIf, podGateway+"/32", ns, "eth0", ip+"/32"))
		must(w.node.IP(ctx, "route", "add", ip+"/32", "dev", hostIf))
		must(ns.IP(ctx, "route", "add", podGateway, "dev", "eth0", "scope", "link"))
		must(ns.IP(ctx, "route", "add", "default", "via", podGateway, "dev", "eth0"))
		if echo {
			s, err := StartEcho(ns, name, nil, []int{echoUDPPort}, testLogger(t))
			must(err)
			servers = append(servers, s)
		}
		return ns
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range pods {
			if !yield(n) {
				return
			}
		}
	}) {
		addPod(name, pods[name], true)
	}
	w.client = addPod("c", "10.244.0.100", false)

	w.objects = filepath.Join(t.TempDir(), "objects.yaml")
	w.writeObjects(t, objects)
	w.startProxier(t, mode)
	return w
}

func (w *ctWorld) writeObjects(t *testing.T, objects string) {
	t.Helper()
	tmp := w.objects + ".tmp"
	if err := os.WriteFile(tmp, []byte(objects), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, w.objects); err != nil {
		t.Fatal(err)
	}
	if w.proxier != nil {
		if err := w.proxier.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatalf("SIGHUP the proxier: %v", err)
		}
	}
}

// startProxier runs "svclab proxier run --objects" (this test binary) in
// the node namespace.
func (w *ctWorld) startProxier(t *testing.T, mode string) {
	t.Helper()
	args, _ := json.Marshal([]string{"--objects", w.objects, "--hostname-override", flowNode, "--bind-address", nodeIP,
		"--cluster-cidr", clusterCIDR, "--service-cidr", serviceCIDR, "--proxy-mode", mode,
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256"})
	logPath := filepath.Join(t.TempDir(), "proxier.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", w.node.Name, os.Args[0])
	cmd.Env = append(os.Environ(), proxierEnv+"="+string(args))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	// Registered after the lab: runs before the namespaces go.
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logf.Close()
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("proxier log:\n%s", data)
		}
	})
	w.proxier = cmd
	w.http = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := w.node.Do(func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	}}
}

func (w *ctWorld) request(t *testing.T, method, path, body string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://127.0.0.1:10249"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := w.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s %v: %s", method, path, resp.Status, err, data)
	}
	return string(data)
}

func (w *ctWorld) post(t *testing.T, path, body string) { w.request(t, http.MethodPost, path, body) }

// events returns the proxier's remembered events.
func (w *ctWorld) events(t *testing.T) []events.Event {
	t.Helper()
	var out []events.Event
	sc := bufio.NewScanner(strings.NewReader(w.request(t, http.MethodGet, "/events?follow=false", "")))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev events.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("bad event %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	return out
}

func (w *ctWorld) lastSeq(t *testing.T) uint64 {
	t.Helper()
	var seq uint64
	for _, ev := range w.events(t) {
		seq = max(seq, ev.Seq)
	}
	return seq
}

// waitEvent waits for an event after seq that matches.
func (w *ctWorld) waitEvent(t *testing.T, seq uint64, match func(events.Event) bool) events.Event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, ev := range w.events(t) {
			if ev.Seq > seq && match(ev) {
				return ev
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no matching event within 30 s; events: %+v", w.events(t))
	return events.Event{}
}

// waitReached waits until a fresh UDP flow from ns to dst is answered by
// backend.
func (w *ctWorld) waitReached(t *testing.T, ns Netns, dst netip.AddrPort, backend string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last Result
	for time.Now().Before(deadline) {
		last = Probe(t.Context(), ns, "udp", netip.Addr{}, dst, 500*time.Millisecond)
		if last.Outcome == Reached && last.Backend == backend {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("a new flow to %s never reached %s (last: %s)", dst, backend, last)
}

// staleEntries counts the node's conntrack entries of the Service's flows
// (ClusterIP or NodePort) whose reply comes from ip.
func (w *ctWorld) staleEntries(t *testing.T, ip string) int {
	t.Helper()
	h, err := netns.GetFromPath(w.node.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h, unix.NETLINK_NETFILTER)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	flows, err := conntrack.NewWithHandle(nh).ListEntries(unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range flows {
		if f.Forward.Protocol != unix.IPPROTO_UDP || f.Reverse.SrcIP.String() != ip {
			continue
		}
		dst := netip.AddrPortFrom(netip.MustParseAddr(f.Forward.DstIP.String()), f.Forward.DstPort)
		if dst == netip.AddrPortFrom(netip.MustParseAddr(ctClusterIP), ctPort) || dst.Port() == ctNodePort {
			n++
		}
	}
	return n
}

// udpFlow is a connected UDP socket: every datagram has the same
// addresses and ports, so they all belong to one conntrack entry.
type udpFlow struct{ conn net.Conn }

func (w *ctWorld) dial(t *testing.T, ns Netns, dst netip.AddrPort) *udpFlow {
	t.Helper()
	var c net.Conn
	err := ns.Do(func() error {
		var err error
		c, err = net.Dial("udp4", dst.String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &udpFlow{conn: c}
}

// ping sends a datagram and returns the name of the echo server that
// answered.
func (f *udpFlow) ping() (string, error) {
	f.conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := f.conn.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	buf := make([]byte, 512)
	n, err := f.conn.Read(buf)
	if err != nil {
		return "", err
	}
	name, _, _ := strings.Cut(strings.TrimSpace(string(buf[:n])), " ")
	return name, nil
}
