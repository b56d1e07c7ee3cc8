package nodeagent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// volumeSource materialises pod volumes as directories on the host, later
// bind-mounted into containers.
type volumeSource struct {
	client  kubernetes.Interface
	nodeDir string // the node's own filesystem root, for hostPath
}

// prepare writes every volume of pod under dir/volumes and returns the
// host path of each by name.
func (v volumeSource) prepare(ctx context.Context, pod *corev1.Pod, dir string) (map[string]string, error) {
	out := map[string]string{}
	for _, vol := range pod.Spec.Volumes {
		path := filepath.Join(dir, "volumes", vol.Name)
		var err error
		switch {
		case vol.EmptyDir != nil:
			err = os.MkdirAll(path, 0o777)
		case vol.HostPath != nil:
			// A pod's "host" is its node: hostPath volumes live in the
			// node's own directory, never on the real host.
			path = filepath.Join(v.nodeDir, filepath.Clean("/"+vol.HostPath.Path))
			err = v.hostPath(path, vol.HostPath)
		case vol.ConfigMap != nil:
			err = v.configMap(ctx, pod.Namespace, vol.ConfigMap.Name, vol.ConfigMap.Items, mode(vol.ConfigMap.DefaultMode), optional(vol.ConfigMap.Optional), path)
		case vol.Secret != nil:
			err = v.secret(ctx, pod.Namespace, vol.Secret.SecretName, vol.Secret.Items, mode(vol.Secret.DefaultMode), optional(vol.Secret.Optional), path)
		case vol.Projected != nil:
			err = v.projected(ctx, pod, vol.Projected, path)
		case vol.DownwardAPI != nil:
			err = writeDownward(pod, vol.DownwardAPI.Items, mode(vol.DownwardAPI.DefaultMode), path)
		default:
			err = fmt.Errorf("this lab's nodes do not support the volume type of %q", vol.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", vol.Name, err)
		}
		out[vol.Name] = path
	}
	return out, nil
}

func mode(m *int32) os.FileMode {
	if m == nil {
		return 0o644
	}
	return os.FileMode(*m)
}

func optional(b *bool) bool { return b != nil && *b }

func (v volumeSource) hostPath(path string, hp *corev1.HostPathVolumeSource) error {
	t := corev1.HostPathUnset
	if hp.Type != nil {
		t = *hp.Type
	}
	switch t {
	case corev1.HostPathFileOrCreate, corev1.HostPathFile:
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	default:
		return os.MkdirAll(path, 0o755)
	}
}

func writeFiles(dir string, files map[string][]byte, items []corev1.KeyToPath, m os.FileMode) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	write := func(rel string, data []byte, fm os.FileMode) error {
		p := filepath.Join(dir, filepath.Clean("/"+rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, data, fm)
	}
	if len(items) == 0 {
		for k, data := range files {
			if err := write(k, data, m); err != nil {
				return err
			}
		}
		return nil
	}
	for _, it := range items {
		data, ok := files[it.Key]
		if !ok {
			return fmt.Errorf("key %q not found", it.Key)
		}
		fm := m
		if it.Mode != nil {
			fm = os.FileMode(*it.Mode)
		}
		if err := write(it.Path, data, fm); err != nil {
			return err
		}
	}
	return nil
}

func (v volumeSource) configMapData(ctx context.Context, ns, name string, opt bool) (map[string][]byte, error) {
	cm, err := v.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if opt {
			return map[string][]byte{}, nil
		}
		return nil, fmt.Errorf("configmap %q: %w", name, err)
	}
	files := map[string][]byte{}
	for k, s := range cm.Data {
		files[k] = []byte(s)
	}
	for k, b := range cm.BinaryData {
		files[k] = b
	}
	return files, nil
}

func (v volumeSource) configMap(ctx context.Context, ns, name string, items []corev1.KeyToPath, m os.FileMode, opt bool, dir string) error {
	files, err := v.configMapData(ctx, ns, name, opt)
	if err != nil {
		return err
	}
	return writeFiles(dir, files, items, m)
}

