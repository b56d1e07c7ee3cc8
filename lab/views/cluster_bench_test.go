package views

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/embedded"
	"github.com/svclab/svclab/lab/roles"
)

func TestMain(m *testing.M) {
	roles.Dispatch()
	os.Exit(m.Run())
}

// BenchmarkRuleChangeOnCluster measures, on a real embedded cluster, how
// long a change of a node's kernel rules takes to become a rules frame on
// the bus: an element added to kube-proxy's cluster-ips set with nft (as a
// fault or a learner would change it), noticed by nft monitor in the node,
// the ruleset read again, grouped and published. The websocket's share is
// measured by the server's BenchmarkRuleChangeToPanel.
func BenchmarkRuleChangeOnCluster(b *testing.B) {
	if testing.Short() || os.Geteuid() != 0 {
		b.Skip("end-to-end: needs root for an embedded cluster")
	}
	ctx := context.Background()
	p := embedded.New(b.TempDir(), nil)
	const name = "viewsbench"
	c, err := p.Create(ctx, cluster.CreateOptions{Name: name, Workers: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Delete(context.Background(), name)
	l, err := Start(ctx, Config{Cluster: c, Services: []string{"default/kubernetes"}, ProbeInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Stop()
	node := name + "-worker"
	sub := l.Bus().Subscribe()
	defer sub.Close()
	// wait returns when a rules frame of node shows (or no longer shows) ip.
	wait := func(ip string, present bool) error {
		deadline := time.After(10 * time.Second)
		for {
			select {
			case <-deadline:
				return fmt.Errorf("no rules frame with %s present=%v in 10s", ip, present)
			case <-sub.Ready():
				for _, f := range sub.Take() {
					var e struct {
						Topic string    `json:"topic"`
						Data  RulesView `json:"data"`
					}
					if json.Unmarshal(f, &e) == nil && e.Topic == TopicRules(node) && e.Data.Raw != "" && strings.Contains(e.Data.Raw, ip) == present {
						return nil
					}
				}
			}
		}
	}
	if err := wait("10.96.0.1", true); err != nil { // the first read
		b.Fatal(err)
	}
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ip := fmt.Sprintf("10.96.254.%d", i%250+1)
		for _, op := range []string{"add", "delete"} {
			start := time.Now()
			if err := c.NodeExec(ctx, node, []string{"nft", op, "element", "ip", "kube-proxy", "cluster-ips", "{ " + ip + " }"}, cluster.Stdio{}); err != nil {
				b.Fatal(err)
			}
			if err := wait(ip, op == "add"); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	if q(0.99) > 500 {
		b.Errorf("p99 %.0f ms over the 500 ms budget", q(0.99))
	}
}
