//go:build linux

package nodeagent

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// testUID is a UID as the API server assigns them, the nth of a test.
func testUID(n int) types.UID {
	return types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", n))
}

// unusualPod is a Pod the API server accepts that uses every field the
// agent acts on, with names and values at the edges of what is legal: the
// agent must run it.
func unusualPod() *corev1.Pod {
	i64 := func(v int64) *int64 { return &v }
	i32 := func(v int32) *int32 { return &v }
	dir := corev1.HostPathDirectoryOrCreate
	size := resource.MustParse("1Mi")
	hostUsers := false
	long := strings.Repeat("a", 63)
	two := "2"
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			// A v1 UUID: any canonical UUID passes, not only the v4 the
			// API server makes today.
			UID:         "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
			Namespace:   "0" + strings.Repeat("x", 62),
			Name:        strings.Repeat("a.", 126) + "b",
			Labels:      map[string]string{"app.kubernetes.io/name": "web", "x": ""},
			Annotations: map[string]string{"note": strings.Repeat("é", 1000)},
		},
		Spec: corev1.PodSpec{
			HostUsers:          &hostUsers,
			ServiceAccountName: "default",
			Hostname:           "0",
			Subdomain:          long,
			RestartPolicy:      corev1.RestartPolicyOnFailure,
			DNSPolicy:          corev1.DNSNone,
			DNSConfig: &corev1.PodDNSConfig{
				Nameservers: []string{"1.1.1.1", "fe80::1", "010.0.0.1"},
				Searches:    []string{".", "example.com.", "_srv.example.com"},
				Options:     []corev1.PodDNSConfigOption{{Name: "ndots", Value: &two}, {Name: "edns0"}},
			},
			HostAliases: []corev1.HostAlias{{IP: "::1", Hostnames: []string{"a", "b.c.d"}}, {IP: "10.0.0.1"}},
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: i64(0), RunAsGroup: i64(2147483647), FSGroup: i64(1),
				SupplementalGroups: []int64{0, 65534}},
			Volumes: []corev1.Volume{
				{Name: "0", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size}}},
				{Name: long, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "relative/./dir", Type: &dir}}},
				{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "Not_A_DNS_Name"}, DefaultMode: i32(0o777),
					Items: []corev1.KeyToPath{{Key: "key.name", Path: "./sub/a..b", Mode: i32(0)}, {Key: "K", Path: ".hidden"}}}}},
				{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s",
					Items: []corev1.KeyToPath{{Key: "KEY_NAME", Path: "a//b"}}}}},
				{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
					Items: []corev1.DownwardAPIVolumeFile{
						{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
						{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app.kubernetes.io/name']"}},
						{Path: "cpu", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.cpu"}},
					}}}},
				{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: i64(600)}},
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "long", ExpirationSeconds: i64(1 << 32)}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"},
						Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
						{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
				}}}},
			},
			InitContainers: []corev1.Container{{Name: "0", Image: "busybox"}},
			Containers: []corev1.Container{{
				Name:    long,
				Image:   "registry.k8s.io/e2e-test-images/agnhost:2.53@sha256:" + strings.Repeat("0", 64),
				Command: []string{"sh", "-c", "$(A) $$(B)"},
				Ports: []corev1.ContainerPort{{Name: "http-alt", ContainerPort: 65535, HostPort: 1, Protocol: corev1.ProtocolSCTP, HostIP: "not checked upstream"},
					{ContainerPort: 1}},
				Env: []corev1.EnvVar{
					{Name: "my.env-name", Value: strings.Repeat("v", 100<<10)},
					{Name: "1 ~!@#$%^&*()"},
					{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
					{Name: "KEY", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "a.b"}, Key: ".key"}}},
				},
				EnvFrom: []corev1.EnvFromSource{{Prefix: "P_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}},
					{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "0", MountPath: "/a/../b"}, // upstream leaves mount paths to the runtime
					{Name: "0", MountPath: "relative", SubPath: "..foo/./x"},
					{Name: long, MountPath: "/host", SubPathExpr: "$(NODE)/logs"},
					{Name: "cm", MountPath: "/etc/cm", ReadOnly: true},
					{Name: "token", MountPath: "/var/run/secrets/tokens"},
				},
				SecurityContext: &corev1.SecurityContext{RunAsUser: i64(2147483647), RunAsGroup: i64(0)},
			}},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debugger", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: "0", MountPath: "/x"}}}}},
		},
	}
}

