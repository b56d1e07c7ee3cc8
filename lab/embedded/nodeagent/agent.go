//go:build linux

package nodeagent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded/hostexec"
)

// Run runs the node's agent until ctx ends.
func Run(ctx context.Context, cfg Config, images Images, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("node agent configuration: %w", err)
	}
	for _, d := range []string{cfg.StateDir, filepath.Join(cfg.StateDir, "pods"), filepath.Join(cfg.StateDir, "runc")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	ctx = vklog.WithLogger(ctx, slogLogger{log.With("component", "virtual-kubelet")})
	restCfg, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("reading the node's kubeconfig: %w", err)
	}
	restCfg.UserAgent = "kubelet/" + "v1.37.2 (svclab node agent)"
	// The kubelet's defaults (kubeAPIQPS, kubeAPIBurst): client-go's
	// own (5, 10) hold a node starting a few pods at once to a crawl,
	// each pod taking several status updates, events and a token.
	restCfg.QPS, restCfg.Burst = 50, 100
	cluster.BoundAnswers(restCfg)
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	tlsCfg, err := servingTLS(cfg)
	if err != nil {
		return err
	}
	listener, err := listenIn(cfg.Netns, net.JoinHostPort(cfg.NodeIP, strconv.Itoa(KubeletPort)))
	if err != nil {
		return fmt.Errorf("opening the kubelet endpoint on %s:%d: %w", cfg.NodeIP, KubeletPort, err)
	}
	defer listener.Close()

	eb := record.NewBroadcaster(record.WithContext(ctx))
	eb.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer eb.Shutdown()
	recorder := eb.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: cfg.NodeName})

	// ConfigMaps and Secrets from a cache: volumes are refreshed from
	// them every few seconds; Services for containers' environment.
	scm := informers.NewSharedInformerFactory(client, 0)
	cmLister, secretLister := scm.Core().V1().ConfigMaps().Lister(), scm.Core().V1().Secrets().Lister()
	svcLister := scm.Core().V1().Services().Lister()
	scm.Start(ctx.Done())
	defer scm.Shutdown()
	scm.WaitForCacheSync(ctx.Done())
	pn := newPodNetwork(hostexec.Exec{}, cfg.Netns, cfg.Isolation.Userns, cfg.PodNetnsPrefix, cfg.StateDir)
	// The agent reaps the containers it starts (see startDetached).
	if err := SetSubreaper(); err != nil {
		return fmt.Errorf("becoming the containers' reaper: %w", err)
	}
	go ReapStrays(ctx, 5*time.Second, log)
	rt := &runc{root: filepath.Join(cfg.StateDir, "runc"), marker: cfg.Marker, exits: cfg.ExitsDir, cgroupParent: cfg.CgroupParent,
		iso: cfg.Isolation, node: cfg.NodeName}
	if cfg.NodeContainer.ID != "" {
		if err := keepNodeContainer(ctx, cfg.NodeContainer, cfg.Marker, cfg.ExitsDir, log); err != nil {
			return err
		}
	}
	// The pods an earlier run of the agent left: adopted if the node
	// still runs them, else cleared away.
	adopt := findAdoptable(ctx, client, cfg, rt, pn, log)
	prov := &provider{
		cfg:    cfg,
		client: client,
		log:    log,
		net:    pn,
		rt:     rt,
		images: images,
		env:    clientEnvSource{client: client, svcs: svcLister},
		vols: volumeSource{client: client, nodeRoot: cfg.Isolation.Rootfs(cfg.NodeName, cfg.NodeContainer.ID), uid: cfg.Isolation.RootUID(),
			cms: cmLister, secrets: secretLister},
		events:  recorder,
		nodeCtx: ctx,
		pods:    map[string]*podRun{},
		adopt:   adopt,
	}
	cfg.Mounts.join(prov)
	defer cfg.Mounts.leave(prov)
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })
	if cfg.NodeContainer.ID != "" {
		mux.Handle("/logs/", nodeLogs(cfg.Isolation.Rootfs(cfg.NodeName, cfg.NodeContainer.ID)))
	}
	runtimeErr := runtimeCheck(exec.LookPath)
	if runtimeErr != nil {
		log.Error("the node cannot run containers; it registers NotReady", "err", runtimeErr)
	}
	nodeObj := nodeObject(cfg, runcVersion(ctx), runtimeErr)
	n, err := nodeutil.NewNode(cfg.NodeName,
		func(nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
			return prov, nodeProvider{node: nodeObj, lookPath: exec.LookPath, interval: 10 * time.Second}, nil
		},
		nodeutil.WithClient(client),
		nodeutil.AttachProviderRoutes(mux),
		func(c *nodeutil.NodeConfig) error {
			c.NodeSpec = *nodeObj
			c.EventRecorder = quietRecorder{recorder}
			// As the kubelet, which works on every pod at once: a node
			// starting many pods should not queue their status updates.
			c.NumWorkers = 16
			c.InformerResyncPeriod = time.Minute
			// The agent resolves containers' environment itself, as the
			// kubelet does: when each container starts (status.podIP is
			// known by then), in order, with $(VAR) references.
			c.SkipDownwardAPIResolution = true
			// The HTTP server is ours (its listener lives in the node's
			// network namespace); leave virtual-kubelet's off.
			c.TLSConfig = nil
			return nil
		},
	)
	if err != nil {
		return fmt.Errorf("setting up the node: %w", err)
	}
	srv := &http.Server{Handler: mux, TLSConfig: tlsCfg, ReadHeaderTimeout: 30 * time.Second}
	go srv.Serve(tls.NewListener(listener, tlsCfg))
	defer srv.Close()

	routes := &routeSync{cfg: cfg, runner: hostexec.Exec{}, net: pn, log: log}
	go routes.watch(ctx, client)
	go enforceNetworkPolicy(ctx, cfg, client, log)
	go syncStatuses(ctx, client, cfg.NodeName, prov, log)
	go prov.evictPods(ctx)

	log.Info("node agent starting", "node", cfg.NodeName, "ip", cfg.NodeIP)
	err = n.Run(ctx)
	if ctx.Err() != nil {
		// Stopped, as a kubelet is stopped: the node's containers go
		// on, and the next run of the agent adopts them.
		return nil
	}
	return err
}

