package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8stesting "k8s.io/client-go/testing"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/cluster/clustertest"
	"github.com/svclab/svclab/lab/scenario"
)

// newFake is the cluster "lab" holding objs, whose node commands respond
// answers, given each command as its words joined by spaces (nil: they
// succeed, printing nothing).
func newFake(respond func(node, cmd string) (string, error), objs ...runtime.Object) *clustertest.Cluster {
	opts := []clustertest.Option{clustertest.WithObjects(objs...)}
	opts = append(opts, clustertest.WithRespond(func(node string, cmd []string) (string, error) {
		var out string
		var err error
		if respond != nil {
			out, err = respond(node, strings.Join(cmd, " "))
		}
		// The proxier answers curl's requests (cluster.NodeHTTP) with 200.
		if err == nil && cmd[0] == "curl" && !strings.Contains(out, cluster.CurlStatusMark) {
			out += cluster.CurlStatusMark + "200"
		}
		return out, err
	}))
	return clustertest.NewCluster("lab", opts...)
}

// proxierCall is the call of a request to the proxier on node, as
// cluster.NodeHTTP makes it with curl: a GET without body, else a POST of
// JSON.
func proxierCall(node, path, body string) string {
	if body == "" {
		return node + ": curl -sS -m 5 -X GET -w " + cluster.CurlStatusMark + "%{http_code} http://127.0.0.1:10249" + path
	}
	return node + ": curl -sS -m 5 -X POST -w " + cluster.CurlStatusMark + "%{http_code} -H Content-Type: application/json --data-raw " + body + " http://127.0.0.1:10249" + path
}

func web() *appsv1.Deployment {
	two := int32(2)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: appsv1.DeploymentSpec{Replicas: &two, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "netexec",
				Args:           []string{"netexec", "--http-port=8080", "--delay-shutdown=5"},
				Lifecycle:      &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}},
				Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}},
			}}},
		}},
	}
}

func webService(mut func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "uid-1"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web", "tier": "frontend"}, ClusterIP: "10.96.0.50",
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")}}},
	}
	if mut != nil {
		mut(s)
	}
	return s
}

// webSlice is the EndpointSlice of web: one Pod on lab-worker.
func webSlice() *discoveryv1.EndpointSlice {
	node := "lab-worker"
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "shop", Labels: map[string]string{"kubernetes.io/service-name": "web"}},
		Endpoints:  []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.5"}, NodeName: &node}},
	}
}

