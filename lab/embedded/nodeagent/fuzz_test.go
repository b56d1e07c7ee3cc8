//go:build linux

package nodeagent

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// FuzzPodHostPaths feeds the agent's Pod-to-host code Pods built from
// hostile parts (UIDs, names, volumes, paths, keys, environment, host
// aliases) against a temporary node: its state directory, a container's
// root filesystem, the node's filesystem and the lab's runtime directory,
// with a canary directory beside them. Whatever it is given, nothing
// panics, and nothing appears, changes or goes outside those directories.
//
// Every Pod goes through validatePod; one that passes is taken through
// what the agent does with it on the host short of runc: its directory,
// resolv.conf, hosts and hostname, volumes (emptyDir, ConfigMap items and
// keys, downward API, hostPath), the container's ID, bundle, log and
// config.json, each mount's source (with its subPath) and target, the
// state a restarted agent adopts, and the teardown. The raw parts also go
// straight to the second wall (podfs.go) as a name that slipped past
// validation would: the state directory's operations, the atomic writer
// and the runtime's removal of a container's directories.
//
// go test -fuzz FuzzPodHostPaths ./lab/embedded/nodeagent/
func FuzzPodHostPaths(f *testing.F) {
	type parts struct {
		uid, namespace, name, container, volume, subPath, mountPath, itemPath, key, envName, envValue, aliasIP, alias, hostPath string
	}
	for _, p := range []parts{
		{string(testUID(1)), "default", "web-0", "c", "data", "sub/dir", "/data", "conf/app.yaml", "app.yaml", "MODE", "$(MODE)-x", "10.0.0.1", "db", "/var/log"},
		{"6ba7b810-9dad-11d1-80b4-00c04fd430c8", "0", "a.b", "0", "0", "..foo/./x", "/a/../b", "./a..b", "KEY_NAME", "my.env-name", "", "::1", "a.b.c", "relative/./x"},
		{"../../../canary", "default", "web-0", "c", "data", "", "/data", "a", "a", "A", "b", "10.0.0.1", "x", "/x"},
		{string(testUID(2)), "../..", "../../canary", "../../../canary", "../../../../canary", "../../../canary", "../../../../../../canary/x", "../../../canary/x", "../../canary", "A=B", "x", "1.2.3.4\n6.6.6.6", "a\nb", "/../../../../canary"},
		{string(testUID(3)), "default", "web-0", "c", "data", "/abs", "../../../../../../../canary/m", "/etc/passwd", "..data", "A", strings.Repeat("$(A)", 100), "10.0.0.1", "x", "../canary"},
		{"abc", "default", "web-0", "c", "data", "", "/d", "a", "a", "A", "", "10.0.0.1", "x", "/x"},
		{string(testUID(4)), "default", "web-0", "c", "data", "a\x00b", "/d\x00", "a\x00", "a\x00", "A\x00", "\x00", "10.0.0.1", "x", "/x\x00"},
		{string(testUID(5)), "default", "web-0", "c", "data", strings.Repeat("a/", 300), "/" + strings.Repeat("m/", 300), strings.Repeat("p/", 300) + "f", strings.Repeat("k", 300), "A", "", "10.0.0.1", "x", "/" + strings.Repeat("h/", 300)},
		{"６ba7b810-9dad-11d1-80b4-00c04fd43", "défault", "wéb", "ç", "dàta", "ü/ö", "/ä", "é", "ñ", "É", "ü", "١٠.0.0.1", "ü", "/ü"},
		{string(testUID(6)), "default", "web-0", "c", "..data", "..", ".", "..", ".", ".", ".", ".", ".", ".."},
	} {
		f.Add(p.uid, p.namespace, p.name, p.container, p.volume, p.subPath, p.mountPath, p.itemPath, p.key, p.envName, p.envValue, p.aliasIP, p.alias, p.hostPath)
	}
	f.Fuzz(func(t *testing.T, uid, namespace, name, container, volume, subPath, mountPath, itemPath, key, envName, envValue, aliasIP, alias, hostPath string) {
		root := t.TempDir()
		node := filepath.Join(root, "node")
		state, rootfs, nodeRoot, run, canary := filepath.Join(node, "state"), filepath.Join(node, "rootfs"), filepath.Join(node, "nodefs"),
			filepath.Join(node, "run"), filepath.Join(root, "canary")
		for _, d := range []string{state, rootfs, nodeRoot, run, filepath.Join(canary, "dir")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		os.WriteFile(filepath.Join(canary, "file"), []byte("canary"), 0o600)
		beforeCanary, beforeRoot := fileState(t, canary), dirNames(t, root)
		cwd, _ := os.Getwd()
		beforeCwd := dirNames(t, cwd)

		pod := fuzzPod(uid, namespace, name, container, volume, subPath, mountPath, itemPath, key, envName, envValue, aliasIP, alias, hostPath)
		if errs := validatePod(pod); len(errs) == 0 {
			hostSide(t, pod, state, rootfs, nodeRoot, run, key)
		}
		secondWall(t, state, run, uid, volume, container, itemPath, key, subPath, mountPath)

		unchanged(t, canary, beforeCanary)
		if got := dirNames(t, root); !slices.Equal(got, beforeRoot) {
			t.Errorf("the fuzz root holds %q, held %q", got, beforeRoot)
		}
		if got := dirNames(t, node); !slices.Equal(got, []string{"nodefs", "rootfs", "run", "state"}) {
			t.Errorf("the node's directory holds %q", got)
		}
		if got := dirNames(t, cwd); !slices.Equal(got, beforeCwd) {
			t.Errorf("the working directory holds %q, held %q", got, beforeCwd)
		}
	})
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// fuzzPod is a Pod with each hostile part where the agent acts on it.
func fuzzPod(uid, namespace, name, container, volume, subPath, mountPath, itemPath, key, envName, envValue, aliasIP, alias, hostPath string) *corev1.Pod {
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Namespace: namespace, Name: name, Labels: map[string]string{"app": "fuzz"}},
		Spec: corev1.PodSpec{
			Hostname:    "h",
			HostAliases: []corev1.HostAlias{{IP: aliasIP, Hostnames: []string{alias}}},
			Volumes: []corev1.Volume{
				{Name: volume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "items", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Items: []corev1.KeyToPath{{Key: "k", Path: itemPath}}}}},
				{Name: "keys", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "keys"}}}},
				{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
					Items: []corev1.DownwardAPIVolumeFile{{Path: itemPath, FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
				{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostPath, Type: &dirOrCreate}}},
			},
			Containers: []corev1.Container{{
				Name:  container,
				Image: "fuzz",
				Env:   []corev1.EnvVar{{Name: envName, Value: envValue}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: volume, MountPath: mountPath, SubPath: subPath},
					{Name: volume, MountPath: "/expr", SubPathExpr: "$(" + envName + ")"},
					{Name: "items", MountPath: "/items"},
					{Name: "keys", MountPath: "/keys"},
					{Name: "info", MountPath: "/info"},
					{Name: "host", MountPath: "/host"},
				},
			}},
		},
	}
}

