//go:build linux

package nodeagent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name())) // through the symlink
		if err != nil {
			out[e.Name()] = "<" + err.Error() + ">"
			continue
		}
		out[e.Name()] = string(b)
	}
	return out
}

func TestAtomicWrite(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "vol")
	changed, err := atomicWrite(stateTree{base}, "vol", map[string]fileData{"a": {[]byte("1"), 0o644}, "sub/b": {[]byte("2"), 0o600}}, os.Getuid())
	if err != nil || !changed {
		t.Fatalf("first write: %v %v", changed, err)
	}
	// A process holding the directory (as a container's bind mount does)
	// keeps seeing it: the same directory, its entries switched.
	held, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if got := readTree(t, dir); got["a"] != "1" {
		t.Errorf("after the first write: %v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "sub", "b")); string(b) != "2" {
		t.Errorf("sub/b = %q", b)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "sub", "b")); fi.Mode().Perm() != 0o600 {
		t.Errorf("sub/b mode %v", fi.Mode().Perm())
	}
	if l, _ := os.Readlink(filepath.Join(dir, "a")); l != "..data/a" {
		t.Errorf("a links to %q", l)
	}

	// The same content again changes nothing.
	before, _ := os.Readlink(filepath.Join(dir, "..data"))
	changed, err = atomicWrite(stateTree{base}, "vol", map[string]fileData{"a": {[]byte("1"), 0o644}, "sub/b": {[]byte("2"), 0o600}}, os.Getuid())
	after, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil || changed || before != after {
		t.Errorf("unchanged write: changed=%v err=%v, ..data %s → %s", changed, err, before, after)
	}

	// A changed value, a key gone, a key added.
	changed, err = atomicWrite(stateTree{base}, "vol", map[string]fileData{"a": {[]byte("one"), 0o644}, "c": {[]byte("3"), 0o644}}, os.Getuid())
	if err != nil || !changed {
		t.Fatalf("second write: %v %v", changed, err)
	}
	if got := readTree(t, dir); len(got) != 2 || got["a"] != "one" || got["c"] != "3" {
		t.Errorf("after the second write: %v", got)
	}
	entries, _ := os.ReadDir(dir)
	var hidden []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			hidden = append(hidden, e.Name())
		}
	}
	if len(hidden) != 2 || !slices.Contains(hidden, "..data") {
		t.Errorf("old data sets left behind: %v", hidden)
	}
}

func TestVolumeRefresh(t *testing.T) {
	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: "default"},
		Data: map[string]string{"Corefile": "v1", "other": "x"}})
	v := volumeSource{client: client, nodeRoot: t.TempDir(), uid: os.Getuid()}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: testUID(1), Labels: map[string]string{"app": "dns"}},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}, Items: []corev1.KeyToPath{{Key: "Corefile", Path: "Corefile"}}}}},
			{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
				Items: []corev1.DownwardAPIVolumeFile{{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "missing", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "later"}}},
		}},
	}
	dir, err := newPodDir(stateTree{t.TempDir()}, pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := v.prepare(ctx, pod, dir, &tokenCache{}, os.Getuid()); err == nil || !strings.Contains(err.Error(), `volume "missing"`) {
		t.Fatalf("prepare with a missing secret: %v", err)
	}
	client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "later", Namespace: "default"},
		Data: map[string][]byte{"k": []byte("v")}}, metav1.CreateOptions{})
	paths, err := v.prepare(ctx, pod, dir, &tokenCache{}, os.Getuid())
	if err != nil {
		t.Fatal(err)
	}
	if got := readTree(t, paths["config"].Root); len(got) != 1 || got["Corefile"] != "v1" {
		t.Errorf("config volume: %v", got)
	}
	if changed, err := v.refresh(ctx, pod, dir, &tokenCache{}, os.Getuid()); err != nil || len(changed) != 0 {
		t.Errorf("refresh with nothing changed: %v %v", changed, err)
	}
	client.CoreV1().ConfigMaps("default").Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: "default"},
		Data: map[string]string{"Corefile": "v2"}}, metav1.UpdateOptions{})
	pod.Labels["tier"] = "infra"
	changed, err := v.refresh(ctx, pod, dir, &tokenCache{}, os.Getuid())
	if err != nil || !slices.Equal(changed, []string{"config", "info"}) {
		t.Errorf("refresh: changed %v, %v", changed, err)
	}
	if got := readTree(t, paths["config"].Root); got["Corefile"] != "v2" {
		t.Errorf("config volume after the update: %v", got)
	}
	if got := readTree(t, paths["info"].Root); got["labels"] != "app=\"dns\"\ntier=\"infra\"" {
		t.Errorf("downward API labels: %q", got["labels"])
	}
}