func getSvc(t *testing.T, f *clustertest.Cluster) *corev1.Service {
	t.Helper()
	s, err := f.Clientset().CoreV1().Services("shop").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func getDeploy(t *testing.T, f *clustertest.Cluster) *appsv1.Deployment {
	t.Helper()
	d, err := f.Clientset().AppsV1().Deployments("shop").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestAPIFaults(t *testing.T) {
	nodePort := func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }
	twoPorts := func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(9090)})
	}
	for _, tc := range []struct {
		name    string
		fault   string
		params  scenario.Params
		svc     func(*corev1.Service)
		wantErr string
		check   func(t *testing.T, f *clustertest.Cluster)
	}{
		{name: "selector typo with a given value", fault: "selector-typo",
			params: scenario.Params{"service": "web", "namespace": "shop", "key": "app", "value": "wbe"},
			check: func(t *testing.T, f *clustertest.Cluster) {
				if got := getSvc(t, f).Spec.Selector; got["app"] != "wbe" || got["tier"] != "frontend" {
					t.Errorf("selector %v", got)
				}
			}},
		{name: "selector typo defaults to the first key, letters swapped", fault: "selector-typo",
			params: scenario.Params{"service": "web", "namespace": "shop"},
			check: func(t *testing.T, f *clustertest.Cluster) {
				if got := getSvc(t, f).Spec.Selector["app"]; got != "wbe" {
					t.Errorf("app = %q", got)
				}
			}},
		{name: "selector typo of a missing key", fault: "selector-typo",
			params: scenario.Params{"service": "web", "namespace": "shop", "key": "ap"}, wantErr: `Service shop/web: its selector has no key "ap" (it has app, tier)`},
		{name: "selector typo of a Service without selector", fault: "selector-typo", svc: func(s *corev1.Service) { s.Spec.Selector = nil },
			params: scenario.Params{"service": "web", "namespace": "shop"}, wantErr: "it has no selector"},
		{name: "selector typo where the Service is missing", fault: "selector-typo",
			params: scenario.Params{"service": "api", "namespace": "shop"}, wantErr: "there is no Service shop/api: was the scenario's setup applied?"},
		{name: "targetPort mismatch by number", fault: "targetport-mismatch",
			params: scenario.Params{"service": "web", "namespace": "shop", "port": 80, "targetPort": 9090},
			check: func(t *testing.T, f *clustertest.Cluster) {
				if got := getSvc(t, f).Spec.Ports[0].TargetPort; got != intstr.FromInt32(9090) {
					t.Errorf("targetPort %v", got)
				}
			}},
		{name: "targetPort mismatch by name on the first port", fault: "targetport-mismatch",
			params: scenario.Params{"service": "web", "namespace": "shop", "targetPort": "htpp"},
			check: func(t *testing.T, f *clustertest.Cluster) {
				if got := getSvc(t, f).Spec.Ports[0].TargetPort; got != intstr.FromString("htpp") {
					t.Errorf("targetPort %v", got)
				}
			}},
		{name: "targetPort mismatch on a missing port", fault: "targetport-mismatch",
			params: scenario.Params{"service": "web", "namespace": "shop", "port": 81, "targetPort": 9090}, wantErr: "it has no port 81 (its ports are 80)"},
		{name: "targetPort mismatch that changes nothing", fault: "targetport-mismatch",
			params: scenario.Params{"service": "web", "namespace": "shop", "targetPort": "http"}, wantErr: "already targets http"},
		{name: "port renamed", fault: "port-name-mismatch", svc: twoPorts,
			params: scenario.Params{"service": "web", "namespace": "shop", "port": 9090, "name": "metric"},
			check: func(t *testing.T, f *clustertest.Cluster) {
				if got := getSvc(t, f).Spec.Ports[1].Name; got != "metric" {
					t.Errorf("name %q", got)
				}
			}},
		{name: "port name removed from a multi-port Service", fault: "port-name-mismatch", svc: twoPorts,
			params: scenario.Params{"service": "web", "namespace": "shop", "port": 9090}, wantErr: "requires a name on every port"},
		{name: "failing readiness probe", fault: "failing-readiness-probe",
			params: scenario.Params{"deployment": "web", "namespace": "shop"},
			check: func(t *testing.T, f *clustertest.Cluster) {
				d := getDeploy(t, f)
				if got := d.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Path; got != "/not-ready" {
					t.Errorf("path %q", got)
				}
				if mu := d.Spec.Strategy.RollingUpdate.MaxUnavailable; mu.String() != "100%" {
					t.Errorf("maxUnavailable %v", mu)
				}
			}},
		{name: "failing readiness probe of a missing container", fault: "failing-readiness-probe",
			params: scenario.Params{"deployment": "web", "namespace": "shop", "container": "app"}, wantErr: `no container "app" (it has netexec)`},
		{name: "abrupt shutdown", fault: "abrupt-shutdown",
			params: scenario.Params{"deployment": "web", "namespace": "shop"},
			check: func(t *testing.T, f *clustertest.Cluster) {
				spec := getDeploy(t, f).Spec.Template.Spec
				if g := spec.TerminationGracePeriodSeconds; g == nil || *g != 1 {
					t.Errorf("grace period %v", g)
				}
				for _, c := range spec.Containers {
					if c.Lifecycle != nil || slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--delay-shutdown") }) {
						t.Errorf("container %s still delays its shutdown: %v %v", c.Name, c.Lifecycle, c.Args)
					}
				}
			}},
		{name: "scale up", fault: "scale-deployment",
			params: scenario.Params{"deployment": "web", "namespace": "shop", "replicas": 110},
			check: func(t *testing.T, f *clustertest.Cluster) {
				if got := *getDeploy(t, f).Spec.Replicas; got != 110 {
					t.Errorf("replicas %d", got)
				}
			}},
		{name: "scale to what it has", fault: "scale-deployment",
			params: scenario.Params{"deployment": "web", "namespace": "shop", "replicas": 2}, wantErr: "it has 2 replicas already"},
		{name: "scale to zero", fault: "scale-to-zero",
			params: scenario.Params{"deployment": "web", "namespace": "shop"},
			check: func(t *testing.T, f *clustertest.Cluster) {
				if got := *getDeploy(t, f).Spec.Replicas; got != 0 {
					t.Errorf("replicas %d", got)
				}
			}},
		{name: "eTP Local on one node", fault: "etp-local-single-node", svc: nodePort,
			params: scenario.Params{"service": "web", "deployment": "web", "namespace": "shop", "node": "worker"},
			check: func(t *testing.T, f *clustertest.Cluster) {
				if got := getSvc(t, f).Spec.ExternalTrafficPolicy; got != corev1.ServiceExternalTrafficPolicyLocal {
					t.Errorf("eTP %q", got)
				}
				if got := getDeploy(t, f).Spec.Template.Spec.NodeSelector; got[hostnameLabel] != "lab-worker" {
					t.Errorf("nodeSelector %v", got)
				}
			}},
		{name: "eTP Local on a ClusterIP Service", fault: "etp-local-single-node",
			params: scenario.Params{"service": "web", "deployment": "web", "namespace": "shop", "node": "worker"}, wantErr: "it is of type ClusterIP; externalTrafficPolicy only applies"},
		{name: "eTP Local on a node the cluster lacks", fault: "etp-local-single-node", svc: nodePort,
			params: scenario.Params{"service": "web", "deployment": "web", "namespace": "shop", "node": "worker3"}, wantErr: "cluster lab has no node lab-worker3"},
		{name: "iTP Local without a local replica", fault: "itp-local-no-local-replica",
			params: scenario.Params{"service": "web", "deployment": "web", "namespace": "shop", "node": "worker2"},
			check: func(t *testing.T, f *clustertest.Cluster) {
				if got := getSvc(t, f).Spec.InternalTrafficPolicy; got == nil || *got != corev1.ServiceInternalTrafficPolicyLocal {
					t.Errorf("iTP %v", got)
				}
				terms := getDeploy(t, f).Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
				if len(terms) != 1 || terms[0].MatchExpressions[0].Values[0] != "lab-worker2" || terms[0].MatchExpressions[0].Operator != corev1.NodeSelectorOpNotIn {
					t.Errorf("terms %+v", terms)
				}
			}},
		{name: "session affinity", fault: "session-affinity-snat",
			params: scenario.Params{"service": "web", "namespace": "shop"},
			check: func(t *testing.T, f *clustertest.Cluster) {
				if got := getSvc(t, f).Spec.SessionAffinity; got != corev1.ServiceAffinityClientIP {
					t.Errorf("affinity %q", got)
				}
			}},
		{name: "headless confusion recreates the Service", fault: "headless-clusterip-confusion",
			params: scenario.Params{"service": "web", "namespace": "shop"},
			check: func(t *testing.T, f *clustertest.Cluster) {
				s := getSvc(t, f)
				if s.Spec.ClusterIP != corev1.ClusterIPNone || s.UID == "uid-1" || s.Spec.Selector["app"] != "web" {
					t.Errorf("service %+v", s)
				}
			}},
		{name: "headless confusion of a NodePort Service", fault: "headless-clusterip-confusion", svc: nodePort,
			params: scenario.Params{"service": "web", "namespace": "shop"}, wantErr: "only a ClusterIP Service can be headless"},
		{name: "ExternalName", fault: "external-name",
			params: scenario.Params{"service": "web", "namespace": "shop", "externalName": "web.example.invalid"},
			check: func(t *testing.T, f *clustertest.Cluster) {
				s := getSvc(t, f)
				if s.Spec.Type != corev1.ServiceTypeExternalName || s.Spec.ExternalName != "web.example.invalid" || s.Spec.ClusterIP != "" {
					t.Errorf("service %+v", s.Spec)
				}
			}},
		{name: "ExternalName pointed elsewhere", fault: "external-name",
			svc: func(s *corev1.Service) {
				s.Spec.Type, s.Spec.ExternalName, s.Spec.ClusterIP = corev1.ServiceTypeExternalName, "web.right.svc", ""
			},
			params: scenario.Params{"service": "web", "namespace": "shop", "externalName": "web.wrong.svc"},
			check: func(t *testing.T, f *clustertest.Cluster) {
				if s := getSvc(t, f); s.Spec.ExternalName != "web.wrong.svc" {
					t.Errorf("externalName %q", s.Spec.ExternalName)
				}
			}},
		{name: "internal traffic policy Cluster", fault: "traffic-policy",
			params: scenario.Params{"service": "web", "namespace": "shop", "internal": "Local"},
			check: func(t *testing.T, f *clustertest.Cluster) {
				if s := getSvc(t, f); s.Spec.InternalTrafficPolicy == nil || *s.Spec.InternalTrafficPolicy != corev1.ServiceInternalTrafficPolicyLocal {
					t.Errorf("internalTrafficPolicy %v", s.Spec.InternalTrafficPolicy)
				}
			}},
		{name: "external traffic policy on a NodePort Service", fault: "traffic-policy", svc: nodePort,
			params: scenario.Params{"service": "web", "namespace": "shop", "external": "Local"},
			check: func(t *testing.T, f *clustertest.Cluster) {
				if s := getSvc(t, f); s.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
					t.Errorf("externalTrafficPolicy %v", s.Spec.ExternalTrafficPolicy)
				}
			}},
		{name: "external traffic policy on a ClusterIP Service", fault: "traffic-policy",
			params: scenario.Params{"service": "web", "namespace": "shop", "external": "Local"}, wantErr: "only applies to NodePort and LoadBalancer"},
		{name: "traffic policy without a policy", fault: "traffic-policy",
			params: scenario.Params{"service": "web", "namespace": "shop"}, wantErr: "needs external, internal or both"},
		{name: "stuck rollout", fault: "stuck-rollout",
			params: scenario.Params{"deployment": "web", "namespace": "shop"},
			check: func(t *testing.T, f *clustertest.Cluster) {
				d := getDeploy(t, f)
				if d.Spec.Template.Labels["version"] != "v2" || d.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Path != "/ready" {
					t.Errorf("template %+v", d.Spec.Template)
				}
			}},
		{name: "failing readiness probe on a wrong port", fault: "failing-readiness-probe",
			params: scenario.Params{"deployment": "web", "namespace": "shop", "port": 8000},
			check: func(t *testing.T, f *clustertest.Cluster) {
				p := getDeploy(t, f).Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet
				if p.Port != intstr.FromInt32(8000) || p.Path != "/healthz" {
					t.Errorf("probe %+v", p)
				}
			}},
		{name: "failing readiness probe on the container's own port", fault: "failing-readiness-probe",
			params: scenario.Params{"deployment": "web", "namespace": "shop", "port": 8080}, wantErr: "must ask a port where nothing listens"},
		{name: "stuck rollout on a wrong port", fault: "stuck-rollout",
			params: scenario.Params{"deployment": "web", "namespace": "shop", "port": 8000},
			check: func(t *testing.T, f *clustertest.Cluster) {
				d := getDeploy(t, f)
				if p := d.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet; p.Port != intstr.FromInt32(8000) || d.Spec.Template.Labels["version"] != "v2" {
					t.Errorf("template %+v", d.Spec.Template)
				}
			}},
		{name: "rollout restart", fault: "rollout-restart",
			params: scenario.Params{"deployment": "web", "namespace": "shop"},
			check: func(t *testing.T, f *clustertest.Cluster) {
				if d := getDeploy(t, f); d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] == "" {
					t.Errorf("template annotations %v", d.Spec.Template.Annotations)
				}
			}},
		{name: "topology-mode annotation", fault: "topology-mode-annotation",
			params: scenario.Params{"service": "web", "namespace": "shop"},
			check: func(t *testing.T, f *clustertest.Cluster) {
				if got := getSvc(t, f).Annotations[topologyModeAnnotation]; got != "Auto" {
					t.Errorf("annotation %q", got)
				}
			}},
		{name: "topology-mode annotation already there", fault: "topology-mode-annotation",
			svc:    func(s *corev1.Service) { s.Annotations = map[string]string{topologyModeAnnotation: "auto"} },
			params: scenario.Params{"service": "web", "namespace": "shop", "value": "auto"}, wantErr: "has the annotation service.kubernetes.io/topology-mode=auto already"},
		{name: "default deny", fault: "default-deny-networkpolicy",
			params: scenario.Params{"namespace": "shop"},
			check: func(t *testing.T, f *clustertest.Cluster) {
				np, err := f.Clientset().NetworkingV1().NetworkPolicies("shop").Get(context.Background(), defaultDenyName, metav1.GetOptions{})
				if err != nil || len(np.Spec.PolicyTypes) != 1 || len(np.Spec.Ingress) != 0 {
					t.Errorf("policy %v %+v", err, np)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(nil, webService(tc.svc), web())
			fault, err := Lookup(Registry(), tc.fault)
			if err != nil {
				t.Fatal(err)
			}
			if err := fault.Validate(tc.params); err != nil {
				t.Fatalf("params do not validate: %v", err)
			}
			err = fault.Inject(context.Background(), f, tc.params)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, f)
		})
	}
}

