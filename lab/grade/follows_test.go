package grade

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/svclab/svclab/lab/cluster/clustertest"
	"github.com/svclab/svclab/lab/scenario"
)

// A follows check passes when every node's rules follow the grader's own
// Service through both steps, and fails naming a node whose proxier does
// not program it (its rules stay as they were); the grader's Service is
// removed either way.
func TestFollows(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stuck string // a node whose rules never change
		pass  bool
		want  string
	}{
		{name: "every proxier programs its node", pass: true,
			want: "a Service svclab made got an endpoint, then lost it; lab-control-plane: followed in"},
		{name: "a stuck proxier", stuck: "lab-worker2",
			want: "the rules do not follow the API: a Service svclab made got an endpoint, and 1s later the rules of lab-worker2 still have nothing for it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g *Grader
			g = newGrader(func(node string, cmd []string) (string, error) {
				line := strings.Join(cmd, " ")
				switch {
				case strings.HasSuffix(line, "/proxyMode"):
					return "nftables", nil
				case line == "nft list table ip kube-proxy":
					if node == tc.stuck {
						return nftTable(true), nil
					}
					return witnessTable(t, g), nil
				}
				return "", fmt.Errorf("unexpected command on %s: %v", node, cmd)
			}, nil)
			cs := g.Cluster.(*clustertest.Cluster).Clientset()
			cs.PrependReactor("create", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
				svc := a.(k8stesting.CreateAction).GetObject().(*corev1.Service)
				svc.Spec.ClusterIP = "10.96.0.99"
				return false, nil, nil
			})
			c := &scenario.Check{ID: "follows", Weight: 1, Dataplane: &scenario.DataplaneCheck{Follows: &scenario.FollowsAssertion{WithinSeconds: 1}}}
			r := g.Check(context.Background(), c, nil)
			if r.Passed != tc.pass || !strings.HasPrefix(r.Detail, tc.want) {
				t.Errorf("passed=%v detail=%q, want %v %q…", r.Passed, r.Detail, tc.pass, tc.want)
			}
			svcs, err := cs.CoreV1().Services(witnessNamespace).List(context.Background(), metav1.ListOptions{})
			if err != nil || len(svcs.Items) != 0 {
				t.Errorf("the grader's Services are still there: %v %v", svcs, err)
			}
		})
	}
}

// witnessTable renders a kube-proxy table for the grader's own Service as
// the API has it: in service-ips with an endpoint, in
// no-endpoint-services without.
func witnessTable(t *testing.T, g *Grader) string {
	cs := g.Cluster.(*clustertest.Cluster).Clientset()
	svcs, err := cs.CoreV1().Services(witnessNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Error(err)
	}
	ips, noEP := "", ""
	for _, svc := range svcs.Items {
		sl, err := cs.DiscoveryV1().EndpointSlices(witnessNamespace).Get(context.Background(), svc.Name, metav1.GetOptions{})
		key := svc.Spec.ClusterIP + " . tcp . 80"
		if err == nil && len(sl.Endpoints) > 0 {
			ips = "\t\telements = { " + key + " : goto service-W-kube-system/" + svc.Name + "/tcp/http }\n"
		} else {
			noEP = "\t\telements = { " + key + " : goto reject-chain }\n"
		}
	}
	return "table ip kube-proxy {\n\tmap no-endpoint-services {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n" + noEP + "\t}\n" +
		"\tmap service-ips {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n" + ips + "\t}\n}\n"
}