// hostSide takes a valid pod through what the agent does on the host
// before runc: as run and runOnce do it, in order. It returns whether it
// got through to the teardown.
func hostSide(t *testing.T, pod *corev1.Pod, state, rootfs, nodeRoot, run, key string) bool {
	ctx := context.Background()
	p, _ := hostileProvider(t, state)
	client := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: pod.Namespace}, Data: map[string]string{"k": "v"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "keys", Namespace: pod.Namespace}, Data: map[string]string{key: "v"}},
	)
	p.vols = volumeSource{client: client, nodeRoot: nodeRoot, uid: labUID}
	p.rt = &runc{iso: Isolation{RunDir: run}, node: "n"}
	r := newPodRun(p, pod.DeepCopy())
	if err := r.mkdir(); err != nil {
		t.Fatalf("the directory of a valid Pod: %v", err)
	}
	r.ip = netip.MustParseAddr("10.244.1.5")
	if err := writePodFiles(r); err != nil {
		t.Errorf("the files of a valid Pod: %v", err)
	}
	vols, err := p.vols.prepare(ctx, r.pod, r.files, r.tokens, labUID)
	if err != nil {
		// A ConfigMap key that is no file name, a path the atomic
		// writer refuses: the pod waits, as it would on a node.
		r.teardown()
		return false
	}
	r.volumes = vols
	c := r.containers[0]
	spec, err := c.containerSpec(ctx, Image{Name: "fuzz", Layers: []string{"/l"}, Cmd: []string{"sleep"}})
	if err != nil {
		r.teardown() // a variable too large, a subPathExpr out of its volume
		return false
	}
	if rel, err := c.logRel(0); err == nil {
		if l, err := openContainerLog(r.files.tree, rel, DefaultLogLimits); err == nil {
			l.copy("stdout", strings.NewReader("a line\n"))
			l.Close()
		} else {
			t.Errorf("the log of a valid container: %v", err)
		}
	}
	if err := r.mkdir("containers", spec.ID); err != nil {
		t.Errorf("the bundle of a valid container: %v", err)
	}
	if bundle, err := makeBundle(spec.Bundle, labUID); err == nil {
		writeFileIn(bundle, "config.json", noLinks, []byte("{}"), 0o644, -1, -1)
		unix.Close(bundle)
	} else {
		t.Errorf("the bundle of a valid container: %v", err)
	}
	rootfd, err := openDir(rootfs)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range spec.Mounts {
		src, err := m.open(labUID)
		if err != nil {
			continue // a subPath that is not there in a read-only volume
		}
		if dir, err := isDirFd(src); err == nil {
			if dst, err := mountTarget(rootfd, m.Destination, dir, labUID); err == nil {
				unix.Close(dst)
			}
		}
		unix.Close(src)
	}
	unix.Close(rootfd)
	r.save()
	if _, err := loadPodState(r.files); err != nil {
		t.Errorf("the state of a valid pod: %v", err)
	}
	r.cleanupRun(spec.ID)
	if _, err := os.Lstat(spec.Bundle); err == nil {
		t.Errorf("the bundle outlived its cleanup")
	}
	r.teardown()
	if _, err := os.Lstat(r.dir()); err == nil {
		t.Errorf("the pod's directory outlived its teardown")
	}
	return true
}