func TestSwapLetters(t *testing.T) {
	for in, want := range map[string]string{"web": "wbe", "api": "aip", "aa": "aax", "": "x", "ab": "ba"} {
		if got := swapLetters(in); got != want {
			t.Errorf("swapLetters(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDataplaneFaults(t *testing.T) {
	nftSvc := webService(nil)
	for _, tc := range []struct {
		name      string
		fault     string
		params    scenario.Params
		respond   func(node, cmd string) (string, error)
		revert    bool
		wantCalls []string
		wantErr   string
	}{
		{name: "proxier stuck", fault: "proxier-stuck", params: scenario.Params{"node": "worker"},
			wantCalls: []string{proxierCall("lab-worker", "/faults", `{"stopSyncing":true}`)}},
		{name: "proxier stuck reverted", fault: "proxier-stuck", params: scenario.Params{"node": "worker"}, revert: true,
			wantCalls: []string{proxierCall("lab-worker", "/faults", `{"stopSyncing":false}`)}},
		{name: "proxier stuck where no proxier answers", fault: "proxier-stuck", params: scenario.Params{"node": "worker"},
			respond: func(string, string) (string, error) { return "", errors.New("exit status 7") },
			wantErr: "is kube-proxy running there?"},
		{name: "ip_forward off", fault: "ip-forward-off", params: scenario.Params{"node": "worker2"},
			wantCalls: []string{"lab-worker2: sysctl -w net.ipv4.ip_forward=0"}},
		{name: "ip_forward back on", fault: "ip-forward-off", params: scenario.Params{"node": "worker2"}, revert: true,
			wantCalls: []string{"lab-worker2: sysctl -w net.ipv4.ip_forward=1"}},
		{name: "nftables rule deleted", fault: "rule-deleted", params: scenario.Params{"service": "web", "namespace": "shop", "node": "worker"},
			respond: func(_, cmd string) (string, error) {
				if strings.HasSuffix(cmd, "/proxyMode") {
					return "nftables", nil
				}
				return "", nil
			},
			wantCalls: []string{proxierCall("lab-worker", "/proxyMode", ""),
				"lab-worker: nft delete element ip kube-proxy service-ips { 10.96.0.50 . tcp . 80 }"}},
		{name: "iptables rule deleted", fault: "rule-deleted", params: scenario.Params{"service": "web", "namespace": "shop", "node": "worker"},
			respond: func(_, cmd string) (string, error) {
				switch {
				case strings.HasSuffix(cmd, "/proxyMode"):
					return "iptables\n", nil
				case strings.HasPrefix(cmd, "iptables-save"):
					return "*nat\n-A KUBE-SERVICES -d 10.96.0.10/32 -p udp -m comment --comment \"kube-system/kube-dns:dns cluster IP\" -m udp --dport 53 -j KUBE-SVC-TCOU7JCQXEZGVUNU\n" +
						"-A KUBE-SERVICES -d 10.96.0.50/32 -p tcp -m comment --comment \"shop/web:http cluster IP\" -m tcp --dport 80 -j KUBE-SVC-ABC\nCOMMIT\n", nil
				}
				return "", nil
			},
			wantCalls: []string{proxierCall("lab-worker", "/proxyMode", ""), "lab-worker: iptables-save -t nat",
				`lab-worker: bash -c iptables -t nat -D KUBE-SERVICES -d 10.96.0.50/32 -p tcp -m comment --comment "shop/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-ABC`}},
		{name: "iptables rule not there", fault: "rule-deleted", params: scenario.Params{"service": "web", "namespace": "shop", "node": "worker"},
			respond: func(_, cmd string) (string, error) {
				if strings.HasSuffix(cmd, "/proxyMode") {
					return "iptables", nil
				}
				return "*nat\nCOMMIT\n", nil
			},
			wantErr: "node lab-worker has no KUBE-SERVICES rule for Service shop/web"},
		{name: "second address", fault: "nodeport-primary-ip-only", params: scenario.Params{"node": "worker"},
			respond: func(_, cmd string) (string, error) {
				return "1: lo    inet 127.0.0.1/8 scope host lo\n2: eth0    inet 172.29.1.3/24 brd 172.29.1.255 scope global eth0\n", nil
			},
			wantCalls: []string{"lab-worker: ip -o -4 addr show", "lab-worker: ip addr add 172.29.1.103/24 dev eth0"}},
		{name: "second address removed", fault: "nodeport-primary-ip-only", params: scenario.Params{"node": "worker", "address": "172.29.1.50/24"}, revert: true,
			respond: func(_, cmd string) (string, error) {
				return "2: eth0    inet 172.29.1.3/24 brd 172.29.1.255 scope global eth0\n", nil
			},
			wantCalls: []string{"lab-worker: ip -o -4 addr show", "lab-worker: ip addr del 172.29.1.50/24 dev eth0"}},
		{name: "conntrack table capped", fault: "conntrack-table-small", params: scenario.Params{"node": "worker", "max": 16},
			wantCalls: []string{"lab-worker: bash -c nft -f - <<'EOF'\ntable inet svclab-conntrack-max {\n\tcomment \"emulates net.netfilter.nf_conntrack_max=16: new connections beyond 16 tracked ones are dropped\"\n\tchain prerouting {\n\t\ttype filter hook prerouting priority mangle - 10; policy accept;\n\t\tjump capacity\n\t}\n\tchain output {\n\t\ttype filter hook output priority mangle - 10; policy accept;\n\t\tjump capacity\n\t}\n\tchain capacity {\n\t\tct state new ct count over 16 counter drop comment \"nf_conntrack: table full, dropping packet\"\n\t}\n}\nEOF\n"}},
		{name: "conntrack table restored", fault: "conntrack-table-small", params: scenario.Params{"node": "worker"}, revert: true,
			wantCalls: []string{"lab-worker: bash -c ! nft list table inet svclab-conntrack-max >/dev/null 2>&1 || nft delete table inet svclab-conntrack-max"}},
		{name: "hairpin off for every Pod of the node", fault: "hairpin", params: scenario.Params{"service": "web", "namespace": "shop", "node": "worker"},
			// No Pod is named: a Pod created later (the learner deleting
			// the Pods) is covered too.
			wantCalls: []string{"lab-worker: bash -c nft -f - <<'EOF'\n" + hairpinScript + "EOF\n"}},
		{name: "hairpin without endpoints on the node", fault: "hairpin", params: scenario.Params{"service": "web", "namespace": "shop", "node": "worker2"},
			wantErr: "has no endpoints on the node(s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(tc.respond, nftSvc.DeepCopy(), webSlice())
			fault, err := Lookup(Registry(), tc.fault)
			if err != nil {
				t.Fatal(err)
			}
			if err := fault.Validate(tc.params); err != nil {
				t.Fatalf("params do not validate: %v", err)
			}
			if tc.revert {
				err = fault.(Reverter).Revert(context.Background(), f, tc.params)
			} else {
				err = fault.Inject(context.Background(), f, tc.params)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(f.Calls(), "\n") != strings.Join(tc.wantCalls, "\n") {
				t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(f.Calls(), "\n"), strings.Join(tc.wantCalls, "\n"))
			}
		})
	}
}

func TestProxierDead(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"}}
	f := newFake(nil, ds)
	p := scenario.Params{"node": "worker"}
	fault, err := Lookup(Registry(), "proxier-dead")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := fault.Inject(ctx, f, p); err != nil {
		t.Fatal(err)
	}
	got, _ := f.Clientset().AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	terms := got.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || terms[0].MatchExpressions[0].Values[0] != "lab-worker" {
		t.Fatalf("affinity %+v", terms)
	}
	if err := fault.(Reverter).Revert(ctx, f, p); err != nil {
		t.Fatal(err)
	}
	got, _ = f.Clientset().AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if got.Spec.Template.Spec.Affinity != nil {
		t.Errorf("affinity left after revert: %+v", got.Spec.Template.Spec.Affinity)
	}
}

func TestStaleUDPConntrackDNS(t *testing.T) {
	objs := []runtime.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "coredns-a", Namespace: "kube-system", Labels: map[string]string{"k8s-app": "kube-dns"}},
			Spec: corev1.PodSpec{NodeName: "lab-worker"}, Status: corev1.PodStatus{PodIP: "10.244.1.2", Phase: corev1.PodRunning}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "coredns-b", Namespace: "kube-system", Labels: map[string]string{"k8s-app": "kube-dns"}},
			Spec: corev1.PodSpec{NodeName: "lab-worker2"}, Status: corev1.PodStatus{PodIP: "10.244.2.2", Phase: corev1.PodRunning}},
	}
	// A placeholder an earlier version left.
	objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "svclab-address-hold-x", Namespace: "kube-system", Labels: map[string]string{addressHoldLabel: "coredns-b"}},
		Spec: corev1.PodSpec{NodeName: "lab-worker2"}, Status: corev1.PodStatus{PodIP: "10.244.2.3", Phase: corev1.PodRunning}})
	// The first query is answered by the CoreDNS Pod on the node itself,
	// whose entry the kernel would flush with its veth; the second by the
	// remote one.
	answers := []string{"10.244.1.2", "10.244.2.2"}
	// The deleted Pod's node tears it down a moment later.
	routes := []string{"10.244.2.2 dev veth1234 scope link src 10.244.2.1\n", ""}
	f := newFake(func(node, cmd string) (string, error) {
		if strings.HasPrefix(cmd, "ip -o route show") {
			r := routes[0]
			routes = routes[1:]
			return r, nil
		}
		if strings.HasPrefix(cmd, "conntrack -L") {
			ip := answers[0]
			answers = answers[1:]
			return "udp      17 29 src=172.29.1.3 dst=10.96.0.10 sport=53535 dport=53 src=" + ip + " dst=172.29.1.3 sport=53 dport=53535 mark=0 use=1\n", nil
		}
		return "", nil
	}, objs...)
	fault, err := Lookup(Registry(), "stale-udp-conntrack-dns")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := fault.Inject(ctx, f, scenario.Params{"node": "worker"}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		proxierCall("lab-worker", "/faults", `{"skipConntrackCleanup":true}`),
	}
	for range 2 {
		want = append(want,
			"lab-worker: conntrack -D -p udp --orig-dst 10.96.0.10 --orig-port-src 53535",
			"lab-worker: dig +time=2 +tries=1 -b 0.0.0.0#53535 @10.96.0.10 kubernetes.default.svc.cluster.local",
			"lab-worker: conntrack -L -p udp --orig-dst 10.96.0.10 --orig-port-src 53535")
	}
	want = append(want, "lab-worker2: ip -o route show 10.244.2.2/32", "lab-worker2: ip -o route show 10.244.2.2/32")
	if strings.Join(f.Calls(), "\n") != strings.Join(want, "\n") {
		t.Errorf("calls:\n%s", strings.Join(f.Calls(), "\n"))
	}
	pods, _ := f.Clientset().CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if len(pods.Items) != 1 || pods.Items[0].Name != "coredns-a" {
		t.Errorf("the CoreDNS Pod that answered was not deleted: %+v", pods.Items)
	}
	// No placeholder holds the dead Pod's address: nodes hand out
	// addresses round-robin.
	all, _ := f.Clientset().CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
	if len(all.Items) != 2 {
		t.Errorf("Pods after the fault: %+v", all.Items)
	}
	if err := fault.(Reverter).Revert(ctx, f, scenario.Params{"node": "worker"}); err != nil {
		t.Fatal(err)
	}
	holds, _ := f.Clientset().CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: addressHoldLabel})
	if len(holds.Items) != 0 {
		t.Errorf("placeholders left after Revert: %+v", holds.Items)
	}
}

