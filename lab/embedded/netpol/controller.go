package netpol

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	listersnetworkingv1 "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// Applier runs an nft script in the node's network namespace, and lists
// the table as the kernel has it.
type Applier interface {
	Apply(ctx context.Context, script string) error
	// List returns the table without stateful parts (counters), as
	// nft -s list table prints it.
	List(ctx context.Context) (string, error)
}

// NetnsApplier runs nft -f - inside the named network namespace.
type NetnsApplier struct{ Netns string }

// Apply implements Applier.
func (a NetnsApplier) Apply(ctx context.Context, script string) error {
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", a.Netns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nft -f in %s: %w: %s", a.Netns, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// List implements Applier.
func (a NetnsApplier) List(ctx context.Context) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", a.Netns, "nft", "-s", "list", "table", Family, Table)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("nft list table in %s: %w: %s", a.Netns, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Controller keeps one node's NetworkPolicy table in step with the cluster.
type Controller struct {
	node    string
	apply   Applier
	log     *slog.Logger
	events  record.EventRecorder
	pods    listerscorev1.PodLister
	nss     listerscorev1.NamespaceLister
	nps     listersnetworkingv1.NetworkPolicyLister
	trigger chan struct{}

	mu      sync.Mutex
	applied *Ruleset
	// listing is the kernel's table right after the last apply; the
	// periodic check compares with it to find hand edits.
	listing string
	// reported holds the problem last reported per policy UID, so an
	// event is recorded once per change, not once per sync.
	reported map[string]string

	// versions reads the informers' resource versions, progress records
	// them after each sync that reached the kernel; both nil in tests
	// without informers.
	versions func() Synced
	progress *Progress
}

// Run enforces NetworkPolicy for node until ctx ends, then removes the
// table. After every sync it records in progress (when not nil) the
// versions of the objects the table enforces.
func Run(ctx context.Context, client kubernetes.Interface, node string, apply Applier, progress *Progress, log *slog.Logger) error {
	eb := record.NewBroadcaster(record.WithContext(ctx))
	eb.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer eb.Shutdown()
	rec := eb.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kube-network-policies", Host: node})

	if progress != nil {
		// Nothing enforced yet, whatever an earlier run of the agent had.
		progress.set(Synced{})
	}
	f := informers.NewSharedInformerFactory(client, 10*time.Minute)
	c := &Controller{
		node: node, apply: apply, log: log, events: rec,
		pods:     f.Core().V1().Pods().Lister(),
		nss:      f.Core().V1().Namespaces().Lister(),
		nps:      f.Networking().V1().NetworkPolicies().Lister(),
		trigger:  make(chan struct{}, 1),
		reported: map[string]string{},
		progress: progress,
	}
	podsInf, nssInf, npsInf := f.Core().V1().Pods().Informer(), f.Core().V1().Namespaces().Informer(), f.Networking().V1().NetworkPolicies().Informer()
	// A reflector adds an event's object to the store before it records
	// the event's version: read before listing, a version is one whose
	// changes the listing holds.
	c.versions = func() Synced {
		return Synced{Pods: podsInf.LastSyncResourceVersion(), Namespaces: nssInf.LastSyncResourceVersion(), Policies: npsInf.LastSyncResourceVersion()}
	}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.kick() },
		UpdateFunc: func(o, n any) { c.kick() },
		DeleteFunc: func(any) { c.kick() },
	}
	for _, inf := range []cache.SharedIndexInformer{podsInf, nssInf, npsInf} {
		if _, err := inf.AddEventHandler(h); err != nil {
			return err
		}
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cacheSync(ctx, f) {
		return nil
	}
	defer c.cleanup()
	c.loop(ctx)
	return nil
}

func cacheSync(ctx context.Context, f informers.SharedInformerFactory) bool {
	for _, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return false
		}
	}
	return ctx.Err() == nil
}

