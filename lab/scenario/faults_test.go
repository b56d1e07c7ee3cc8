package scenario

import (
	"errors"
	"strings"
	"testing"
)

func TestFaultSpecValidate(t *testing.T) {
	reg := DefaultFaults()
	for _, tc := range []struct {
		fault  string
		params Params
		want   []string // ParamError texts; none means valid
	}{
		{"selector-typo", Params{"service": "web"}, nil},
		{"selector-typo", Params{"service": "web", "namespace": "shop", "key": "app", "value": "wbe"}, nil},
		{"selector-typo", Params{}, []string{"service: is required: the Service to break"}},
		{"selector-typo", Params{"service": "Web_1"}, []string{`service: "Web_1" is not a valid Service name`}},
		{"targetport-mismatch", Params{"service": "api", "targetPort": 9090}, nil},
		{"targetport-mismatch", Params{"service": "api", "targetPort": "metrics"}, nil},
		{"targetport-mismatch", Params{"service": "api", "targetPort": 70000}, []string{"targetPort: port 70000 must be between 1 and 65535"}},
		{"targetport-mismatch", Params{"service": "api", "targetPort": true}, []string{"targetPort: must be a port number or a port name"}},
		{"traffic-distribution", Params{"service": "web", "mode": "PreferSameZone"}, nil},
		{"traffic-distribution", Params{"service": "web", "mode": "Nearest"}, []string{`mode: "Nearest" is not one of "PreferClose", "PreferSameZone" or "PreferSameNode"`}},
		{"conntrack-table-small", Params{"node": "worker", "max": 32}, nil},
		{"conntrack-table-small", Params{"node": 3, "max": "big"}, []string{"node: must be a string", "max: must be an integer"}},
		{"proxier-dead", Params{"node": "worker", "extra": 1}, []string{"extra: unknown parameter; proxier-dead takes node"}},
		{"default-deny-networkpolicy", Params{"pods": "all"}, []string{"pods: unknown parameter; default-deny-networkpolicy takes namespace"}},
	} {
		kind, ok := reg.Lookup(tc.fault)
		if !ok {
			t.Fatalf("no fault %s", tc.fault)
		}
		err := kind.Validate(tc.params)
		var got []string
		for _, e := range flatten(err) {
			if e == nil {
				continue
			}
			var pe *ParamError
			if !errors.As(e, &pe) {
				t.Errorf("%s %v: error %v is not a *ParamError", tc.fault, tc.params, e)
			}
			got = append(got, e.Error())
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s %v: errors %q, want %q", tc.fault, tc.params, got, tc.want)
			continue
		}
		for i := range got {
			if !strings.HasPrefix(got[i], tc.want[i]) {
				t.Errorf("%s %v: error %q, want it to start with %q", tc.fault, tc.params, got[i], tc.want[i])
			}
		}
	}
}

// The fault list: every name is declared once, with a level and a
// summary, and each object parameter says its kind.
func TestFaultSpecsComplete(t *testing.T) {
	want := []string{
		"selector-typo", "targetport-mismatch", "port-name-mismatch", "failing-readiness-probe", "scale-to-zero",
		"etp-local-single-node", "itp-local-no-local-replica", "traffic-distribution", "session-affinity-snat",
		"statefulset-not-ready-peers", "headless-clusterip-confusion", "external-name", "default-deny-networkpolicy",
		"networkpolicy-and-or", "stale-udp-conntrack-dns", "proxier-dead", "proxier-stuck", "nodeport-primary-ip-only",
		"conntrack-table-small", "ip-forward-off", "rule-deleted", "hairpin", "traffic-policy", "stuck-rollout", "rollout-restart",
		"node-marked-for-deletion", "topology-mode-annotation", "kube-proxy-config", "label-client-backend", "abrupt-shutdown", "outside-route", "scale-deployment",
	}
	seen := map[string]bool{}
	for _, f := range FaultSpecs {
		if seen[f.FaultName] {
			t.Errorf("%s declared twice", f.FaultName)
		}
		seen[f.FaultName] = true
		if f.Level != "api" && f.Level != "dataplane" {
			t.Errorf("%s: level %q", f.FaultName, f.Level)
		}
		if f.Summary == "" {
			t.Errorf("%s: no summary", f.FaultName)
		}
		for _, p := range f.Params {
			if p.Type == ParamObject && p.Kind == "" {
				t.Errorf("%s.%s: object parameter without a kind", f.FaultName, p.Name)
			}
			if p.Doc == "" {
				t.Errorf("%s.%s: no doc", f.FaultName, p.Name)
			}
		}
	}
	for _, name := range want {
		if !seen[name] {
			t.Errorf("fault %s is not declared", name)
		}
	}
	if len(FaultSpecs) != len(want) {
		t.Errorf("%d faults declared, want %d", len(FaultSpecs), len(want))
	}
}

func TestObjectRefGVK(t *testing.T) {
	for _, tc := range []struct {
		ref  ObjectRef
		want string
	}{
		{ObjectRef{Kind: "Service"}, "/v1, Kind=Service"},
		{ObjectRef{Kind: "EndpointSlice"}, "discovery.k8s.io/v1, Kind=EndpointSlice"},
		{ObjectRef{Kind: "Deployment"}, "apps/v1, Kind=Deployment"},
		{ObjectRef{Kind: "NetworkPolicy"}, "networking.k8s.io/v1, Kind=NetworkPolicy"},
		{ObjectRef{APIVersion: "apps/v1", Kind: "StatefulSet"}, "apps/v1, Kind=StatefulSet"},
	} {
		got, err := tc.ref.GVK()
		if err != nil || got.String() != tc.want {
			t.Errorf("%+v: GVK() = %v, %v; want %s", tc.ref, got, err, tc.want)
		}
	}
	for _, bad := range []ObjectRef{{Kind: "service"}, {APIVersion: "v1", Kind: "Deployment"}, {APIVersion: "a/b/c", Kind: "Service"}} {
		if _, err := bad.GVK(); err == nil {
			t.Errorf("%+v: GVK() resolved", bad)
		}
	}
}

func TestParamsAccessors(t *testing.T) {
	p := Params{"s": "x", "i": 3, "b": true}
	if p.String("s", "d") != "x" || p.String("i", "d") != "d" || p.String("none", "d") != "d" {
		t.Error("String")
	}
	if p.Int("i", 0) != 3 || p.Int("s", 7) != 7 {
		t.Error("Int")
	}
	if !p.Bool("b", false) || p.Bool("s", false) {
		t.Error("Bool")
	}
}
