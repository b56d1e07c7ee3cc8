//go:build linux

package nodeagent

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fakeEnvSource serves ConfigMaps, Secrets and Services from maps.
type fakeEnvSource struct {
	cms     map[string]map[string]string
	secrets map[string]map[string][]byte
	svcs    map[string][]corev1.Service // by namespace
}

func (f fakeEnvSource) configMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	d, ok := f.cms[name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: d}, nil
}

func (f fakeEnvSource) secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	d, ok := f.secrets[name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: d}, nil
}

func (f fakeEnvSource) services(_ context.Context, ns string) ([]corev1.Service, error) {
	return f.svcs[ns], nil
}

func TestExpandVars(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "two"}
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "1"},
		{"x-$(A)-$(B)-y", "x-1-two-y"},
		{"$(UNDEFINED)", "$(UNDEFINED)"},
		{"$$(A)", "$(A)"},
		{"$$", "$"},
		{"$A", "$A"},
		{"$(A", "$(A"},
		{"end$", "end$"},
		{"$$$(A)", "$1"},
	} {
		if got := expandVars(tc.in, lookup); got != tc.want {
			t.Errorf("expandVars(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestContainerEnv(t *testing.T) {
	src := fakeEnvSource{
		cms:     map[string]map[string]string{"settings": {"mode": "fast", "dashed-key": "ok", "bad=key": "x"}},
		secrets: map[string]map[string][]byte{"creds": {"password": []byte("s3cret")}},
		svcs: map[string][]corev1.Service{
			"default": {
				{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1",
					Ports: []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}}}},
			},
			"shop": {
				{ObjectMeta: metav1.ObjectMeta{Name: "web-api", Namespace: "shop"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.3.4",
					Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}},
				{ObjectMeta: metav1.ObjectMeta{Name: "headless", Namespace: "shop"}, Spec: corev1.ServiceSpec{ClusterIP: "None"}},
			},
		},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop", Labels: map[string]string{"tier": "front"}},
		Spec:       corev1.PodSpec{NodeName: "lab-worker"},
		Status:     corev1.PodStatus{PodIP: "10.244.1.7", HostIP: "172.29.1.3"},
	}
	ref := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	c := &corev1.Container{
		EnvFrom: []corev1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
		Env: []corev1.EnvVar{
			{Name: "LATER_REF", Value: "$(NODE)"}, // NODE is defined after: not expanded
			{Name: "NODE", ValueFrom: ref("spec.nodeName")},
			{Name: "IP", ValueFrom: ref("status.podIP")},
			{Name: "TIER", ValueFrom: ref("metadata.labels['tier']")},
			{Name: "MSG", Value: "$(NODE)/$(IP)/$(CFG_mode)/$(WEB_API_SERVICE_HOST)"},
			{Name: "ESC", Value: "$$(NODE)"},
			{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "password"}}},
			{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
			{Name: "CFG_mode", Value: "overridden"},
		},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
	}
	env, warns, err := containerEnv(context.Background(), src, pod, c)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"CFG_dashed-key": "ok", // names are relaxed since Kubernetes 1.34
		"LATER_REF":      "$(NODE)", "NODE": "lab-worker", "IP": "10.244.1.7", "TIER": "front",
		"MSG": "lab-worker/10.244.1.7/fast/10.96.3.4", "ESC": "$(NODE)", "PW": "s3cret", "MEM": "64", "CFG_mode": "overridden",
		"WEB_API_SERVICE_HOST": "10.96.3.4", "WEB_API_SERVICE_PORT": "80", "WEB_API_PORT": "tcp://10.96.3.4:80",
		"WEB_API_PORT_80_TCP": "tcp://10.96.3.4:80", "WEB_API_PORT_80_TCP_PROTO": "tcp", "WEB_API_PORT_80_TCP_PORT": "80",
		"WEB_API_PORT_80_TCP_ADDR": "10.96.3.4",
		"KUBERNETES_SERVICE_HOST":  "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443", "KUBERNETES_SERVICE_PORT_HTTPS": "443",
		"KUBERNETES_PORT": "tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
		"KUBERNETES_PORT_443_TCP_PORT": "443", "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1",
	}
	if got, w := envList(env), envList(want); !slices.Equal(got, w) {
		t.Errorf("env:\n%v\nwant\n%v", got, w)
	}
	if len(warns) != 1 || warns[0].reason != "InvalidEnvironmentVariableNames" || !strings.Contains(warns[0].message, "[CFG_bad=key]") {
		t.Errorf("warnings %+v, want one for CFG_bad=key", warns)
	}

	// enableServiceLinks: false keeps only the kubernetes Service.
	f := false
	pod.Spec.EnableServiceLinks = &f
	env, _, err = containerEnv(context.Background(), src, pod, &corev1.Container{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := env["WEB_API_SERVICE_HOST"]; ok || env["KUBERNETES_SERVICE_HOST"] != "10.96.0.1" {
		t.Errorf("enableServiceLinks false: %v", env)
	}
}

func TestContainerEnvMissingReferences(t *testing.T) {
	src := fakeEnvSource{cms: map[string]map[string]string{"settings": {"mode": "fast"}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}
	yes := true
	cmKey := func(name, key string, opt *bool) corev1.EnvVar {
		return corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key, Optional: opt}}}
	}
	for _, tc := range []struct {
		name    string
		c       corev1.Container
		wantErr string
	}{
		{"missing configmap", corev1.Container{Env: []corev1.EnvVar{cmKey("nope", "k", nil)}}, `configmap "nope" not found`},
		{"missing key", corev1.Container{Env: []corev1.EnvVar{cmKey("settings", "k", nil)}}, "couldn't find key k in ConfigMap default/settings"},
		{"optional configmap", corev1.Container{Env: []corev1.EnvVar{cmKey("nope", "k", &yes)}}, ""},
		{"optional key", corev1.Container{Env: []corev1.EnvVar{cmKey("settings", "k", &yes)}}, ""},
		{"missing secret", corev1.Container{EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}}}, `secret "s" not found`},
		{"unsupported field", corev1.Container{Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nope"}}}}}, "field spec.nope is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, _, err := containerEnv(context.Background(), src, pod, &tc.c)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := env["X"]; ok {
					t.Errorf("optional reference set X=%q", env["X"])
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
