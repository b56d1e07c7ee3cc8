package manifest

import (
	"errors"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	in := `# leading comment only
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata: {namespace: a, name: s1}
  spec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: a, name: s1-x, labels: {kubernetes.io/service-name: s1}}
addressType: FQDN
endpoints: [{addresses: [example.com]}]
...
`
	objs, err := Decode(strings.NewReader(in), "in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs.Services) != 1 || len(objs.Nodes) != 1 || len(objs.EndpointSlices) != 1 {
		t.Fatalf("got %d services, %d nodes, %d slices", len(objs.Services), len(objs.Nodes), len(objs.EndpointSlices))
	}
	if objs.Node("n1") == nil || objs.Node("n2") != nil {
		t.Error("Node lookup broken")
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"missing kind", "apiVersion: v1\nmetadata: {name: x}\n", []string{"in.yaml:1: document 1: kind: missing"}},
		{"not an object", "- a\n- b\n", []string{"in.yaml:1: document 1", "not a YAML object"}},
		{"bad port", "---\n---\napiVersion: v1\nkind: Service\nmetadata: {namespace: a, name: s}\nspec: {clusterIP: 10.96.0.1, ports: [{port: 70000}]}\n",
			[]string{"in.yaml:3: document 1 (Service a/s): spec.ports[0].port: port 70000 out of range"}},
		{"bad protocol", "apiVersion: v1\nkind: Service\nmetadata: {namespace: a, name: s}\nspec: {clusterIP: 10.96.0.1, ports: [{port: 80, protocol: ICMP}]}\n",
			[]string{"spec.ports[0].protocol: unsupported protocol \"ICMP\""}},
		{"unnamed ports", "apiVersion: v1\nkind: Service\nmetadata: {namespace: a, name: s}\nspec: {clusterIP: 10.96.0.1, ports: [{port: 80}, {port: 81}]}\n",
			[]string{"spec.ports[0].name: required"}},
		{"bad cluster IP", "apiVersion: v1\nkind: Service\nmetadata: {namespace: a, name: s}\nspec: {clusterIP: 10.96.0.300}\n",
			[]string{`spec.clusterIP: "10.96.0.300" is not an IP address`}},
		{"bad source range", "apiVersion: v1\nkind: Service\nmetadata: {namespace: a, name: s}\nspec: {clusterIP: 10.96.0.1, loadBalancerSourceRanges: [1.2.3.4]}\n",
			[]string{"spec.loadBalancerSourceRanges[0]"}},
		{"slice without label", "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {namespace: a, name: e}\naddressType: IPv4\n",
			[]string{"(EndpointSlice a/e): metadata.labels: missing label kubernetes.io/service-name"}},
		{"unknown field inside a list", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: node1}\n  spec: {podCIDRx: 1}\n",
			[]string{"(Node node1): items[0]", `unknown field "spec.podCIDRx"`}},
		{"two errors", "apiVersion: v1\nkind: Pod\n---\napiVersion: v1\nkind: Secret\n",
			[]string{"document 1", "document 2", `"v1/Pod"`, `"v1/Secret"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(strings.NewReader(tc.in), "in.yaml")
			if err == nil {
				t.Fatal("want error")
			}
			var de *DocumentError
			if !errors.As(err, &de) {
				t.Errorf("error %v is not a *DocumentError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