func TestValidatePodAcceptsWhatTheAPIServerAccepts(t *testing.T) {
	if errs := validatePod(unusualPod()); len(errs) > 0 {
		t.Fatalf("a legal Pod was refused: %v", errs.ToAggregate())
	}
	// A Pod as the API server stores it when its user gave only a name
	// and an image: defaults applied or not, the agent takes it.
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: testUID(1)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}}
	if errs := validatePod(bare); len(errs) > 0 {
		t.Fatalf("a bare Pod was refused: %v", errs.ToAggregate())
	}
}

func TestValidatePodRefusesHostileFields(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	i32 := func(v int32) *int32 { return &v }
	neg := resource.MustParse("-1")
	bad := corev1.HostPathType("Weird")
	for _, tc := range []struct {
		name  string
		field string // the field the error must name
		edit  func(p *corev1.Pod)
	}{
		// metadata.uid: the Pod's directory is named after it.
		{"empty uid", "metadata.uid", func(p *corev1.Pod) { p.UID = "" }},
		{"uid with ..", "metadata.uid", func(p *corev1.Pod) { p.UID = "../../../../../../../etc/cron.d/x" }},
		{"uid of 36 characters with slashes", "metadata.uid", func(p *corev1.Pod) { p.UID = "../../../../../../../../../../etc/xx" }},
		{"short uid", "metadata.uid", func(p *corev1.Pod) { p.UID = "abc" }},
		{"upper-case uid", "metadata.uid", func(p *corev1.Pod) { p.UID = "6BA7B810-9DAD-11D1-80B4-00C04FD430C8" }},
		{"braced uid", "metadata.uid", func(p *corev1.Pod) { p.UID = "{6ba7b810-9dad-11d1-80b4-00c04fd430c8}" }},
		{"uid without dashes", "metadata.uid", func(p *corev1.Pod) { p.UID = "6ba7b8109dad11d180b400c04fd430c8" }},
		{"uid with NUL", "metadata.uid", func(p *corev1.Pod) { p.UID = "6ba7b810-9dad-11d1-80b4-00c04fd430c\x00" }},
		{"uid with a newline", "metadata.uid", func(p *corev1.Pod) { p.UID = "6ba7b810-9dad-11d1-80b4-00c04fd430c\n" }},
		{"uid in full-width digits", "metadata.uid", func(p *corev1.Pod) { p.UID = "６ba7b810-9dad-11d1-80b4-00c04fd43" }},
		{"uid too long", "metadata.uid", func(p *corev1.Pod) { p.UID = "6ba7b810-9dad-11d1-80b4-00c04fd430c8a" }},
		// metadata.
		{"namespace ..", "metadata.namespace", func(p *corev1.Pod) { p.Namespace = ".." }},
		{"namespace with a slash", "metadata.namespace", func(p *corev1.Pod) { p.Namespace = "a/b" }},
		{"namespace too long", "metadata.namespace", func(p *corev1.Pod) { p.Namespace = strings.Repeat("a", 64) }},
		{"namespace empty", "metadata.namespace", func(p *corev1.Pod) { p.Namespace = "" }},
		{"name ../x", "metadata.name", func(p *corev1.Pod) { p.Name = "../x" }},
		{"name upper-case", "metadata.name", func(p *corev1.Pod) { p.Name = "Web" }},
		{"name too long", "metadata.name", func(p *corev1.Pod) { p.Name = strings.Repeat("a", 254) }},
		{"name with NUL", "metadata.name", func(p *corev1.Pod) { p.Name = "a\x00b" }},
		{"name unicode", "metadata.name", func(p *corev1.Pod) { p.Name = "wéb" }},
		{"label key", "metadata.labels", func(p *corev1.Pod) { p.Labels = map[string]string{"a/b/c": "x"} }},
		{"annotations too large", "metadata.annotations", func(p *corev1.Pod) { p.Annotations = map[string]string{"a": strings.Repeat("x", 300<<10)} }},
		// Containers.
		{"no containers", "spec.containers", func(p *corev1.Pod) { p.Spec.Containers = nil }},
		{"container ../x", "spec.containers[0].name", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "../x" }},
		{"container name with a slash", "spec.containers[0].name", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "a/b" }},
		{"container name empty", "spec.containers[0].name", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "" }},
		{"container name with a dot", "spec.containers[0].name", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "a.b" }},
		{"container name too long", "spec.containers[0].name", func(p *corev1.Pod) { p.Spec.Containers[0].Name = strings.Repeat("a", 64) }},
		{"init container named as a container", "spec.initContainers[0].name", func(p *corev1.Pod) { p.Spec.InitContainers[0].Name = p.Spec.Containers[0].Name }},
		{"ephemeral container named as an init one", "spec.ephemeralContainers[0].name", func(p *corev1.Pod) { p.Spec.EphemeralContainers[0].Name = "0" }},
		{"two containers of one name", "spec.containers[1].name", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: p.Spec.Containers[0].Name, Image: "x"})
		}},
		{"too many containers", "spec.containers", func(p *corev1.Pod) {
			for i := 0; i < maxPodContainers; i++ {
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: "x"})
			}
		}},
		{"no image", "spec.containers[0].image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "" }},
		{"image with spaces", "spec.containers[0].image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = " nginx" }},
		// Ports go into the node's nft rules.
		{"port 0", "spec.containers[0].ports[1].containerPort", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[1].ContainerPort = 0 }},
		{"port 70000", "spec.containers[0].ports[1].containerPort", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[1].ContainerPort = 70000 }},
		{"host port -1", "spec.containers[0].ports[0].hostPort", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].HostPort = -1 }},
		{"protocol injecting nft", "spec.containers[0].ports[0].protocol", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports[0].Protocol = "tcp . 1 : 10.0.0.1 . 1 }; flush ruleset; add element ip t m {"
		}},
		{"port name", "spec.containers[0].ports[0].name", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].Name = "HTTP" }},
		{"duplicate port name", "spec.containers[0].ports[1].name", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[1].Name = "http-alt" }},
		// Environment.
		{"env name with =", "spec.containers[0].env[0].name", func(p *corev1.Pod) { p.Spec.Containers[0].Env[0].Name = "A=B" }},
		{"env name empty", "spec.containers[0].env[0].name", func(p *corev1.Pod) { p.Spec.Containers[0].Env[0].Name = "" }},
		{"env name with a newline", "spec.containers[0].env[0].name", func(p *corev1.Pod) { p.Spec.Containers[0].Env[0].Name = "A\nB" }},
		{"env name not ASCII", "spec.containers[0].env[0].name", func(p *corev1.Pod) { p.Spec.Containers[0].Env[0].Name = "é" }},
		{"env value and valueFrom", "spec.containers[0].env[2].valueFrom", func(p *corev1.Pod) { p.Spec.Containers[0].Env[2].Value = "x" }},
		{"env from two sources", "spec.containers[0].env[2].valueFrom", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env[2].ValueFrom.SecretKeyRef = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}
		}},
		{"env from no source", "spec.containers[0].env[2].valueFrom", func(p *corev1.Pod) { p.Spec.Containers[0].Env[2].ValueFrom = &corev1.EnvVarSource{} }},
		{"env field not allowed", "spec.containers[0].env[2].valueFrom.fieldRef.fieldPath", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env[2].ValueFrom.FieldRef.FieldPath = "spec.containers"
		}},
		{"env ConfigMap name ../x", "spec.containers[0].env[3].valueFrom.configMapKeyRef.name", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env[3].ValueFrom.ConfigMapKeyRef.Name = "../x"
		}},
		{"env ConfigMap key with a slash", "spec.containers[0].env[3].valueFrom.configMapKeyRef.key", func(p *corev1.Pod) {
			p.Spec.Containers[0].Env[3].ValueFrom.ConfigMapKeyRef.Key = "a/b"
		}},
		{"envFrom prefix", "spec.containers[0].envFrom[0].prefix", func(p *corev1.Pod) { p.Spec.Containers[0].EnvFrom[0].Prefix = "A=" }},
		{"envFrom name with a slash", "spec.containers[0].envFrom[0].configMapRef.name", func(p *corev1.Pod) {
			p.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name = "a/b"
		}},
		{"envFrom of nothing", "spec.containers[0].envFrom[1]", func(p *corev1.Pod) { p.Spec.Containers[0].EnvFrom[1].SecretRef = nil }},
		{"too many env", "spec.containers[0].env", func(p *corev1.Pod) {
			for i := 0; i < maxContainerEnv; i++ {
				p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "E", Value: "$(E)"})
			}
		}},
		{"a Pod larger than the API server takes", "pod", func(p *corev1.Pod) { p.Spec.Containers[0].Env[0].Value = strings.Repeat("v", 10<<20) }},
		// Volume mounts.
		{"mount of no volume", "spec.containers[0].volumeMounts[0].name", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].Name = "nope" }},
		{"mount without a path", "spec.containers[0].volumeMounts[0].mountPath", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].MountPath = "" }},
		{"two mounts at one path", "spec.containers[0].volumeMounts[1].mountPath", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[1].MountPath = "/a/../b" }},
		{"subPath ..", "spec.containers[0].volumeMounts[1].subPath", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[1].SubPath = "../../../etc" }},
		{"subPath .. inside", "spec.containers[0].volumeMounts[1].subPath", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[1].SubPath = "a/../../b" }},
		{"subPath absolute", "spec.containers[0].volumeMounts[1].subPath", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[1].SubPath = "/etc" }},
		{"subPathExpr ..", "spec.containers[0].volumeMounts[2].subPathExpr", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[2].SubPathExpr = "../$(NODE)" }},
		{"subPath and subPathExpr", "spec.containers[0].volumeMounts[2].subPathExpr", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[2].SubPath = "x" }},
		{"subPath in an ephemeral container", "spec.ephemeralContainers[0].volumeMounts[0].subPath", func(p *corev1.Pod) {
			p.Spec.EphemeralContainers[0].VolumeMounts[0].SubPath = "x"
		}},
		// Volumes.
		{"volume ../x", "spec.volumes[0].name", func(p *corev1.Pod) { p.Spec.Volumes[0].Name = "../x" }},
		{"volume name with a dot", "spec.volumes[0].name", func(p *corev1.Pod) { p.Spec.Volumes[0].Name = "a.b" }},
		{"volume name empty", "spec.volumes[0].name", func(p *corev1.Pod) { p.Spec.Volumes[0].Name = "" }},
		{"two volumes of one name", "spec.volumes[1].name", func(p *corev1.Pod) { p.Spec.Volumes[1].Name = "0" }},
		{"volume of no type", "spec.volumes[0]", func(p *corev1.Pod) { p.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{} }},
		{"volume of two types", "spec.volumes[0]", func(p *corev1.Pod) { p.Spec.Volumes[0].HostPath = &corev1.HostPathVolumeSource{Path: "/x"} }},
		{"emptyDir of negative size", "spec.volumes[0].emptyDir.sizeLimit", func(p *corev1.Pod) { p.Spec.Volumes[0].EmptyDir.SizeLimit = &neg }},
		{"hostPath ..", "spec.volumes[1].hostPath.path", func(p *corev1.Pod) { p.Spec.Volumes[1].HostPath.Path = "/var/../../etc" }},
		{"hostPath empty", "spec.volumes[1].hostPath.path", func(p *corev1.Pod) { p.Spec.Volumes[1].HostPath.Path = "" }},
		{"hostPath type", "spec.volumes[1].hostPath.type", func(p *corev1.Pod) { p.Spec.Volumes[1].HostPath.Type = &bad }},
		{"ConfigMap item ..", "spec.volumes[2].configMap.items[0].path", func(p *corev1.Pod) { p.Spec.Volumes[2].ConfigMap.Items[0].Path = "../../x" }},
		{"ConfigMap item absolute", "spec.volumes[2].configMap.items[0].path", func(p *corev1.Pod) { p.Spec.Volumes[2].ConfigMap.Items[0].Path = "/etc/passwd" }},
		{"ConfigMap item ..data", "spec.volumes[2].configMap.items[0].path", func(p *corev1.Pod) { p.Spec.Volumes[2].ConfigMap.Items[0].Path = "..data" }},
		{"ConfigMap item .. inside", "spec.volumes[2].configMap.items[0].path", func(p *corev1.Pod) { p.Spec.Volumes[2].ConfigMap.Items[0].Path = "a/../../x" }},
		{"ConfigMap item without a key", "spec.volumes[2].configMap.items[0].key", func(p *corev1.Pod) { p.Spec.Volumes[2].ConfigMap.Items[0].Key = "" }},
		{"ConfigMap item mode", "spec.volumes[2].configMap.items[0].mode", func(p *corev1.Pod) { p.Spec.Volumes[2].ConfigMap.Items[0].Mode = i32(0o4777) }},
		{"ConfigMap default mode", "spec.volumes[2].configMap.defaultMode", func(p *corev1.Pod) { p.Spec.Volumes[2].ConfigMap.DefaultMode = i32(-1) }},
		{"ConfigMap without a name", "spec.volumes[2].configMap.name", func(p *corev1.Pod) { p.Spec.Volumes[2].ConfigMap.Name = "" }},
		{"Secret item ..", "spec.volumes[3].secret.items[0].path", func(p *corev1.Pod) { p.Spec.Volumes[3].Secret.Items[0].Path = ".." }},
		{"Secret without a name", "spec.volumes[3].secret.secretName", func(p *corev1.Pod) { p.Spec.Volumes[3].Secret.SecretName = "" }},
		{"downward API path ..", "spec.volumes[4].downwardAPI.items[0].path", func(p *corev1.Pod) { p.Spec.Volumes[4].DownwardAPI.Items[0].Path = "../x" }},
		{"downward API field", "spec.volumes[4].downwardAPI.items[0].fieldRef.fieldPath", func(p *corev1.Pod) {
			p.Spec.Volumes[4].DownwardAPI.Items[0].FieldRef.FieldPath = "spec.nodeName"
		}},
		{"downward API subscript", "spec.volumes[4].downwardAPI.items[1].fieldRef", func(p *corev1.Pod) {
			p.Spec.Volumes[4].DownwardAPI.Items[1].FieldRef.FieldPath = "metadata.name['x']"
		}},
		{"downward API of nothing", "spec.volumes[4].downwardAPI.items[0]", func(p *corev1.Pod) { p.Spec.Volumes[4].DownwardAPI.Items[0].FieldRef = nil }},
		{"token path ..", "spec.volumes[5].projected.sources[0].serviceAccountToken.path", func(p *corev1.Pod) {
			p.Spec.Volumes[5].Projected.Sources[0].ServiceAccountToken.Path = "../../token"
		}},
		{"token too short-lived", "spec.volumes[5].projected.sources[0].serviceAccountToken.expirationSeconds", func(p *corev1.Pod) {
			p.Spec.Volumes[5].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds = i64(599)
		}},
		{"token too long-lived", "spec.volumes[5].projected.sources[0].serviceAccountToken.expirationSeconds", func(p *corev1.Pod) {
			p.Spec.Volumes[5].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds = i64(1<<32 + 1)
		}},
		{"token without a service account", "spec.volumes[5].projected.sources[0].serviceAccountToken", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "" }},
		{"projected paths that collide", "spec.volumes[5].projected.sources[2].configMap.items[0].path", func(p *corev1.Pod) {
			p.Spec.Volumes[5].Projected.Sources[2].ConfigMap.Items[0].Path = "token"
		}},
		{"projected source of two types", "spec.volumes[5].projected.sources[0]", func(p *corev1.Pod) {
			p.Spec.Volumes[5].Projected.Sources[0].DownwardAPI = &corev1.DownwardAPIProjection{}
		}},
		{"too many volumes", "spec.volumes", func(p *corev1.Pod) {
			for i := 0; i < maxPodVolumes; i++ {
				p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: fmt.Sprintf("v%d", i), VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			}
		}},
		// What goes into /etc/hosts and /etc/resolv.conf.
		{"hostAlias IP with a newline", "spec.hostAliases[0].ip", func(p *corev1.Pod) { p.Spec.HostAliases[0].IP = "10.0.0.1\n10.6.6.6" }},
		{"hostAlias IP", "spec.hostAliases[0].ip", func(p *corev1.Pod) { p.Spec.HostAliases[0].IP = "not-an-ip" }},
		{"hostAlias hostname injecting a line", "spec.hostAliases[0].hostnames[0]", func(p *corev1.Pod) { p.Spec.HostAliases[0].Hostnames[0] = "a\n10.6.6.6\tevil" }},
		{"hostAlias hostname ../x", "spec.hostAliases[0].hostnames[0]", func(p *corev1.Pod) { p.Spec.HostAliases[0].Hostnames[0] = "../x" }},
		{"four nameservers", "spec.dnsConfig.nameservers", func(p *corev1.Pod) { p.Spec.DNSConfig.Nameservers = append(p.Spec.DNSConfig.Nameservers, "1.1.1.1") }},
		{"nameserver", "spec.dnsConfig.nameservers[0]", func(p *corev1.Pod) { p.Spec.DNSConfig.Nameservers[0] = "1.1.1.1\nsearch evil" }},
		{"search with a space", "spec.dnsConfig.searches[1]", func(p *corev1.Pod) { p.Spec.DNSConfig.Searches[1] = "a b" }},
		{"33 searches", "spec.dnsConfig.searches", func(p *corev1.Pod) {
			for i := 0; i < 31; i++ {
				p.Spec.DNSConfig.Searches = append(p.Spec.DNSConfig.Searches, "x")
			}
		}},
		{"search list too long", "spec.dnsConfig.searches", func(p *corev1.Pod) {
			p.Spec.DNSConfig.Searches = []string{strings.Repeat("a.", 120) + "b", strings.Repeat("a.", 120) + "b", strings.Repeat("a.", 120) + "b",
				strings.Repeat("a.", 120) + "b", strings.Repeat("a.", 120) + "b", strings.Repeat("a.", 120) + "b", strings.Repeat("a.", 120) + "b",
				strings.Repeat("a.", 120) + "b", strings.Repeat("a.", 120) + "b"}
		}},
		{"option without a name", "spec.dnsConfig.options[1]", func(p *corev1.Pod) { p.Spec.DNSConfig.Options[1].Name = "" }},
		{"dnsPolicy None without nameservers", "spec.dnsConfig.nameservers", func(p *corev1.Pod) { p.Spec.DNSConfig.Nameservers = nil }},
		{"dnsPolicy", "spec.dnsPolicy", func(p *corev1.Pod) { p.Spec.DNSPolicy = "Anything" }},
		{"hostname", "spec.hostname", func(p *corev1.Pod) { p.Spec.Hostname = "a_b" }},
		{"subdomain", "spec.subdomain", func(p *corev1.Pod) { p.Spec.Subdomain = "a.b" }},
		// The rest of the spec.
		{"restartPolicy", "spec.restartPolicy", func(p *corev1.Pod) { p.Spec.RestartPolicy = "Sometimes" }},
		{"service account ../x", "spec.serviceAccountName", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "../x" }},
		{"node name", "spec.nodeName", func(p *corev1.Pod) { p.Spec.NodeName = "a/b" }},
		{"runAsUser -1", "spec.securityContext.runAsUser", func(p *corev1.Pod) { p.Spec.SecurityContext.RunAsUser = i64(-1) }},
		{"container runAsUser 2^40", "spec.containers[0].securityContext.runAsUser", func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext.RunAsUser = i64(1 << 40) }},
		{"container runAsGroup -1", "spec.containers[0].securityContext.runAsGroup", func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext.RunAsGroup = i64(-1) }},
		{"own user namespace on the node's network", "spec.hostNetwork", func(p *corev1.Pod) { p.Spec.HostNetwork = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := unusualPod()
			tc.edit(p)
			errs := validatePod(p)
			if len(errs) == 0 {
				t.Fatal("accepted")
			}
			found := false
			for _, e := range errs {
				if e.Field == tc.field {
					found = true
				}
			}
			if !found {
				t.Errorf("no error about %s: %v", tc.field, errs.ToAggregate())
			}
		})
	}
}

func TestValidRequestNames(t *testing.T) {
	for _, tc := range []struct {
		ns, pod, container string
		ok                 bool
	}{
		{"default", "web-0", "c", true},
		{"default", "a.b.c", "", true},
		{"kube-system", strings.Repeat("a", 253), strings.Repeat("c", 63), true},
		{"..", "web-0", "c", false},
		{"default", "../../etc", "c", false},
		{"default", "web-0", "../../../../etc/shadow", false},
		{"default", "web-0", "c/0.log", false},
		{"default", "web-0", "c\x00", false},
		{"default/x", "web-0", "c", false},
		{"default", "web-0", "C", false},
		{"", "web-0", "c", false},
	} {
		if err := validRequestNames(tc.ns, tc.pod, tc.container); (err == nil) != tc.ok {
			t.Errorf("validRequestNames(%q, %q, %q) = %v, want ok=%v", tc.ns, tc.pod, tc.container, err, tc.ok)
		}
	}
}
