package deploy

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	componentbaseconfig "k8s.io/component-base/config/v1alpha1"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/svclab/svclab/lab/proxier/config"
)

// Names kubeadm uses.
const (
	Name                   = "kube-proxy"
	Namespace              = "kube-system"
	ConfigMapKey           = "config.conf"
	KubeconfigKey          = "kubeconfig.conf"
	ConfigDir              = "/var/lib/kube-proxy"
	NodeProxierClusterRole = "system:node-proxier"
	NodeProxierBinding     = "kubeadm:node-proxier"
	BootstrapTokenGroup    = "system:bootstrappers:kubeadm:default-node-token"
	// Selector selects the DaemonSet's Pods (label k8s-app=kube-proxy).
	Selector = "k8s-app=" + Name
)

// Options select what differs between clusters.
type Options struct {
	// Image is the container image of the DaemonSet (required).
	Image string
	// Command starts the proxier; default ["svclab", "proxier", "run"].
	Command []string
	// APIServer is the API server URL written into kubeconfig.conf.
	APIServer string
	// ClusterCIDR is the pod CIDR (clusterCIDR in config.conf).
	ClusterCIDR string
	// Mode is the proxy mode config.conf names (default SvclabMode):
	// svclab's clusters always name it, since an empty mode means
	// iptables to kube-proxy (and may mean another mode after an
	// upgrade).
	Mode string
	// ControlKey, when set, is the public key (control.EncodePublic) that
	// guards the proxiers' teaching hooks: it goes into the ConfigMap as
	// control.pub and the proxiers get --control-key.
	ControlKey string
}

// ControlKeyKey is the ConfigMap key of the control key.
const ControlKeyKey = "control.pub"

// Config returns the KubeProxyConfiguration kubeadm would put into
// config.conf: every field present, defaults left to the proxier.
func Config(opts Options) *kubeproxyconfig.KubeProxyConfiguration {
	return &kubeproxyconfig.KubeProxyConfiguration{
		TypeMeta:         metav1.TypeMeta{APIVersion: config.APIVersion, Kind: config.Kind},
		BindAddress:      "0.0.0.0",
		ClientConnection: clientConnection(),
		ClusterCIDR:      opts.ClusterCIDR,
		Mode:             kubeproxyconfig.ProxyMode(cmp.Or(opts.Mode, SvclabMode)),
	}
}

// SvclabMode is the mode of svclab's clusters when none is asked for:
// nftables, which the material teaches first.
const SvclabMode = config.ModeNFTables

func clientConnection() componentbaseconfig.ClientConnectionConfiguration {
	return componentbaseconfig.ClientConnectionConfiguration{Kubeconfig: ConfigDir + "/" + KubeconfigKey}
}

// kubeconfig is the in-cluster kubeconfig kubeadm writes: the service
// account token and CA of the pod.
func kubeconfig(server string) string {
	return `apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
    server: ` + server + `
  name: default
contexts:
- context:
    cluster: default
    namespace: default
    user: default
  name: default
current-context: default
users:
- name: default
  user:
    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
`
}

// Objects returns the objects in the order they should be applied.
func Objects(opts Options) ([]runtime.Object, error) {
	if opts.Image == "" {
		return nil, errors.New("deploy: an image is required")
	}
	if opts.APIServer == "" {
		return nil, errors.New("deploy: an API server URL is required")
	}
	if len(opts.Command) == 0 {
		opts.Command = []string{"svclab", "proxier", "run"}
	}
	confText, err := config.Marshal(Config(opts))
	if err != nil {
		return nil, fmt.Errorf("deploy: marshal config.conf: %w", err)
	}
	labels := map[string]string{"k8s-app": Name}
	meta := metav1.ObjectMeta{Name: Name, Namespace: Namespace}

	sa := &v1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta}
	crb := &rbacv1.ClusterRoleBinding{
		TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
		ObjectMeta: metav1.ObjectMeta{Name: NodeProxierBinding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: NodeProxierClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: Name, Namespace: Namespace}},
	}
	role := &rbacv1.Role{
		TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "Role"),
		ObjectMeta: meta,
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{Name}, Verbs: []string{"get"},
		}},
	}
	rb := &rbacv1.RoleBinding{
		TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"),
		ObjectMeta: meta,
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: BootstrapTokenGroup}},
	}
	cm := &v1.ConfigMap{
		TypeMeta:   typeMeta("v1", "ConfigMap"),
		ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: Namespace, Labels: map[string]string{"app": Name}},
		Data: map[string]string{
			ConfigMapKey:  string(confText),
			KubeconfigKey: kubeconfig(opts.APIServer),
		},
	}
	if opts.ControlKey != "" {
		cm.Data[ControlKeyKey] = opts.ControlKey
	}
	privileged := true
	hostPathFileOrCreate := v1.HostPathFileOrCreate
	maxUnavailable := intstr.FromInt32(1)
	command := append(append([]string{}, opts.Command...),
		"--config="+ConfigDir+"/"+ConfigMapKey,
		"--hostname-override=$(NODE_NAME)")
	if opts.ControlKey != "" {
		command = append(command, "--control-key="+ConfigDir+"/"+ControlKeyKey)
	}
	ds := &appsv1.DaemonSet{
		TypeMeta:   typeMeta("apps/v1", "DaemonSet"),
		ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: Namespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &maxUnavailable},
			},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					Containers: []v1.Container{{
						Name:    Name,
						Image:   opts.Image,
						Command: command,
						Env: []v1.EnvVar{{
							Name:      "NODE_NAME",
							ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}},
						}},
						SecurityContext: &v1.SecurityContext{Privileged: &privileged},
						VolumeMounts: []v1.VolumeMount{
							{Name: Name, MountPath: ConfigDir},
							{Name: "xtables-lock", MountPath: "/run/xtables.lock"},
							{Name: "lib-modules", MountPath: "/lib/modules", ReadOnly: true},
						},
					}},
					HostNetwork:        true,
					NodeSelector:       map[string]string{"kubernetes.io/os": "linux"},
					PriorityClassName:  "system-node-critical",
					ServiceAccountName: Name,
					Tolerations:        []v1.Toleration{{Operator: v1.TolerationOpExists}},
					Volumes: []v1.Volume{
						{Name: Name, VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: Name}}}},
						{Name: "xtables-lock", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/run/xtables.lock", Type: &hostPathFileOrCreate}}},
						{Name: "lib-modules", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/lib/modules"}}},
					},
				},
			},
		},
	}
	return []runtime.Object{sa, crb, role, rb, cm, ds}, nil
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// YAML returns the objects as a multi-document YAML stream.
func YAML(opts Options) ([]byte, error) {
	objs, err := Objects(opts)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	for i, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("deploy: marshal: %w", err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(data)
	}
	return b.Bytes(), nil
}
