package embedded

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/kubebin"
)

// BenchmarkCreateToReady measures a warm `cluster create` (svclab-kube
// cached) from the call to a ready control plane (every component healthy,
// /readyz ok), and the memory of the whole control plane once it has
// settled: resident (RSS, which counts the shared binary once per process)
// and proportional (PSS, which splits shared pages fairly).
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
	var rss, pss float64
	for i := 0; b.Loop(); i++ {
		name := uniqueName("bench")
		c, err := p.Create(ctx, cluster.CreateOptions{Name: name, Workers: 2})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		time.Sleep(15 * time.Second) // let the controllers settle
		r, s := memory(c.(*Cluster).dir)
		rss, pss = rss+r, pss+s
		if err := p.Delete(ctx, name); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(rss/float64(b.N), "rss-MiB")
	b.ReportMetric(pss/float64(b.N), "pss-MiB")
}

// memory sums RSS and PSS (MiB) of every process of the cluster in dir.
func memory(dir string) (rss, pss float64) {
	for _, pid := range markedProcesses(func(d string) bool { return d == dir }) {
		f, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(f))
		for sc.Scan() {
			fields := bytes.Fields(sc.Bytes())
			if len(fields) < 2 {
				continue
			}
			kb, _ := strconv.ParseFloat(string(fields[1]), 64)
			switch string(fields[0]) {
			case "Rss:":
				rss += kb / 1024
			case "Pss:":
				pss += kb / 1024
			}
		}
	}
	return rss, pss
}