func (v volumeSource) secretData(ctx context.Context, ns, name string, opt bool) (map[string][]byte, error) {
	s, err := v.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if opt {
			return map[string][]byte{}, nil
		}
		return nil, fmt.Errorf("secret %q: %w", name, err)
	}
	return s.Data, nil
}

func (v volumeSource) secret(ctx context.Context, ns, name string, items []corev1.KeyToPath, m os.FileMode, opt bool, dir string) error {
	files, err := v.secretData(ctx, ns, name, opt)
	if err != nil {
		return err
	}
	return writeFiles(dir, files, items, m)
}

func (v volumeSource) projected(ctx context.Context, pod *corev1.Pod, p *corev1.ProjectedVolumeSource, dir string) error {
	m := mode(p.DefaultMode)
	for _, src := range p.Sources {
		switch {
		case src.ServiceAccountToken != nil:
			t := src.ServiceAccountToken
			exp := int64(3607)
			if t.ExpirationSeconds != nil {
				exp = *t.ExpirationSeconds
			}
			var aud []string
			if t.Audience != "" {
				aud = []string{t.Audience}
			}
			tr, err := v.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
				Spec: authenticationv1.TokenRequestSpec{Audiences: aud, ExpirationSeconds: &exp,
					BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}},
			}, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("requesting a service account token: %w", err)
			}
			if err := writeFiles(dir, map[string][]byte{t.Path: []byte(tr.Status.Token)}, nil, m); err != nil {
				return err
			}
		case src.ConfigMap != nil:
			files, err := v.configMapData(ctx, pod.Namespace, src.ConfigMap.Name, optional(src.ConfigMap.Optional))
			if err != nil {
				return err
			}
			if err := writeFiles(dir, files, src.ConfigMap.Items, m); err != nil {
				return err
			}
		case src.Secret != nil:
			files, err := v.secretData(ctx, pod.Namespace, src.Secret.Name, optional(src.Secret.Optional))
			if err != nil {
				return err
			}
			if err := writeFiles(dir, files, src.Secret.Items, m); err != nil {
				return err
			}
		case src.DownwardAPI != nil:
			if err := writeDownward(pod, src.DownwardAPI.Items, m, dir); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeDownward(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, m os.FileMode, dir string) error {
	files := map[string][]byte{}
	var kp []corev1.KeyToPath
	for _, it := range items {
		if it.FieldRef == nil {
			continue
		}
		val, err := fieldValue(pod, it.FieldRef.FieldPath)
		if err != nil {
			return err
		}
		files[it.Path] = []byte(val)
		kp = append(kp, corev1.KeyToPath{Key: it.Path, Path: it.Path, Mode: it.Mode})
	}
	return writeFiles(dir, files, kp, m)
}

// fieldValue is a downward API field of pod, as the kubelet renders it
// for env (fieldRef) and downwardAPI volumes.
func fieldValue(pod *corev1.Pod, path string) (string, error) {
	if p, key, ok := subscript(path); ok {
		switch p {
		case "metadata.labels":
			return pod.Labels[key], nil
		case "metadata.annotations":
			return pod.Annotations[key], nil
		}
		return "", fmt.Errorf("field %s does not support a subscript", p)
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.podIPs":
		var ips []string
		for _, ip := range pod.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	case "status.hostIPs":
		var ips []string
		for _, ip := range pod.Status.HostIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), nil
	case "metadata.labels", "metadata.annotations":
		m := pod.Labels
		if path == "metadata.annotations" {
			m = pod.Annotations
		}
		var lines []string
		for k, v := range m {
			lines = append(lines, fmt.Sprintf("%s=%q", k, v))
		}
		sort.Strings(lines)
		return strings.Join(lines, "\n"), nil
	}
	return "", fmt.Errorf("field %s is not supported", path)
}

// subscript splits metadata.labels['key'] into the path and the key.
func subscript(path string) (string, string, bool) {
	i := strings.Index(path, "['")
	if i < 0 || !strings.HasSuffix(path, "']") {
		return "", "", false
	}
	return path[:i], path[i+2 : len(path)-2], true
}
