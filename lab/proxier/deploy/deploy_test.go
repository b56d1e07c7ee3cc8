package deploy

import (
	"bytes"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svclab/svclab/lab/proxier/config"
)

func TestManifestsDecodeAndAreConsistent(t *testing.T) {
	tests := []struct {
		name     string
		opts     Options
		wantMode string
	}{
		{name: "default mode", opts: Options{Image: "svclab/proxier:dev", APIServer: "https://172.29.0.2:6443", ClusterCIDR: "10.244.0.0/16"}, wantMode: "nftables"},
		{name: "iptables", opts: Options{Image: "svclab/proxier:dev", APIServer: "https://172.29.1.2:6443", ClusterCIDR: "10.244.0.0/16", Mode: "iptables"}, wantMode: "iptables"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, err := YAML(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			decoder := scheme.Codecs.UniversalDeserializer()
			var (
				sa  *v1.ServiceAccount
				cm  *v1.ConfigMap
				ds  *appsv1.DaemonSet
				crb *rbacv1.ClusterRoleBinding
				rb  *rbacv1.RoleBinding
				ro  *rbacv1.Role
			)
			for i, doc := range bytes.Split(data, []byte("\n---\n")) {
				obj, _, err := decoder.Decode(doc, nil, nil)
				if err != nil {
					t.Fatalf("document %d: %v\n%s", i+1, err, doc)
				}
				switch o := obj.(type) {
				case *v1.ServiceAccount:
					sa = o
				case *v1.ConfigMap:
					cm = o
				case *appsv1.DaemonSet:
					ds = o
				case *rbacv1.ClusterRoleBinding:
					crb = o
				case *rbacv1.RoleBinding:
					rb = o
				case *rbacv1.Role:
					ro = o
				default:
					t.Fatalf("unexpected object %T", obj)
				}
			}
			if sa == nil || cm == nil || ds == nil || crb == nil || rb == nil || ro == nil {
				t.Fatal("an object is missing")
			}

			// The DaemonSet as the CKA material expects it.
			if ds.Name != "kube-proxy" || ds.Namespace != "kube-system" || ds.Labels["k8s-app"] != "kube-proxy" {
				t.Errorf("DaemonSet %s/%s labels %v", ds.Namespace, ds.Name, ds.Labels)
			}
			sel, err := metav1LabelSelector(ds)
			if err != nil || !sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
				t.Errorf("selector %v does not match template labels %v (%v)", ds.Spec.Selector, ds.Spec.Template.Labels, err)
			}
			pod := ds.Spec.Template.Spec
			if !pod.HostNetwork || pod.ServiceAccountName != sa.Name || sa.Namespace != ds.Namespace {
				t.Errorf("hostNetwork %v serviceAccount %q", pod.HostNetwork, pod.ServiceAccountName)
			}
			c := pod.Containers[0]
			args := strings.Join(c.Command, " ")
			if !strings.Contains(args, "--config=/var/lib/kube-proxy/config.conf") || !strings.Contains(args, "--hostname-override=$(NODE_NAME)") {
				t.Errorf("command %q", args)
			}
			if c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
				t.Errorf("NODE_NAME env %+v", c.Env)
			}
			mounted := false
			for _, m := range c.VolumeMounts {
				for _, vol := range pod.Volumes {
					if vol.Name == m.Name && vol.ConfigMap != nil && vol.ConfigMap.Name == cm.Name && m.MountPath == ConfigDir {
						mounted = true
					}
				}
			}
			if !mounted {
				t.Error("the ConfigMap is not mounted at " + ConfigDir)
			}

			// RBAC.
			if crb.RoleRef.Name != "system:node-proxier" || crb.Subjects[0].Name != sa.Name || crb.Subjects[0].Namespace != sa.Namespace {
				t.Errorf("ClusterRoleBinding %+v", crb)
			}
			if rb.RoleRef.Name != ro.Name || ro.Rules[0].ResourceNames[0] != cm.Name {
				t.Errorf("Role/RoleBinding %+v %+v", ro, rb)
			}

			// config.conf loads and resolves; the kubeconfig points at the server.
			kpc, err := config.Load([]byte(cm.Data["config.conf"]))
			if err != nil {
				t.Fatalf("config.conf: %v", err)
			}
			if kpc.ClientConnection.Kubeconfig != ConfigDir+"/"+KubeconfigKey {
				t.Errorf("kubeconfig path %q", kpc.ClientConnection.Kubeconfig)
			}
			config.SetDefaults(kpc)
			r, err := config.Resolve(kpc)
			if err != nil {
				t.Fatal(err)
			}
			if r.Mode != tc.wantMode || r.ClusterCIDRs[0] != tc.opts.ClusterCIDR || r.MetricsBindAddress != "127.0.0.1:10249" || r.HealthzBindAddress != "0.0.0.0:10256" {
				t.Errorf("resolved %+v", r)
			}
			kc, err := clientcmd.Load([]byte(cm.Data["kubeconfig.conf"]))
			if err != nil {
				t.Fatalf("kubeconfig.conf: %v", err)
			}
			if kc.Clusters["default"].Server != tc.opts.APIServer {
				t.Errorf("server %q", kc.Clusters["default"].Server)
			}
		})
	}
}

func metav1LabelSelector(ds *appsv1.DaemonSet) (labels.Selector, error) {
	return labels.ValidatedSelectorFromSet(ds.Spec.Selector.MatchLabels)
}

func TestObjectsNeedImageAndServer(t *testing.T) {
	for _, opts := range []Options{{APIServer: "https://x"}, {Image: "i"}} {
		if _, err := Objects(opts); err == nil {
			t.Errorf("%+v: want an error", opts)
		}
	}
	objs, err := Objects(Options{Image: "i", APIServer: "https://x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 6 {
		t.Errorf("%d objects, want 6", len(objs))
	}
}

// svclab's clusters name their mode in config.conf: an empty one would be
// iptables to the proxier, as to kube-proxy.
func TestConfigNamesTheMode(t *testing.T) {
	for _, tc := range []struct{ mode, want string }{{"", "nftables"}, {"nftables", "nftables"}, {"iptables", "iptables"}} {
		if got := string(Config(Options{Mode: tc.mode}).Mode); got != tc.want {
			t.Errorf("mode %q: config.conf says %q, want %q", tc.mode, got, tc.want)
		}
	}
}