// Every fault of the library is declared in lab/scenario with the same
// name, so lint knows its parameters; unimplemented declarations are
// reported as such.
func TestLibraryMatchesDeclarations(t *testing.T) {
	for _, f := range Library() {
		if spec(f.Name()).Summary == "" {
			t.Errorf("fault %s is not declared in scenario.FaultSpecs", f.Name())
		}
	}
	r := Registry()
	if len(r.Names()) != len(scenario.FaultSpecs) {
		t.Errorf("registry has %d faults, declared %d", len(r.Names()), len(scenario.FaultSpecs))
	}
	r.Register(scenario.FaultSpec{FaultName: "declared-only", Summary: "a declaration without an implementation"})
	if _, err := Lookup(r, "declared-only"); !errors.Is(err, ErrNotImplemented) {
		t.Errorf("declared-only: %v", err)
	}
	if _, err := Lookup(r, "nope"); err == nil || !strings.Contains(err.Error(), `unknown fault "nope"`) {
		t.Errorf("nope: %v", err)
	}
	if err := Inject(context.Background(), newFake(nil), r, []scenario.Fault{{Name: "scale-to-zero", Params: scenario.Params{"deployment": 3}}}); err == nil || !strings.Contains(err.Error(), "invalid parameters") {
		t.Errorf("invalid params: %v", err)
	}
}