func (c *Controller) kick() {
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

// checkEvery is how often the agent compares the kernel's table with what
// it wrote.
const checkEvery = 30 * time.Second

// loop syncs on every change, and rewrites the table when it finds it
// changed by hand (a learner's nft delete, say).
func (c *Controller) loop(ctx context.Context) {
	c.kick()
	check := time.NewTicker(checkEvery)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.trigger:
		case <-check.C:
			c.CheckTable(ctx)
		}
		if err := c.Sync(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("applying NetworkPolicy rules", "err", err)
			// Try again soon, whole.
			time.AfterFunc(time.Second, c.kick)
		}
	}
}

// Sync compiles the current objects and applies the difference.
func (c *Controller) Sync(ctx context.Context) error {
	var versions Synced
	if c.versions != nil {
		versions = c.versions()
	}
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return err
	}
	nss, err := c.nss.List(labels.Everything())
	if err != nil {
		return err
	}
	nps, err := c.nps.List(labels.Everything())
	if err != nil {
		return err
	}
	r, problems := Compile(Input{Node: c.node, Pods: pods, Namespaces: nss, Policies: nps})
	c.report(nps, problems)

	c.mu.Lock()
	defer c.mu.Unlock()
	script := Diff(c.applied, r)
	if script == "" {
		c.synced(versions)
		return nil
	}
	if err := c.apply.Apply(ctx, script); err != nil {
		if c.applied == nil {
			return err
		}
		// A whole replacement after a failed difference.
		c.applied = nil
		if err2 := c.apply.Apply(ctx, Render(r)); err2 != nil {
			return fmt.Errorf("%w; and replacing the whole table: %w", err, err2)
		}
	}
	c.applied = r
	// What the kernel made of it, for CheckTable; without it the next
	// check rewrites the table.
	c.listing, _ = c.apply.List(ctx)
	c.synced(versions)
	return nil
}

// synced records that the kernel's table enforces the objects up to
// versions.
func (c *Controller) synced(versions Synced) {
	if c.progress != nil {
		c.progress.set(versions)
	}
}

// CheckTable compares the kernel's table with the listing taken after the
// last apply; when they differ (someone edited or deleted it), the next
// sync rewrites it whole. Counters are left alone when nothing differs.
func (c *Controller) CheckTable(ctx context.Context) {
	cur, err := c.apply.List(ctx)
	c.mu.Lock()
	changed := err != nil || cur != c.listing
	if changed {
		c.applied = nil
	}
	c.mu.Unlock()
	if changed {
		c.log.Warn("the NetworkPolicy table differs from what the agent wrote (edited by hand?); rewriting it", "err", err)
	}
}

// report records an event for each newly broken policy, and one when a
// policy is enforced again.
func (c *Controller) report(nps []*networkingv1.NetworkPolicy, problems []Problem) {
	now := map[string]string{}
	for _, p := range problems {
		uid := string(p.Policy.UID)
		now[uid] = p.Reason
		if c.reported[uid] != p.Reason {
			c.log.Warn("NetworkPolicy not enforced", "policy", p.Policy.Namespace+"/"+p.Policy.Name, "reason", p.Reason)
			c.events.Eventf(p.Policy, corev1.EventTypeWarning, "PolicyNotEnforced",
				"node %s does not enforce this NetworkPolicy: %s. Fix the policy; the other NetworkPolicies stay enforced.", c.node, p.Reason)
		}
	}
	for _, np := range nps {
		uid := string(np.UID)
		if _, was := c.reported[uid]; was && now[uid] == "" {
			c.events.Eventf(np, corev1.EventTypeNormal, "PolicyEnforced", "node %s enforces this NetworkPolicy again", c.node)
		}
	}
	c.reported = now
}

// cleanup deletes the table: the node enforces nothing without its agent,
// as upstream's agent does on exit.
func (c *Controller) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.apply.Apply(ctx, fmt.Sprintf("add table %s %s\ndelete table %s %s\n", Family, Table, Family, Table)); err != nil {
		// The node's namespace may be gone already (the cluster is
		// being deleted), and the table with it.
		c.log.Debug("removing the NetworkPolicy table", "err", err)
	}
}
