//go:build linux

package embedded

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/kubebin"
)

// BenchmarkCreateToReady measures a warm `cluster create` (svclab-kube and
// images cached) of a 3-node cluster, from the call to every node Ready
// with kube-proxy running on each and CoreDNS ready, and the memory of the
// whole idle cluster once it has settled — control plane, node agents and
// add-on containers: resident (RSS, which counts shared binaries once per
// process) and proportional (PSS, which splits shared pages fairly).
func BenchmarkCreateToReady(b *testing.B) {
	requireLab(b)
	ctx := context.Background()
	p := New(b.TempDir(), nil)
	if bin, err := kubebin.Locate(ctx, nil); err == nil {
		if info, err := kubebin.LastColdBuild(filepath.Dir(filepath.Dir(bin))); err == nil {
			b.Logf("last cold build of svclab-kube: %s (%d packages)", info.Duration.Round(time.Second), info.Packages)
		} else {
			b.Logf("no cold build of svclab-kube recorded in this cache")
		}
	}
	var rss, pss, cpPSS, idle float64
	for i := 0; b.Loop(); i++ {
		name := uniqueName("bench")
		c, err := p.Create(ctx, cluster.CreateOptions{Name: name, Workers: 2})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		time.Sleep(15 * time.Second) // let the controllers settle
		m := c.(*Cluster).Memory()
		r, s := float64(m.RSS)/mib, float64(m.PSS)/mib
		rss, pss = rss+r, pss+s
		b.Logf("idle cluster: PSS %.0f MiB, RSS %.0f MiB; by process (MiB): %s", s, r, memoryByProcess(c.(*Cluster).dir, clusterNetns(name)))
		cpPSS += controlPlanePSS(b, c.(*Cluster).dir)
		cpu := idleCPU(c.(*Cluster).dir, clusterNetns(name), 30*time.Second)
		idle += cpu
		b.Logf("idle cluster: %.1f%% of one CPU", cpu)
		if err := p.Delete(ctx, name); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(rss/float64(b.N), "rss-MiB")
	b.ReportMetric(pss/float64(b.N), "pss-MiB")
	b.ReportMetric(cpPSS/float64(b.N), "cp-pss-MiB")
	b.ReportMetric(idle/float64(b.N), "idle-cpu-%")
}

// idleCPU is the CPU the cluster's processes (svclab's for it and those in
// its namespaces) use over d, in percent of one CPU.
func idleCPU(dir string, netns []string, d time.Duration) float64 {
	ticks := func() map[int]uint64 {
		out := map[int]uint64{}
		for pid := range clusterProcesses(dir, netns) {
			b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
			if err != nil {
				continue
			}
			f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
			if len(f) < 15 {
				continue
			}
			u, _ := strconv.ParseUint(f[11], 10, 64)
			s, _ := strconv.ParseUint(f[12], 10, 64)
			cu, _ := strconv.ParseUint(f[13], 10, 64)
			cs, _ := strconv.ParseUint(f[14], 10, 64)
			out[pid] = u + s + cu + cs
		}
		return out
	}
	before := ticks()
	time.Sleep(d)
	var used uint64
	for pid, t := range ticks() {
		used += t - min(t, before[pid])
	}
	return 100 * float64(used) / 100 / d.Seconds() // 100 ticks a second
}

// controlPlanePSS sums the PSS (MiB) of etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler.
func controlPlanePSS(b *testing.B, dir string) float64 {
	var st Status
	if err := readJSON(paths{dir}.status(), &st); err != nil {
		b.Fatal(err)
	}
	total := 0.0
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		cs, _ := st.Component(name)
		total += pssOf(cs.PID)
	}
	return total
}

const mib = 1 << 20

func pssOf(pid int) float64 {
	m, _ := readSmaps(pid)
	return float64(m.PSS) / mib
}

// memoryByProcess lists each process of the cluster with its PSS (MiB),
// anonymous and file-backed, largest first.
func memoryByProcess(dir string, netns []string) string {
	type row struct {
		name           string
		pss, anon, fil float64
	}
	var rows []row
	for pid := range clusterProcesses(dir, netns) {
		m, ok := readSmaps(pid)
		if !ok {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		args := strings.Fields(strings.ReplaceAll(string(cmd), "\x00", " "))
		if len(args) == 0 {
			continue
		}
		r := row{name: filepath.Base(args[0]), pss: float64(m.PSS) / mib, anon: float64(m.PSSAnon) / mib, fil: float64(m.PSSFile) / mib}
		if r.name == kubebin.BinaryName && len(args) > 1 {
			r.name = args[1]
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b row) int { return int(b.pss*100 - a.pss*100) })
	// One line: the benchmark's log keeps only a few.
	var out []string
	for _, r := range rows {
		if r.pss >= 0.5 {
			out = append(out, fmt.Sprintf("%s %.1f (anon %.1f)", r.name, r.pss, r.anon))
		}
	}
	return strings.Join(out, "; ")
}

// BenchmarkPodReady measures, on one 3-node cluster, the latency from
// creating a pod (agnhost netexec with a readiness probe) to its Ready
// condition, over 30 pods created at once, and reports p50 and p99.
func BenchmarkPodReady(b *testing.B) {
	requireLab(b)
	ctx := context.Background()
	p := New(b.TempDir(), nil)
	name := uniqueName("podbench")
	cc, err := p.Create(ctx, cluster.CreateOptions{Name: name, Workers: 2})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Delete(context.Background(), name) })
	cfg, err := cc.(*Cluster).RESTConfig()
	if err != nil {
		b.Fatal(err)
	}
	// kubectl's client limits: client-go's own (5 requests a second)
	// would hold the 30 creates back after their clocks started.
	cfg.QPS, cfg.Burst = 50, 300
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	const pods = 30
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		ns := fmt.Sprintf("bench-%d", i)
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		created := map[string]time.Time{}
		for j := range pods {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", j)},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "agnhost", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
					Args: []string{"netexec", "--http-port=8080"},
					ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
						HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}},
				}}},
			}
			created[pod.Name] = time.Now()
			if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		deadline := time.After(3 * time.Minute)
		for len(created) > 0 {
			select {
			case ev := <-w.ResultChan():
				pod, ok := ev.Object.(*corev1.Pod)
				if !ok || ev.Type == watch.Deleted {
					continue
				}
				if start, ok := created[pod.Name]; ok && podReady(pod) {
					lat = append(lat, time.Since(start))
					delete(created, pod.Name)
				}
			case <-deadline:
				b.Fatalf("%d pods not Ready after 3 minutes", len(created))
			}
		}
		w.Stop()
		b.StopTimer()
		client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		b.StartTimer()
	}
	slices.Sort(lat)
	pct := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Milliseconds()) }
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