func TestParseConntrackMax(t *testing.T) {
	table := conntrackMaxScript(32)
	for _, tc := range []struct {
		name, out string
		want      ConntrackLimit
		wantErr   bool
	}{
		{"no stand-in", "262144\n57\n", ConntrackLimit{Max: 262144, Sysctl: 262144, Count: 57}, false},
		{"capped", "262144\n57\n" + table, ConntrackLimit{Max: 32, Sysctl: 262144, Count: 57, Capped: true}, false},
		{"raised in the rule", "262144\n57\n" + strings.ReplaceAll(table, "over 32", "over 65536"), ConntrackLimit{Max: 65536, Sysctl: 262144, Count: 57, Capped: true}, false},
		{"cap above the sysctl", "1024\n7\n" + strings.ReplaceAll(table, "over 32", "over 65536"), ConntrackLimit{Max: 1024, Sysctl: 1024, Count: 7}, false},
		{"two rules, the lower counts", "262144\n9\n" + table + "\t\tct state new ct count over 8 drop\n", ConntrackLimit{Max: 8, Sysctl: 262144, Count: 9, Capped: true}, false},
		{"garbage", "cat: no such file\n", ConntrackLimit{}, true},
	} {
		got, err := parseConntrackMax(tc.out)
		if (err != nil) != tc.wantErr || (!tc.wantErr && got != tc.want) {
			t.Errorf("%s: %+v, %v; want %+v (error %v)", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

// Setting conntrack-table-small up waits until the scenario's workloads
// have filled the capped table: its rule has dropped a connection.
func TestConntrackTableSettle(t *testing.T) {
	chain := func(dropped int) string {
		return fmt.Sprintf("table inet svclab-conntrack-max {\n\tchain capacity {\n\t\tct state new ct count over 32 counter packets %d bytes %d drop comment \"nf_conntrack: table full, dropping packet\"\n\t}\n}\n", dropped, 60*dropped)
	}
	fault, err := Lookup(Registry(), "conntrack-table-small")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		params    scenario.Params
		listings  []string
		wantCalls int
		wantErr   string
	}{
		{"fills", scenario.Params{"node": "worker", "max": 32}, []string{chain(0), chain(0), chain(3)}, 3, ""},
		{"full already", scenario.Params{"node": "worker", "max": 32}, []string{chain(1)}, 1, ""},
		{"not waited for", scenario.Params{"node": "worker", "waitFull": false}, nil, 0, ""},
		{"rule replaced without a counter", scenario.Params{"node": "worker"}, []string{"table inet svclab-conntrack-max {\n\tchain capacity {\n\t\tct count over 32 drop\n\t}\n}\n"}, 1, "has no counter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(func(node, cmd string) (string, error) {
				if node != "lab-worker" || cmd != "nft list chain inet svclab-conntrack-max capacity" {
					return "", fmt.Errorf("unexpected %s: %s", node, cmd)
				}
				out := tc.listings[0]
				if len(tc.listings) > 1 {
					tc.listings = tc.listings[1:]
				}
				return out, nil
			})
			err := Settle(context.Background(), f, Registry(), []scenario.Fault{{Name: fault.Name(), Params: tc.params}})
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Settle: %v, want error %q", err, tc.wantErr)
			}
			if len(f.Calls()) != tc.wantCalls {
				t.Errorf("%d calls, want %d:\n%s", len(f.Calls()), tc.wantCalls, strings.Join(f.Calls(), "\n"))
			}
		})
	}
	// A table that never fills is reported, naming the cap.
	f := newFake(func(node, cmd string) (string, error) { return chain(0), nil })
	ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
	defer cancel()
	err = fault.(Settler).Settle(ctx, f, scenario.Params{"node": "worker", "max": 32})
	if err == nil {
		t.Error("a table that never fills settled")
	}
}