// TestFuzzPodsReachTheHost: the fuzz target's valid seeds go all the way,
// so that what it finds is about the host side, not about validation.
func TestFuzzPodsReachTheHost(t *testing.T) {
	for _, p := range [][]string{
		{string(testUID(1)), "default", "web-0", "c", "data", "sub/dir", "/data", "conf/app.yaml", "app.yaml", "MODE", "$(MODE)-x", "10.0.0.1", "db", "/var/log"},
		{"6ba7b810-9dad-11d1-80b4-00c04fd430c8", "0", "a.b", "0", "0", "..foo/./x", "/a/../b", "./a..b", "KEY_NAME", "my.env-name", "", "::1", "a.b.c", "relative/./x"},
	} {
		pod := fuzzPod(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13])
		if errs := validatePod(pod); len(errs) > 0 {
			t.Fatalf("seed %q: %v", p, errs.ToAggregate())
		}
		node := t.TempDir()
		dirs := []string{filepath.Join(node, "state"), filepath.Join(node, "rootfs"), filepath.Join(node, "nodefs"), filepath.Join(node, "run")}
		for _, d := range dirs {
			os.MkdirAll(d, 0o755)
		}
		if !hostSide(t, pod, dirs[0], dirs[1], dirs[2], dirs[3], p[8]) {
			t.Errorf("seed %q stopped before the teardown", p)
		}
		// The mount targets were made in the container's filesystem,
		// the hostPath in the node's.
		for _, want := range []string{filepath.Join(dirs[1], filepath.Clean("/"+p[6])), filepath.Join(dirs[1], "items"), filepath.Join(dirs[2], filepath.Clean("/"+p[13]))} {
			if _, err := os.Stat(want); err != nil {
				t.Errorf("seed %q: %v", p[0], err)
			}
		}
	}
}

// secondWall gives the raw parts to the state directory's operations, as
// a name that slipped past validation would reach them.
func secondWall(t *testing.T, state, run, uid, volume, container, itemPath, key, subPath, mountPath string) {
	tr := stateTree{state}
	for _, rel := range []string{"pods/" + uid + "/volumes/" + volume, "pods/" + uid + "/logs/" + container, uid, volume, mountPath, subPath} {
		tr.mkdirAll(rel, 0o755)
		tr.ownedDir(rel, 0o777, labUID, labUID)
		tr.writeFile(rel+"/"+key, []byte("x"), 0o644, labUID, labUID)
		tr.replaceFile(rel, []byte("x"), 0o644)
		if l, err := openContainerLog(tr, rel, DefaultLogLimits); err == nil {
			l.Close()
		}
		tr.readFile(rel, 1<<20)
	}
	atomicWrite(tr, "pods/"+uid+"/volumes/"+volume, map[string]fileData{itemPath: {[]byte("x"), 0o644}, key: {[]byte("y"), 0o600}}, labUID)
	if d, err := newPodDir(tr, types.UID(uid)); err == nil {
		if rel, err := d.sub("volumes", volume); err == nil {
			atomicWrite(tr, rel, map[string]fileData{itemPath: {[]byte("x"), 0o644}}, labUID)
		}
	}
	rt := &runc{iso: Isolation{RunDir: run}, node: "n"}
	for _, id := range []string{container, uid, volume, uid + "-" + container + "-0"} {
		rt.unmountRootfs(id)
	}
	for _, rel := range []string{"pods/" + uid, volume, uid, container, mountPath} {
		tr.removeAll(rel)
	}
}
