package grade

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"slices"
	"testing"

	"github.com/svclab/svclab/lab/cluster/clustertest"
)

func TestClearHalfOpen(t *testing.T) {
	const del = "conntrack -D -p tcp --state SYN_SENT --orig-dst "
	all := []string{"lab-control-plane", "lab-worker", "lab-worker2"}
	for _, tc := range []struct {
		name      string
		protocol  string
		src       probeSource
		tgt       probeTarget
		wantNodes []string
		wantCmd   string
	}{
		{name: "from a Pod to a ClusterIP: its node", protocol: "http",
			src: probeSource{pod: "client", ip: "10.244.1.9", nodeName: "lab-worker"}, tgt: probeTarget{host: "10.96.0.50", port: 80},
			wantNodes: []string{"lab-worker"}, wantCmd: del + "10.96.0.50 --orig-port-dst 80 --orig-src 10.244.1.9"},
		{name: "from a node, tcp", protocol: "tcp",
			src: probeSource{node: "lab-worker2", ip: "172.29.1.4", nodeName: "lab-worker2"}, tgt: probeTarget{host: "10.96.0.50", port: 8080},
			wantNodes: []string{"lab-worker2"}, wantCmd: del + "10.96.0.50 --orig-port-dst 8080 --orig-src 172.29.1.4"},
		{name: "to a NodePort on a node's address: every node", protocol: "http",
			src: probeSource{pod: "client", ip: "10.244.1.9", nodeName: "lab-worker"}, tgt: probeTarget{host: "172.29.1.3", port: 30080},
			wantNodes: all, wantCmd: del + "172.29.1.3 --orig-port-dst 30080 --orig-src 10.244.1.9"},
		{name: "from outside the cluster: every node", protocol: "http",
			src: probeSource{outside: fakeNetns{}, ip: "172.29.1.254"}, tgt: probeTarget{host: "172.29.1.200", port: 80},
			wantNodes: all, wantCmd: del + "172.29.1.200 --orig-port-dst 80 --orig-src 172.29.1.254"},
		{name: "udp: left alone (stale UDP entries are lessons)", protocol: "udp",
			src: probeSource{pod: "client", ip: "10.244.1.9", nodeName: "lab-worker"}, tgt: probeTarget{host: "10.96.0.10", port: 53}},
		{name: "dns: left alone", protocol: "dns",
			src: probeSource{pod: "client", ip: "10.244.1.9", nodeName: "lab-worker"}, tgt: probeTarget{host: "10.96.0.10", port: 53}},
		{name: "a name resolved on the node: address unknown", protocol: "http",
			src: probeSource{node: "lab-worker", nodeName: "lab-worker"}, tgt: probeTarget{host: "$H", resolve: "web.shop", port: 80}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := clustertest.NewCluster("lab", clustertest.WithRespond(func(string, []string) (string, error) { return "", nil }))
			g := &Grader{Cluster: fc}
			g.clearHalfOpen(context.Background(), tc.protocol, tc.src, tc.tgt)
			var want []string
			for _, n := range tc.wantNodes {
				want = append(want, n+": "+tc.wantCmd)
			}
			if got := fc.Calls(); !slices.Equal(got, want) {
				t.Errorf("commands:\n%q\nwant\n%q", got, want)
			}
		})
	}
}

// fakeNetns stands for the network namespace of a client outside the
// cluster; clearHalfOpen only asks whether there is one.
type fakeNetns struct{}

func (fakeNetns) DialFrom(context.Context, string, string, string) (net.Conn, error) {
	return nil, errors.New("fake")
}
func (fakeNetns) Command(context.Context, ...string) (*exec.Cmd, error) {
	return nil, errors.New("fake")
}
