//go:build linux

package nodeagent

import (
	"bufio"
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded/hostexec"
)

// nodeObject is the Node the agent registers: labels as a kubelet sets
// them (role labels are the installer's business: NodeRestriction forbids a
// kubelet setting them), addresses, capacity and the kubelet endpoint.
func nodeObject(cfg Config, runtimeVersion string, runtimeErr error) *corev1.Node {
	labels := map[string]string{
		"kubernetes.io/hostname":  cfg.NodeName,
		"kubernetes.io/os":        runtime.GOOS,
		"kubernetes.io/arch":      runtime.GOARCH,
		"beta.kubernetes.io/os":   runtime.GOOS,
		"beta.kubernetes.io/arch": runtime.GOARCH,
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memTotal(), resource.BinarySI),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(diskTotal(cfg.StateDir), resource.BinarySI),
	}
	var uts unix.Utsname
	kernel := ""
	if unix.Uname(&uts) == nil {
		kernel = unix.ByteSliceToString(uts.Release[:])
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: cfg.NodeName, Labels: labels},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: cfg.NodeIP},
				{Type: corev1.NodeHostName, Address: cfg.NodeName},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: KubeletPort}},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion:          cluster.KubernetesVersion,
				ContainerRuntimeVersion: "runc://" + runtimeVersion,
				OperatingSystem:         runtime.GOOS,
				Architecture:            runtime.GOARCH,
				OSImage:                 "svclab embedded node",
				KernelVersion:           kernel,
			},
			Conditions: nodeConditions(metav1.Now(), runtimeErr),
		},
	}
}

// nodeConditions are the node's conditions: Ready unless the container
// runtime is unusable (runtimeErr), as the kubelet reports it.
func nodeConditions(now metav1.Time, runtimeErr error) []corev1.NodeCondition {
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	ready := cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status")
	if runtimeErr != nil {
		ready = cond(corev1.NodeReady, corev1.ConditionFalse, "KubeletNotReady", "container runtime is down: "+runtimeErr.Error())
	}
	return []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		ready,
	}
}

// runtimeCheck says whether runc can run containers: lookPath finds it.
func runtimeCheck(lookPath func(string) (string, error)) error {
	if _, err := lookPath("runc"); err != nil {
		return errors.New("runc is not installed on this machine (install it with 'svclab setup', or apt-get install runc)")
	}
	return nil
}

func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func diskTotal(dir string) int64 {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 0
	}
	return int64(st.Blocks) * st.Bsize
}

// runcVersion asks runc for its version.
func runcVersion(ctx context.Context) string {
	out, err := hostexec.Exec{}.Run(ctx, nil, "runc", "--version")
	if err != nil {
		return "unknown"
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(strings.TrimPrefix(first, "runc version"))
}

// nodeProvider reports the node as ready while the agent runs and its
// container runtime is usable (a stopped agent stops its Lease heartbeats,
// and the node-lifecycle controller marks the node NotReady after its
// grace period, as upstream). It checks the runtime every interval and
// reports a change at once.
type nodeProvider struct {
	node     *corev1.Node
	lookPath func(string) (string, error)
	interval time.Duration
}

func (nodeProvider) Ping(context.Context) error { return nil }

func (p nodeProvider) NotifyNodeStatus(ctx context.Context, cb func(*corev1.Node)) {
	go func() {
		last := runtimeCheck(p.lookPath)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(p.interval):
			}
			err := runtimeCheck(p.lookPath)
			if (err == nil) == (last == nil) {
				continue
			}
			last = err
			n := p.node.DeepCopy()
			n.Status.Conditions = nodeConditions(metav1.Now(), err)
			cb(n)
		}
	}()
}