// The hairpin fault's table drops a forwarded packet whose destination is
// its source, for any Pod: no veth or address is named in it.
func TestHairpinScript(t *testing.T) {
	for _, want := range []string{"update @self { ip saddr . ip saddr }", "ip saddr . ip daddr @self counter drop", "flags dynamic,timeout", "hook forward"} {
		if !strings.Contains(hairpinScript, want) {
			t.Errorf("the hairpin table lacks %q", want)
		}
	}
	if strings.Contains(hairpinScript, "iifname") || strings.Contains(hairpinScript, "10.244.") {
		t.Error("the hairpin table names interfaces or addresses")
	}
}

func TestTopologyModeSettle(t *testing.T) {
	zoneHint := &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}}
	for _, tc := range []struct {
		name   string
		hints  *discoveryv1.EndpointHints
		unhint bool // the controller takes the hints off while Settle waits
	}{
		{name: "no hints: settled at once"},
		{name: "hints taken off later", hints: zoneHint, unhint: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slice := webSlice()
			slice.Endpoints[0].Hints = tc.hints
			f := newFake(nil, webService(nil), slice)
			fault, err := Lookup(Registry(), "topology-mode-annotation")
			if err != nil {
				t.Fatal(err)
			}
			if tc.unhint {
				go func() {
					time.Sleep(700 * time.Millisecond)
					s := webSlice()
					if _, err := f.Clientset().DiscoveryV1().EndpointSlices("shop").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
						t.Error(err)
					}
				}()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := fault.(Settler).Settle(ctx, f, scenario.Params{"service": "web", "namespace": "shop"}); err != nil {
				t.Fatal(err)
			}
			if n, err := hintedEndpoints(ctx, f.Clientset(), "shop", "web"); err != nil || n != 0 {
				t.Errorf("hinted endpoints = %d, %v", n, err)
			}
		})
	}
}

