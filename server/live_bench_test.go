package server

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// BenchmarkRuleChangeToPanel measures how long a change of a node's rules
// takes to reach the browser's rules panel: from the proxier's sync event
// to the frame arriving on every viewer's websocket (reading the ruleset
// with NodeExec, grouping and diffing it, the bus, the socket). The fake
// cluster answers NodeExec at once, so this is svclab's own share; on an
// embedded cluster add one `nft list table` in the node (≈20-50 ms).
//
// With viewers=50 every viewer must get every change, and one more client
// that never reads is connected throughout: p99 must stay within budget
// and the same as with one viewer.
func BenchmarkRuleChangeToPanel(b *testing.B) {
	for _, viewers := range []int{1, 50} {
		b.Run(fmt.Sprintf("viewers=%d", viewers), func(b *testing.B) {
			l := newLabServer(b)
			l.startAttempt(b, "selector-typo")
			stuck := dialViews(b, l)
			defer stuck.Close()
			conns := make([]*websocket.Conn, viewers)
			for i := range conns {
				conns[i] = dialViews(b, l)
				defer conns[i].Close()
				next(b, conns[i], "rules/lab-worker", nil)
			}
			dumps := []string{readTestdata(b, "nft-selector-typo-fixed.txt"), readTestdata(b, "nft-selector-typo-broken.txt")}
			want := []string{"load-balanced", "rejected"}
			var lat []time.Duration
			var mu sync.Mutex
			reads := l.fc.Execs("nft")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				start := time.Now()
				l.fc.SetRules(dumps[i%2])
				for _, c := range conns {
					wg.Add(1)
					go func() {
						defer wg.Done()
						waitSummary(b, c, want[i%2])
						d := time.Since(start)
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					}()
				}
				wg.Wait()
			}
			b.StopTimer()
			// The lab reads each node's rules once per change, however many
			// watch: viewers do not add work on the nodes.
			b.ReportMetric(float64(l.fc.Execs("nft")-reads)/float64(b.N), "nft-reads/change")
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
			b.ReportMetric(p(0.5), "p50-ms")
			b.ReportMetric(p(0.99), "p99-ms")
			b.ReportMetric(p(1), "max-ms")
			if p(0.99) > 500 {
				b.Errorf("p99 %.1f ms over the 500 ms budget", p(0.99))
			}
		})
	}
}

func waitSummary(b *testing.B, c *websocket.Conn, summary string) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, msg, err := c.ReadMessage()
		if err != nil {
			b.Errorf("viewer: %v", err)
			return
		}
		var f frame
		json.Unmarshal(msg, &f)
		if f.Topic == "rules/lab-worker" && strings.Contains(string(f.Data), summary) {
			return
		}
	}
}