// quietRecorder drops virtual-kubelet's own success events ("Create pod in
// provider successfully"), which a kubelet does not emit; failures pass.
type quietRecorder struct{ record.EventRecorder }

func (q quietRecorder) Event(obj runtime.Object, typ, reason, msg string) {
	if !vkNoise(reason) {
		q.EventRecorder.Event(obj, typ, reason, msg)
	}
}

func (q quietRecorder) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	if !vkNoise(reason) {
		q.EventRecorder.Eventf(obj, typ, reason, format, args...)
	}
}

func (q quietRecorder) AnnotatedEventf(obj runtime.Object, ann map[string]string, typ, reason, format string, args ...any) {
	if !vkNoise(reason) {
		q.EventRecorder.AnnotatedEventf(obj, ann, typ, reason, format, args...)
	}
}

func vkNoise(reason string) bool {
	return strings.HasPrefix(reason, "Provider") && strings.HasSuffix(reason, "Success")
}

// servingTLS is the kubelet endpoint's TLS: the node's certificate, and
// client certificates verified against the cluster CA (the API server
// presents its kubelet client certificate).
func servingTLS(cfg Config) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(cfg.ServingCert, cfg.ServingKey)
	if err != nil {
		return nil, fmt.Errorf("loading the kubelet serving certificate: %w", err)
	}
	caPEM, err := os.ReadFile(cfg.ClientCA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("the client CA file holds no certificate")
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}, nil
}

// routeSync keeps the node's routes to the other nodes' pod CIDRs, as
// kindnet does, and tells the pod network the node's own CIDR.
type routeSync struct {
	cfg    Config
	runner hostexec.Runner
	net    *podNetwork
	log    *slog.Logger
	// allow, when set, says which Node's route may be kept: one the
	// lab's cluster-admin can make up must not steer a namespace that is
	// not the lab's (see PodRoutes).
	allow func(node string, ip netip.Addr, cidr netip.Prefix) bool

	mu        sync.Mutex
	installed map[string]bool
}

func (s *routeSync) watch(ctx context.Context, client kubernetes.Interface) {
	f := informers.NewSharedInformerFactory(client, 5*time.Minute)
	inf := f.Core().V1().Nodes()
	trigger := make(chan struct{}, 1)
	kick := func(any) {
		select {
		case trigger <- struct{}{}:
		default:
		}
	}
	inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: kick, UpdateFunc: func(_, n any) { kick(n) }, DeleteFunc: kick})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	for {
		select {
		case <-ctx.Done():
			return
		case <-trigger:
		case <-time.After(30 * time.Second):
		}
		nodes, err := inf.Lister().List(labels.Everything())
		if err != nil {
			continue
		}
		s.sync(ctx, nodes)
	}
}

func (s *routeSync) sync(ctx context.Context, nodes []*corev1.Node) {
	want := map[string]nodeRoute{}
	for _, n := range nodes {
		ip := ""
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ip = a.Address
			}
		}
		if s.allow != nil {
			a, aerr := netip.ParseAddr(ip)
			c, cerr := netip.ParsePrefix(n.Spec.PodCIDR)
			if aerr != nil || cerr != nil || !s.allow(n.Name, a, c) {
				continue
			}
		}
		want[n.Name] = nodeRoute{cidr: n.Spec.PodCIDR, ip: ip}
		if n.Name == s.cfg.NodeName && n.Spec.PodCIDR != "" {
			if p, err := netip.ParsePrefix(n.Spec.PodCIDR); err == nil {
				s.net.setCIDR(p)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.installed == nil {
		s.installed = map[string]bool{}
	}
	next := map[string]bool{}
	for _, r := range routesFor(s.cfg.NodeName, want) {
		next[r] = true
		if s.installed[r] {
			continue
		}
		cidr, via := splitRoute(r)
		if _, err := s.runner.Run(ctx, nil, "ip", "-n", s.cfg.Netns, "route", "replace", cidr, "via", via); err != nil {
			s.log.Error("adding a pod route", "route", r, "err", err)
			delete(next, r)
		}
	}
	for r := range s.installed {
		if !next[r] {
			cidr, via := splitRoute(r)
			s.runner.Run(ctx, nil, "ip", "-n", s.cfg.Netns, "route", "del", cidr, "via", via)
		}
	}
	s.installed = next
}

func splitRoute(r string) (cidr, via string) {
	var v string
	fmt.Sscanf(r, "%s via %s", &cidr, &v)
	return cidr, v
}
