// Package bench measures the bundled proxier against upstream kube-proxy
// v1.37.2: full and partial sync time and resident memory, both proxiers
// on the same objects in the same run, each in a network namespace of its
// own with the real nft and iptables-restore.
//
// The objects (Services with a ClusterIP, most with a NodePort, and one
// EndpointSlice of ten endpoints spread over three nodes each) are created
// in an embedded cluster, so that the API server allocates ClusterIPs and
// NodePorts. Upstream kube-proxy reads them from that API server; our
// proxier ("svclab proxier run --objects") reads the same objects, read
// back from the API server, from a file. Both report their sync durations
// in the kubeproxy_sync_{full,partial}_proxy_rules_duration_seconds
// histograms, which the benchmark reads from their metrics servers.
//
// Run it with "go tool task bench", or
//
//	go test -run '^$' -bench Sync -benchtime 1x -timeout 90m ./lab/proxier/bench/
//	go test -run '^$' -bench 'Sync/services=1000/nftables' -benchtime 1x ./lab/proxier/bench/ -args -profile-dir /tmp/prof
//
// It needs root, nft, iptables and svclab-kube, and is skipped with -short.
package bench
