package iptables

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// BenchmarkRender renders 1,000 Services with ten endpoints each: a full
// sync, and a partial one in which one Service changed.
func BenchmarkRender(b *testing.B) {
	var m strings.Builder
	for i := range 1000 {
		var ips []string
		for j := range 10 {
			ips = append(ips, fmt.Sprintf("10.%d.%d.%d", 1+i/250, i%250, j+1))
		}
		name := fmt.Sprintf("svc%d", i)
		m.WriteString(yamlClusterIP("ns", name, fmt.Sprintf("172.30.%d.%d", i/250, i%250+1), "p80", 80))
		m.WriteString(yamlSlice("ns", name, "p80", 80, ips...))
	}
	snap := decodeSnapshot(b, "bench", m.String())
	for _, bc := range []struct {
		name    string
		changed map[types.NamespacedName]bool
	}{
		{"full", nil},
		{"partial", map[types.NamespacedName]bool{{Namespace: "ns", Name: "svc500"}: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var names NameCache
			for b.Loop() {
				render(b, upstreamConfig(), snap, Options{Changed: bc.changed, Names: &names})
			}
		})
	}
}
