package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svclab/svclab/lab/embedded/cgroups"
	"github.com/svclab/svclab/lab/nodeagent"
)

// Limits bound one lab: what its processes use together (its cgroup,
// which every container and node command of the lab is in) and how much
// of each container's output is kept.
type Limits struct {
	cgroups.Limits
	Logs nodeagent.LogLimits `json:"logs"`
}

// DefaultLimits are a lab's limits unless flags say otherwise.
func DefaultLimits() Limits {
	return Limits{Limits: cgroups.DefaultLimits(), Logs: nodeagent.DefaultLogLimits}
}

// AddFlags registers the flags that set l (svclab serve, class create,
// cluster create share them).
func (l *Limits) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&l.Pids, "lab-pids", l.Pids, "embedded labs: most processes and threads one lab runs at once (its containers and node shells together)")
	fs.Var((*quantity)(&l.MemoryBytes), "lab-memory", "embedded labs: most memory one lab uses, e.g. 2Gi (the kernel stops the lab's largest process past it)")
	fs.IntVar(&l.CPUShares, "lab-cpu-shares", l.CPUShares, "embedded labs: one lab's CPU weight when CPUs are busy (1024 is one busy process's worth)")
	fs.Var((*quantity)(&l.Logs.MaxBytes), "lab-log-size", "embedded labs: a container's log file is rotated past this size, e.g. 10Mi")
	fs.IntVar(&l.Logs.MaxFiles, "lab-log-files", l.Logs.MaxFiles, "embedded labs: log files kept per container, the current one included")
}

// LimitsFromFlags reads the limits AddFlags registered on a command's
// flags (or its parents'), the defaults where there are none.
func LimitsFromFlags(lookup func(name string) *pflag.Flag) Limits {
	l := DefaultLimits()
	fs := pflag.NewFlagSet("limits", pflag.ContinueOnError)
	l.AddFlags(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		if src := lookup(f.Name); src != nil && src.Changed {
			fs.Set(f.Name, src.Value.String())
		}
	})
	return l
}

// quantity is a byte count written as Kubernetes writes quantities (2Gi).
type quantity int64

func (q *quantity) String() string {
	return resource.NewQuantity(int64(*q), resource.BinarySI).String()
}

func (q *quantity) Set(s string) error {
	v, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("%q is not a size (write it as 512Mi or 2Gi): %w", s, err)
	}
	*q = quantity(v.Value())
	return nil
}

func (q *quantity) Type() string { return "size" }

// Validate checks l.
func (l Limits) Validate() error {
	if err := l.Limits.Validate(); err != nil {
		return err
	}
	if l.Logs.MaxBytes < 64<<10 || l.Logs.MaxFiles < 1 {
		return fmt.Errorf("container logs need at least 64 KiB and one file (got %d bytes, %d files)", l.Logs.MaxBytes, l.Logs.MaxFiles)
	}
	return nil
}

// labCgroup is the cgroup (in every hierarchy) of cluster name: every
// node's containers are below it (nodeCgroup).
func labCgroup(name string) string { return filepath.Join(cgroupRoot, name) }

// Usage reports what the lab uses of its limits, and how often it
// reached them.
func (c *Cluster) Usage() cgroups.Usage { return cgroups.Read(labCgroup(c.st.Name)) }

// watchLimits tells the learner when the lab reaches a limit: a Warning
// Event on the control-plane Node (as the kubelet's SystemOOM), which
// kubectl get events and the lab's timeline show.
func watchLimits(ctx context.Context, st *State, pa paths, log *slog.Logger) {
	cp := st.ControlPlane()
	cfg, err := clientcmd.BuildConfigFromFlags("", pa.config("node-"+cp.Name+".conf"))
	if err != nil {
		log.Error("watching the lab's limits", "err", err)
		return
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Error("watching the lab's limits", "err", err)
		return
	}
	last := cgroups.Read(labCgroup(st.Name))
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
		u := cgroups.Read(labCgroup(st.Name))
		if n := u.OOMKills - last.OOMKills; n > 0 {
			limitEvent(ctx, client, cp.Name, "SystemOOM", fmt.Sprintf(
				"The lab reached its memory limit (%s): the kernel stopped %d process(es), the largest first. Look for a Pod or a shell that uses more memory than it should (kubectl top is not available; ps aux on the nodes shows it).",
				resource.NewQuantity(u.MemoryLimitBytes, resource.BinarySI), n))
			log.Warn("the lab reached its memory limit", "oomKills", n)
		}
		if n := u.PidsRefused - last.PidsRefused; n > 0 {
			limitEvent(ctx, client, cp.Name, "PIDLimitReached", fmt.Sprintf(
				"The lab reached its limit of %d processes: %d new process(es) could not start. A Pod or a shell keeps starting processes (a fork bomb?); delete it, or start the lab over.", u.PidsMax, n))
			log.Warn("the lab reached its process limit", "refused", n)
		}
		last = u
	}
}

func limitEvent(ctx context.Context, client kubernetes.Interface, node, reason, msg string) {
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: node + ".", Namespace: metav1.NamespaceDefault},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: node, UID: "", APIVersion: "v1"},
		Reason:         reason, Message: msg, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "svclab", Host: node},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	client.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{})
}
