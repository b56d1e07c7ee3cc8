//go:build linux

package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded/hostexec"
	"github.com/svclab/svclab/lab/embedded/loadbalancer"
	"github.com/svclab/svclab/lab/embedded/nsenter"
)

// The lab's load balancer (package loadbalancer) runs as a component of its
// own: this binary re-executed as svclab-load-balancer, in the host's
// namespaces, with the admin kubeconfig. Its forwarding plane is a route
// per load-balancer address in the lab's load-balancer network namespace
// (LBSpec): a multipath route over the healthy nodes (hashed on addresses
// and ports), or a blackhole when none is healthy. It asks the nodes from
// that namespace, as the load balancer in front of them would.

const lbName = "load-balancer"

func (p paths) lbSocket() string { return filepath.Join(p.dir, "load-balancer.sock") }

// LoadBalancerComponent runs the lab's load balancer; its health is the
// process's, on a Unix socket.
func LoadBalancerComponent(dir string) Component {
	return Component{
		Name:         lbName,
		After:        "kube-apiserver",
		Self:         true,
		Argv0:        LoadBalancerArg0,
		Args:         []string{dir},
		Health:       "http://load-balancer/healthz",
		HealthSocket: paths{dir}.lbSocket(),
	}
}

// runLoadBalancer is the re-executed load balancer's main.
func runLoadBalancer(dir string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	pa := paths{dir}
	st, err := loadState(pa)
	if err != nil {
		log.Error("cannot read the cluster state", "err", err)
		return 1
	}
	if st.LB == nil {
		log.Error("this cluster was made without a load balancer")
		return 1
	}
	pool, err := netip.ParsePrefix(st.LB.Pool)
	if err != nil {
		log.Error("the load balancer's pool", "err", err)
		return 1
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", pa.kubeconfig())
	if err != nil {
		log.Error("the cluster's kubeconfig", "err", err)
		return 1
	}
	cfg.UserAgent = LoadBalancerArg0
	cluster.BoundAnswers(cfg)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Error("a client for the cluster", "err", err)
		return 1
	}
	os.Remove(pa.lbSocket())
	l, err := net.Listen("unix", pa.lbSocket())
	if err != nil {
		log.Error("opening the health socket", "err", err)
		return 1
	}
	ns := nsenter.Netns{Path: filepath.Join("/run/netns", st.LB.Netns)}
	ctrl := &loadbalancer.Controller{
		Client: client,
		Pool:   pool,
		Plane:  routePlane{netns: st.LB.Netns, r: hostexec.Exec{}},
		Prober: netnsProber{ns: ns},
		Log:    log,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })
	mux.HandleFunc("/rounds", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, ctrl.Rounds()) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	defer srv.Close()
	if err := ctrl.Run(ctx); err != nil {
		log.Error("load balancer", "err", err)
		return 1
	}
	return 0
}

// routePlane is the load balancer's forwarding plane: host routes in its
// network namespace.
type routePlane struct {
	netns string
	r     hostexec.Runner
}

func (p routePlane) Route(ctx context.Context, addr netip.Addr, nodes []netip.Addr) error {
	args := []string{"-n", p.netns, "route", "replace"}
	switch len(nodes) {
	case 0:
		args = append(args, "blackhole", addr.String()+"/32")
	case 1:
		args = append(args, addr.String()+"/32", "via", nodes[0].String(), "dev", "eth0")
	default:
		args = append(args, addr.String()+"/32")
		for _, n := range nodes {
			args = append(args, "nexthop", "via", n.String(), "dev", "eth0")
		}
	}
	return run(ctx, p.r, "ip", args...)
}

func (p routePlane) Remove(ctx context.Context, addr netip.Addr) error {
	err := run(ctx, p.r, "ip", "-n", p.netns, "route", "del", addr.String()+"/32")
	if err != nil && strings.Contains(err.Error(), "No such process") {
		return nil // gone already
	}
	return ignoreMissing(err)
}

