package nftables

import "testing"

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
