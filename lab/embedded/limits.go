package embedded

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/svclab/svclab/lab/embedded/cgroups"
	"github.com/svclab/svclab/lab/embedded/nodeagent"
)

// Limits bound one lab: what its processes use together (its cgroup,
// which every container, node command and control-plane process of the
// lab is in), how much of each container's output is kept, how much its
// API objects take and how much of the host's disk its nodes write.
type Limits struct {
	cgroups.Limits
	Logs nodeagent.LogLimits `json:"logs"`
	// StoreBytes is etcd's quota: past it the API server refuses to
	// create or change objects until some are deleted.
	StoreBytes int64 `json:"storeBytes"`
	// DiskBytes is the size of the lab's disk: one filesystem of its own
	// for everything its nodes write (their filesystems, their Pods'
	// writable layers, emptyDirs and logs).
	DiskBytes int64 `json:"diskBytes"`
}

// DefaultLimits are a lab's limits unless flags say otherwise.
func DefaultLimits() Limits {
	return Limits{Limits: cgroups.DefaultLimits(), Logs: nodeagent.DefaultLogLimits, StoreBytes: DefaultStoreBytes, DiskBytes: DefaultDiskBytes}
}

// The defaults of a lab's store and disk: a scenario's objects take a few
// MiB of etcd and its nodes a few hundred MiB of disk, so both leave a
// learner room to experiment many times over, and a class of thirty labs
// takes at most 120 GiB of the host's disk if every learner fills theirs.
// The control plane holds what the store holds several times over in
// memory (etcd's, the API server's watch cache, the controllers' caches:
// measured, about ten times the store's size on top of 450 MiB), within
// the lab's memory: the default store fits the default memory with room
// for the lab's Pods.
const (
	DefaultStoreBytes = 100 << 20
	DefaultDiskBytes  = 4 << 30
)

// controlPlanePids of a lab's processes and threads are kept for its
// control plane: etcd, the API server, the controller manager, the
// scheduler, the node agents, the load-balancer controller and the
// supervisor run about 200 threads together, and the runc, nft and
// conntrack commands the agents run come on top.
const controlPlanePids = 384

// memoryFor is the least memory a lab whose store holds store bytes needs:
// its idle control plane, its store's objects in the control plane's
// caches, and a little for its Pods.
func memoryFor(store int64) int64 { return 512<<20 + 12*store }

// AddFlags registers the flags that set l (svclab serve, class create,
// cluster create share them).
func (l *Limits) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&l.Pids, "lab-pids", l.Pids, "embedded labs: most processes and threads one lab runs at once (its control plane, containers and node shells together; 384 are kept for its control plane)")
	fs.Var((*quantity)(&l.MemoryBytes), "lab-memory", "embedded labs: most memory one lab uses, e.g. 2Gi (the kernel stops the lab's largest process past it)")
	fs.IntVar(&l.CPUShares, "lab-cpu-shares", l.CPUShares, "embedded labs: one lab's CPU weight when CPUs are busy (1024 is one busy process's worth)")
	fs.Var((*quantity)(&l.Logs.MaxBytes), "lab-log-size", "embedded labs: a container's log file is rotated past this size, e.g. 10Mi")
	fs.IntVar(&l.Logs.MaxFiles, "lab-log-files", l.Logs.MaxFiles, "embedded labs: log files kept per container, the current one included")
	fs.Var((*quantity)(&l.StoreBytes), "lab-store-size", "embedded labs: most space one lab's API objects take in etcd, e.g. 256Mi (past it the API server refuses writes until objects are deleted)")
	fs.Var((*quantity)(&l.DiskBytes), "lab-disk", "embedded labs: size of one lab's disk, e.g. 4Gi: everything its nodes write (their files, Pods' writable layers, emptyDirs, logs)")
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

// store is StoreBytes, or the default for a lab that recorded none.
func (l Limits) store() int64 {
	if l.StoreBytes <= 0 {
		return DefaultStoreBytes
	}
	return l.StoreBytes
}

// Validate checks l.
func (l Limits) Validate() error {
	if err := l.Limits.Validate(); err != nil {
		return err
	}
	if min := controlPlanePids + 128; l.Pids < min {
		return fmt.Errorf("a lab needs at least %d processes: its control plane keeps %d of them (got %d)", min, controlPlanePids, l.Pids)
	}
	if l.Logs.MaxBytes < 64<<10 || l.Logs.MaxFiles < 1 {
		return fmt.Errorf("container logs need at least 64 KiB and one file (got %d bytes, %d files)", l.Logs.MaxBytes, l.Logs.MaxFiles)
	}
	if l.StoreBytes < 32<<20 || l.StoreBytes > 8<<30 {
		return fmt.Errorf("a lab's store needs between 32 MiB and 8 GiB (got %d MiB)", l.StoreBytes>>20)
	}
	if need := memoryFor(l.StoreBytes); l.MemoryBytes < need {
		return fmt.Errorf("a lab whose API objects may take %d MiB needs at least %d MiB of memory, for its control plane keeps them in memory too (got %d MiB): raise --lab-memory or lower --lab-store-size", l.StoreBytes>>20, need>>20, l.MemoryBytes>>20)
	}
	if l.DiskBytes < 1<<30 {
		return fmt.Errorf("a lab's disk needs at least 1 GiB (got %d MiB)", l.DiskBytes>>20)
	}
	if l.Logs.MaxBytes*int64(l.Logs.MaxFiles) > l.DiskBytes/4 {
		return fmt.Errorf("one container's logs (%d MiB) would take more than a quarter of the lab's disk (%d MiB)", l.Logs.MaxBytes*int64(l.Logs.MaxFiles)>>20, l.DiskBytes>>20)
	}
	return nil
}