func TestHintedEndpoints(t *testing.T) {
	node := "lab-worker"
	slice := func(name, svc string, hints ...*discoveryv1.EndpointHints) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: map[string]string{discoveryv1.LabelServiceName: svc}}}
		for _, h := range hints {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.1.5"}, NodeName: &node, Hints: h})
		}
		return s
	}
	zone := &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}}
	nodeHint := &discoveryv1.EndpointHints{ForNodes: []discoveryv1.ForNode{{Name: node}}}
	f := newFake(nil, slice("web-1", "web", zone, nil, nodeHint), slice("web-2", "web", zone, &discoveryv1.EndpointHints{}), slice("api-1", "api", zone))
	if n, err := hintedEndpoints(context.Background(), f.Clientset(), "shop", "web"); err != nil || n != 3 {
		t.Errorf("hinted endpoints of web = %d, %v; want 3 (empty hints do not count, other Services' slices neither)", n, err)
	}
}

func TestLastNamed(t *testing.T) {
	names := map[string]bool{"render-a": true, "render-b": true}
	for _, tc := range []struct {
		name, log, want string
	}{
		{name: "the last answer counts", log: "render-a\nrender-b\nrender-a\n", want: "render-a"},
		{name: "errors and blank lines are skipped", log: "render-b\nwget: download timed out\n\n", want: "render-b"},
		{name: "a Pod that is gone does not count", log: "render-b\nrender-old\n", want: "render-b"},
		{name: "no answer yet", log: "wget: bad address 'render'\n", want: ""},
		{name: "padded lines", log: "  render-a  \r\n", want: "render-a"},
	} {
		if got := lastNamed(tc.log, names); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestLabelClientBackendErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		svc     func(*corev1.Service)
		params  scenario.Params
		wantErr string
	}{
		{name: "a label without a value", params: scenario.Params{"service": "web", "namespace": "shop", "client": "c", "label": "load"},
			wantErr: `label: "load" is not key=value`},
		{name: "a Service without selector", svc: func(s *corev1.Service) { s.Spec.Selector = nil },
			params: scenario.Params{"service": "web", "namespace": "shop", "client": "c"}, wantErr: "Service shop/web has no selector"},
		{name: "a missing Service", params: scenario.Params{"service": "api", "namespace": "shop", "client": "c"},
			wantErr: "there is no Service shop/api"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(nil, webService(tc.svc))
			fault, err := Lookup(Registry(), "label-client-backend")
			if err != nil {
				t.Fatal(err)
			}
			if err := fault.Validate(tc.params); err != nil {
				t.Fatalf("params do not validate: %v", err)
			}
			if err := fault.Inject(context.Background(), f, tc.params); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// traffic-distribution with a node: the node loses its zone label before
// the Service changes, and the change is made again until the node's
// endpoints have lost their zone (the EndpointSlice controller may have
// written them from a cache that still had the label).
func TestTrafficDistributionNodeZone(t *testing.T) {
	zone := "zone-b"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "lab-worker", Labels: map[string]string{"topology.kubernetes.io/zone": zone}}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "quote", Namespace: "quotes"}}
	nodeName := "lab-worker"
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "quote-1", Namespace: "quotes", Labels: map[string]string{discoveryv1.LabelServiceName: "quote"}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.5"}, NodeName: &nodeName, Zone: &zone,
			Hints: &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}}}}}
	f := newFake(nil, node, svc, slice)
	// The controller writes the endpoint from its stale cache on the
	// first change, and from the fresh one on the next.
	updates := 0
	f.Clientset().PrependReactor("update", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		updates++
		if updates == 3 {
			s := slice.DeepCopy()
			s.Endpoints[0].Zone, s.Endpoints[0].Hints = nil, nil
			// The tracker, not the clientset, whose lock the reactor holds.
			if err := f.Clientset().Tracker().Update(discoveryv1.SchemeGroupVersion.WithResource("endpointslices"), s, "quotes"); err != nil {
				t.Error(err)
			}
		}
		return false, nil, nil
	})
	fault, err := Lookup(Registry(), "traffic-distribution")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := fault.Inject(ctx, f, scenario.Params{"service": "quote", "namespace": "quotes", "mode": "PreferSameZone", "node": "worker"}); err != nil {
		t.Fatal(err)
	}
	got, _ := f.Clientset().CoreV1().Services("quotes").Get(ctx, "quote", metav1.GetOptions{})
	if got.Spec.TrafficDistribution == nil || *got.Spec.TrafficDistribution != "PreferSameZone" || updates != 3 {
		t.Errorf("trafficDistribution %v after %d updates", got.Spec.TrafficDistribution, updates)
	}
	n, _ := f.Clientset().CoreV1().Nodes().Get(ctx, "lab-worker", metav1.GetOptions{})
	if _, ok := n.Labels["topology.kubernetes.io/zone"]; ok {
		t.Errorf("node labels %v", n.Labels)
	}
}
