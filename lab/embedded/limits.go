package embedded

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/svclab/svclab/lab/embedded/cgroups"
	"github.com/svclab/svclab/lab/embedded/nodeagent"
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