// ipRoute is one route of `ip -j route show`.
type ipRoute struct {
	Type     string `json:"type"`
	Dst      string `json:"dst"`
	Gateway  string `json:"gateway"`
	Nexthops []struct {
		Gateway string `json:"gateway"`
	} `json:"nexthops"`
}

func (p routePlane) Routes(ctx context.Context) (map[netip.Addr][]netip.Addr, error) {
	out, err := p.r.Run(ctx, nil, "ip", "-n", p.netns, "-j", "route", "show")
	if err != nil {
		return nil, err
	}
	return parseRoutes(out)
}

// parseRoutes reads the host routes of `ip -j route show`: where each
// address's traffic goes (a blackhole: nowhere).
func parseRoutes(out []byte) (map[netip.Addr][]netip.Addr, error) {
	var routes []ipRoute
	if err := json.Unmarshal(out, &routes); err != nil {
		return nil, fmt.Errorf("reading the load balancer's routes: %w", err)
	}
	m := map[netip.Addr][]netip.Addr{}
	for _, r := range routes {
		a, err := netip.ParseAddr(strings.TrimSuffix(r.Dst, "/32"))
		if err != nil {
			continue // the subnet's own route, the default
		}
		var to []netip.Addr
		if gw, err := netip.ParseAddr(r.Gateway); err == nil {
			to = append(to, gw)
		}
		for _, nh := range r.Nexthops {
			if gw, err := netip.ParseAddr(nh.Gateway); err == nil {
				to = append(to, gw)
			}
		}
		if r.Type != "blackhole" && len(to) == 0 {
			continue
		}
		m[a] = to
	}
	return m, nil
}

// probeTimeout bounds a health check, as a cloud load balancer's timeout
// does (GCP's default is 5 s; a lab node answers in milliseconds, but a
// busy machine can take a second).
const probeTimeout = 2 * time.Second

// netnsProber asks nodes over HTTP from the load balancer's namespace.
type netnsProber struct{ ns cluster.Netns }

func (p netnsProber) Probe(ctx context.Context, node netip.Addr, port int, path string) (bool, string) {
	client := &http.Client{
		Timeout: probeTimeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
				return p.ns.DialFrom(ctx, network, "", address)
			},
			DisableKeepAlives: true,
		},
	}
	url := "http://" + netip.AddrPortFrom(node, uint16(port)).String() + path
	resp, err := client.Get(url)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return false, fmt.Sprintf("no answer within %s", probeTimeout)
		}
		if strings.Contains(err.Error(), "connection refused") {
			return false, "connection refused"
		}
		return false, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	detail := fmt.Sprint(resp.StatusCode)
	if b := strings.Join(strings.Fields(string(body)), " "); b != "" {
		if len(b) > 120 {
			b = b[:120] + "…"
		}
		detail += " " + b
	}
	return resp.StatusCode == http.StatusOK, detail
}

// WaitLoadBalancer returns once the load balancer has checked the nodes
// often enough, after it was called, to act on what it finds: graders
// then see the traffic go where the load balancer will send it.
func (c *Cluster) WaitLoadBalancer(ctx context.Context) error {
	if c.st.LB == nil {
		return nil
	}
	client := socketClient(paths{c.dir}.lbSocket())
	defer client.CloseIdleConnections()
	rounds := func() (int64, error) {
		resp, err := client.Get("http://load-balancer/rounds")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var n int64
		_, err = fmt.Fscan(resp.Body, &n)
		return n, err
	}
	// The round under way may have begun before the call: wait for the
	// ones after it.
	want := int64(-1)
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := rounds()
		switch {
		case err == nil && want < 0:
			want = n + loadbalancer.RoundsToAct + 1
		case err == nil && n >= want:
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("the lab's load balancer does not answer (see 'svclab cluster list'): %w", err)
			}
			return fmt.Errorf("the lab's load balancer did not check the nodes again within 30s")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
