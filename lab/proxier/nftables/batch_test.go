//go:build linux

package nftables

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBatchTransaction(t *testing.T) {
	in := `add table ip kube-proxy { comment "rules for kube-proxy" ; }
add chain ip kube-proxy service-A/ns/a/tcp/http
flush chain ip kube-proxy service-A/ns/a/tcp/http
add element ip kube-proxy cluster-ips { 10.96.0.1 }
add element ip kube-proxy service-ips { 10.96.0.1 . tcp . 80 : goto service-A/ns/a/tcp/http }
add chain ip kube-proxy service-B/ns/b/tcp/http
flush chain ip kube-proxy service-B/ns/b/tcp/http
add rule ip kube-proxy service-B/ns/b/tcp/http meta l4proto tcp dnat to 10.0.0.1:80
add element ip kube-proxy cluster-ips { 10.96.0.2 }
delete element ip kube-proxy service-ips { 10.96.0.2 . tcp . 80 }
add element ip kube-proxy service-ips { 10.96.0.2 . tcp . 80 : goto service-B/ns/b/tcp/http }
add element ip kube-proxy no-endpoint-services { 10.96.0.3 . tcp . 80 comment "ns/c:http" : goto reject-chain }
`
	want := `add table ip kube-proxy { comment "rules for kube-proxy" ; }
add chain ip kube-proxy service-A/ns/a/tcp/http
add chain ip kube-proxy service-B/ns/b/tcp/http
flush chain ip kube-proxy service-B/ns/b/tcp/http
add rule ip kube-proxy service-B/ns/b/tcp/http meta l4proto tcp dnat to 10.0.0.1:80
add element ip kube-proxy cluster-ips { 10.96.0.1, 10.96.0.2 }
add element ip kube-proxy service-ips { 10.96.0.1 . tcp . 80 : goto service-A/ns/a/tcp/http }
delete element ip kube-proxy service-ips { 10.96.0.2 . tcp . 80 }
add element ip kube-proxy service-ips { 10.96.0.2 . tcp . 80 : goto service-B/ns/b/tcp/http }
add element ip kube-proxy no-endpoint-services { 10.96.0.3 . tcp . 80 comment "ns/c:http" : goto reject-chain }
`
	got := BatchTransaction(in, map[string]bool{"service-B/ns/b/tcp/http": true})
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestSplitFreshTransaction(t *testing.T) {
	in := `add table ip kube-proxy { comment "rules for kube-proxy" ; }
add chain ip kube-proxy nat-output { type nat hook output priority -100 ; }
add chain ip kube-proxy services
add rule ip kube-proxy nat-output jump services
add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }
add chain ip kube-proxy service-A/ns/a/tcp/http
add rule ip kube-proxy service-A/ns/a/tcp/http meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.0.0.1 . 80 , 1 : 10.0.0.2 . 80 }
add chain ip kube-proxy service-B/ns/b/tcp/http
add chain ip kube-proxy external-B/ns/b/tcp/http
add rule ip kube-proxy external-B/ns/b/tcp/http mark set mark or 0x4000 comment "masquerade"
add rule ip kube-proxy external-B/ns/b/tcp/http goto service-B/ns/b/tcp/http
add rule ip kube-proxy service-B/ns/b/tcp/http meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.0.0.3 . 80 , 1 : 10.0.0.4 . 80 }
add chain ip kube-proxy endpoint-C/ns/c/tcp/http__10.0.0.5/80
add set ip kube-proxy affinity-C/ns/c/tcp/http__10.0.0.5/80 { type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; }
add chain ip kube-proxy service-C/ns/c/tcp/http
add rule ip kube-proxy endpoint-C/ns/c/tcp/http__10.0.0.5/80 update @affinity-C/ns/c/tcp/http__10.0.0.5/80 { ip saddr }
add rule ip kube-proxy endpoint-C/ns/c/tcp/http__10.0.0.5/80 meta l4proto tcp dnat to 10.0.0.5:80
add chain ip kube-proxy localhost-nodeport-reject-tcp
delete chain ip kube-proxy localhost-nodeport-reject-tcp
add element ip kube-proxy service-ips { 10.96.0.1 . tcp . 80 : goto service-A/ns/a/tcp/http, 10.96.0.2 . tcp . 80 : goto service-B/ns/b/tcp/http }
`
	chunks, final := SplitFreshTransaction(in, 1)
	want := []string{`add table ip kube-proxy { comment "rules for kube-proxy" ; }
add chain ip kube-proxy nat-output { type nat hook output priority -100 ; }
add chain ip kube-proxy services
add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }
add chain ip kube-proxy service-A/ns/a/tcp/http
add rule ip kube-proxy service-A/ns/a/tcp/http meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.0.0.1 . 80 , 1 : 10.0.0.2 . 80 }
`, `add table ip kube-proxy { comment "rules for kube-proxy" ; }
add chain ip kube-proxy service-B/ns/b/tcp/http
add chain ip kube-proxy external-B/ns/b/tcp/http
add rule ip kube-proxy external-B/ns/b/tcp/http mark set mark or 0x4000 comment "masquerade"
add rule ip kube-proxy external-B/ns/b/tcp/http goto service-B/ns/b/tcp/http
add rule ip kube-proxy service-B/ns/b/tcp/http meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.0.0.3 . 80 , 1 : 10.0.0.4 . 80 }
`, `add table ip kube-proxy { comment "rules for kube-proxy" ; }
add chain ip kube-proxy endpoint-C/ns/c/tcp/http__10.0.0.5/80
add set ip kube-proxy affinity-C/ns/c/tcp/http__10.0.0.5/80 { type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; }
add chain ip kube-proxy service-C/ns/c/tcp/http
add rule ip kube-proxy endpoint-C/ns/c/tcp/http__10.0.0.5/80 update @affinity-C/ns/c/tcp/http__10.0.0.5/80 { ip saddr }
add rule ip kube-proxy endpoint-C/ns/c/tcp/http__10.0.0.5/80 meta l4proto tcp dnat to 10.0.0.5:80
`}
	wantFinal := `add rule ip kube-proxy nat-output jump services
add chain ip kube-proxy localhost-nodeport-reject-tcp
delete chain ip kube-proxy localhost-nodeport-reject-tcp
add element ip kube-proxy service-ips { 10.96.0.1 . tcp . 80 : goto service-A/ns/a/tcp/http, 10.96.0.2 . tcp . 80 : goto service-B/ns/b/tcp/http }
`
	if diff := cmp.Diff(want, chunks); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantFinal, final); diff != "" {
		t.Errorf("final (-want +got):\n%s", diff)
	}

	// Small transactions, and ones that do not create the table, stay whole.
	if chunks, final := SplitFreshTransaction(in, 100); chunks != nil || final != in {
		t.Errorf("with 100 rules a step: %d chunks, want the transaction whole", len(chunks))
	}
	noTable := strings.SplitN(in, "\n", 2)[1]
	if chunks, final := SplitFreshTransaction(noTable, 1); chunks != nil || final != noTable {
		t.Errorf("without add table: %d chunks, want the transaction whole", len(chunks))
	}
}
