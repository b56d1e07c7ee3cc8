//go:build linux

package nodeagent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// volumeSource materialises pod volumes as directories on the host, later
// mounted into containers (see Mount).
type volumeSource struct {
	client kubernetes.Interface
	// nodeRoot is the node's own root filesystem, which hostPath volumes
	// are inside: a Pod's host is its node.
	nodeRoot string
	// uid is the host id of root in the lab, which owns what the agent
	// makes in the node's filesystem.
	uid int
	// cms and secrets read from the agent's caches when set (refreshes
	// then cost the API server nothing); else from client.
	cms     corelisters.ConfigMapLister
	secrets corelisters.SecretLister
}

// volume is where a pod volume's files are: Path inside the tree Root,
// which nothing in it may lead out of.
type volume struct {
	Root, Path string
	// Atomic volumes (ConfigMap, Secret, projected, downward API) are the
	// agent's to write and read-only in every container.
	Atomic bool
}

// fileData is one file of a ConfigMap, Secret, projected or downward API
// volume.
type fileData struct {
	data []byte
	mode os.FileMode
}

// Bounds on what a Pod's ConfigMap, Secret, projected and downward API
// volumes may hold together, which the agent writes to the host's disk: a
// ConfigMap holds at most 1 MiB, but one Pod may project the same one into
// hundreds of volumes and paths, or its annotations into thousands of
// files. A Pod over them waits in ContainerCreating with an event that
// says so, as one on a node out of disk would; a real Pod needs a small
// part of either.
const (
	maxPodVolumeBytes = 64 << 20
	maxPodVolumeFiles = 16384
)

// volumeBudget counts what a Pod's volumes hold as they are rendered.
type volumeBudget struct{ bytes, files int }

// add counts one more file of n bytes.
func (b *volumeBudget) add(n int) error {
	b.bytes += n
	b.files++
	switch {
	case b.bytes > maxPodVolumeBytes:
		return fmt.Errorf("the Pod's ConfigMap, Secret, projected and downward API volumes would hold more than %d MiB, more than a lab node gives one Pod", maxPodVolumeBytes>>20)
	case b.files > maxPodVolumeFiles:
		return fmt.Errorf("the Pod's ConfigMap, Secret, projected and downward API volumes would hold more than %d files, more than a lab node gives one Pod", maxPodVolumeFiles)
	}
	return nil
}

// prepare writes every volume of pod under its directory d (volumes/NAME)
// and returns where each is, by name; what it makes is owned by uid, the
// host id of root in the pod.
func (v volumeSource) prepare(ctx context.Context, pod *corev1.Pod, d podDir, tokens *tokenCache, uid int) (map[string]volume, error) {
	out := map[string]volume{}
	budget := &volumeBudget{}
	for _, vol := range pod.Spec.Volumes {
		rel, err := d.sub("volumes", vol.Name)
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", vol.Name, err)
		}
		loc := volume{Root: filepath.Join(d.tree.dir, rel)}
		switch {
		case vol.EmptyDir != nil:
			// As the kubelet's: 0777, root's (the lab's root).
			err = d.tree.ownedDir(rel, 0o777, uid, uid)
		case vol.HostPath != nil:
			loc = volume{Root: v.nodeRoot, Path: cleanRel(vol.HostPath.Path)}
			err = v.hostPath(loc.Path, vol.HostPath)
		case updatable(vol):
			loc.Atomic = true
			var files map[string]fileData
			files, err = v.render(ctx, pod, vol, tokens, budget)
			if err == nil {
				_, err = atomicWrite(d.tree, rel, files, uid)
			}
		default:
			err = fmt.Errorf("this lab's nodes do not support the volume type of %q", vol.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", vol.Name, err)
		}
		out[vol.Name] = loc
	}
	return out, nil
}

// updatable says whether a volume follows its source while the pod runs
// (ConfigMaps, Secrets, projected and downward API volumes do, as the
// kubelet's; not through subPath mounts).
func updatable(vol corev1.Volume) bool {
	return vol.ConfigMap != nil || vol.Secret != nil || vol.Projected != nil || vol.DownwardAPI != nil
}

// refresh rewrites the pod's updatable volumes (in its directory d) whose
// sources changed, and returns the names of those it changed.
func (v volumeSource) refresh(ctx context.Context, pod *corev1.Pod, d podDir, tokens *tokenCache, uid int) ([]string, error) {
	var changed []string
	var errs []error
	budget := &volumeBudget{}
	for _, vol := range pod.Spec.Volumes {
		if !updatable(vol) {
			continue
		}
		rel, err := d.sub("volumes", vol.Name)
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %q: %w", vol.Name, err))
			continue
		}
		files, err := v.render(ctx, pod, vol, tokens, budget)
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %q: %w", vol.Name, err))
			continue
		}
		ok, err := atomicWrite(d.tree, rel, files, uid)
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %q: %w", vol.Name, err))
		}
		if ok {
			changed = append(changed, vol.Name)
		}
	}
	return changed, errors.Join(errs...)
}

// render computes the files of an updatable volume.
// What it renders counts against the Pod's budget.
func (v volumeSource) render(ctx context.Context, pod *corev1.Pod, vol corev1.Volume, tokens *tokenCache, budget *volumeBudget) (map[string]fileData, error) {
	files := map[string]fileData{}
	switch {
	case vol.ConfigMap != nil:
		data, err := v.configMapData(ctx, pod.Namespace, vol.ConfigMap.Name, optional(vol.ConfigMap.Optional))
		if err != nil {
			return nil, err
		}
		return files, project(files, data, vol.ConfigMap.Items, mode(vol.ConfigMap.DefaultMode), budget)
	case vol.Secret != nil:
		data, err := v.secretData(ctx, pod.Namespace, vol.Secret.SecretName, optional(vol.Secret.Optional))
		if err != nil {
			return nil, err
		}
		return files, project(files, data, vol.Secret.Items, mode(vol.Secret.DefaultMode), budget)
	case vol.Projected != nil:
		return files, v.projected(ctx, pod, vol.Name, vol.Projected, files, tokens, budget)
	case vol.DownwardAPI != nil:
		return files, downward(files, pod, vol.DownwardAPI.Items, mode(vol.DownwardAPI.DefaultMode), budget)
	}
	return nil, fmt.Errorf("volume %q cannot be rendered", vol.Name)
}

func mode(m *int32) os.FileMode {
	if m == nil {
		return 0o644
	}
	return os.FileMode(*m)
}

func optional(b *bool) bool { return b != nil && *b }

// hostPath checks (and for the *OrCreate types makes) a hostPath volume's
// path inside the node's root filesystem, as the kubelet checks its
// type; links on the way stay inside the node.
func (v volumeSource) hostPath(rel string, hp *corev1.HostPathVolumeSource) error {
	t := corev1.HostPathUnset
	if hp.Type != nil {
		t = *hp.Type
	}
	root, err := openDir(v.nodeRoot)
	if err != nil {
		return fmt.Errorf("the node's filesystem: %w", err)
	}
	defer unix.Close(root)
	var fd int
	switch t {
	case corev1.HostPathDirectoryOrCreate:
		fd, err = mkdirAllIn(root, rel, inRoot, 0o755, v.uid, v.uid)
	case corev1.HostPathFileOrCreate:
		fd, err = createFileIn(root, rel, inRoot, 0o644, v.uid, v.uid)
	case corev1.HostPathUnset:
		// No check, as the kubelet; a missing path is made a directory
		// (what the container runtime does for a missing bind source).
		fd, err = mkdirAllIn(root, rel, inRoot, 0o755, v.uid, v.uid)
	default:
		fd, err = openIn(root, rel, inRoot)
	}
	if err != nil {
		return fmt.Errorf("hostPath %s: %w", "/"+rel, err)
	}
	defer unix.Close(fd)
	kind, err := fdKind(fd)
	if err != nil {
		return err
	}
	want := map[corev1.HostPathType]uint32{
		corev1.HostPathDirectory: unix.S_IFDIR, corev1.HostPathDirectoryOrCreate: unix.S_IFDIR,
		corev1.HostPathFile: unix.S_IFREG, corev1.HostPathFileOrCreate: unix.S_IFREG,
		corev1.HostPathSocket: unix.S_IFSOCK, corev1.HostPathCharDev: unix.S_IFCHR, corev1.HostPathBlockDev: unix.S_IFBLK,
	}
	if w, ok := want[t]; ok && w != kind {
		return fmt.Errorf("hostPath type check failed: /%s is not a %s", rel, strings.ToLower(strings.TrimSuffix(string(t), "OrCreate")))
	}
	return nil
}

// project adds data to files: every key, or only the items listed (each
// must exist). The keys of a ConfigMap or Secret become file names, and
// must be what the API server allows in them.
func project(files map[string]fileData, data map[string][]byte, items []corev1.KeyToPath, m os.FileMode, budget *volumeBudget) error {
	if len(items) == 0 {
		for k, d := range data {
			if msgs := validation.IsConfigMapKey(k); len(msgs) > 0 {
				return fmt.Errorf("key %q cannot be a file name: %s", k, strings.Join(msgs, "; "))
			}
			if err := budget.add(len(d)); err != nil {
				return err
			}
			files[k] = fileData{d, m}
		}
		return nil
	}
	for _, it := range items {
		d, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("key %q not found", it.Key)
		}
		fm := m
		if it.Mode != nil {
			fm = os.FileMode(*it.Mode)
		}
		if err := budget.add(len(d)); err != nil {
			return err
		}
		files[path.Clean(it.Path)] = fileData{d, fm}
	}
	return nil
}

// atomicWrite makes the volume rel of the node's state directory t hold
// exactly files, as the kubelet's atomic writer does: the files live in a
// timestamped directory that the ..data symlink points at, and each
// top-level name is a symlink into ..data; switching ..data is one rename,
// so a container (which bind-mounts the volume) sees the old set or the
// new, never a mix. Nothing is written when the volume holds the files
// already; changed reports whether it did not.
//
// The files are owned by uid, root in the lab (as a kubelet's are root's),
// so modes such as 0400 read as they would on a node; containers mount
// the directory read-only, locked so (see mounts.go). As the lab's ids own
// the volume, the agent works in it from descriptors only, following no
// link (see podfs.go).
func atomicWrite(t stateTree, rel string, files map[string]fileData, uid int) (changed bool, err error) {
	for p := range files {
		if err := localPath(p); err != nil {
			return false, err
		}
	}
	err = t.root(func(root int) error {
		parent, err := mkdirAllIn(root, path.Dir(rel), noLinks, 0o755, -1, -1)
		if err != nil {
			return err
		}
		defer unix.Close(parent)
		name := path.Base(rel)
		if err := ownDir(parent, name, 0o755, uid, uid); err != nil {
			return err
		}
		dir, err := openIn(parent, name, noLinks)
		if err != nil {
			return err
		}
		defer unix.Close(dir)
		changed, err = atomicWriteAt(dir, files, uid)
		return err
	})
	return changed, err
}

// atomicWriteAt is atomicWrite in the volume's directory dir (an O_PATH
// descriptor).
func atomicWriteAt(dir int, files map[string]fileData, uid int) (bool, error) {
	if old, ok := dataDir(dir); ok && sameFiles(dir, old, files) {
		return false, nil
	}
	ts := "..data_" + time.Now().UTC().Format("2006_01_02_15_04_05.000000000")
	if err := mkdirOwned(dir, ts, 0o755, uid, uid); err != nil {
		return false, &os.PathError{Op: "mkdir", Path: ts, Err: err}
	}
	tsDir, err := openIn(dir, ts, noLinks)
	if err != nil {
		return false, err
	}
	defer unix.Close(tsDir)
	for rel, f := range files {
		if err := writeNewFile(tsDir, rel, f, uid); err != nil {
			return false, err
		}
	}
	const tmp = "..data_tmp"
	if err := removeAllIn(dir, tmp); err != nil {
		return false, err
	}
	if err := unix.Symlinkat(ts, dir, tmp); err != nil {
		return false, &os.PathError{Op: "symlink", Path: tmp, Err: err}
	}
	if err := unix.Fchownat(dir, tmp, uid, uid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return false, &os.PathError{Op: "chown", Path: tmp, Err: err}
	}
	if err := unix.Renameat(dir, tmp, dir, "..data"); err != nil {
		return false, &os.PathError{Op: "rename", Path: tmp, Err: err}
	}
	top := map[string]bool{}
	for rel := range files {
		first, _, _ := strings.Cut(rel, "/")
		top[first] = true
	}
	for name := range top {
		// Each name is the writer's link into ..data; whatever else is
		// there (the lab's ids own the volume) goes.
		link := path.Join("..data", name)
		buf := make([]byte, len(link)+1)
		if n, err := unix.Readlinkat(dir, name, buf); err == nil && string(buf[:n]) == link {
			continue
		}
		if err := removeAllIn(dir, name); err != nil {
			return false, err
		}
		if err := unix.Symlinkat(link, dir, name); err != nil {
			return false, &os.PathError{Op: "symlink", Path: name, Err: err}
		}
		if err := unix.Fchownat(dir, name, uid, uid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return false, &os.PathError{Op: "chown", Path: name, Err: err}
		}
	}
	entries, _ := readDirIn(dir, ".", noLinks)
	for _, e := range entries {
		switch {
		case e.Name() == ts || e.Name() == "..data":
		case strings.HasPrefix(e.Name(), ".."), !top[e.Name()]:
			// An older set, or a key that went away.
			removeAllIn(dir, e.Name())
		}
	}
	return true, nil
}

// dataDir reads where the volume's ..data link points: a data set of the
// atomic writer's, a name in the volume's directory, or nothing.
func dataDir(dir int) (string, bool) {
	buf := make([]byte, unix.NAME_MAX+1)
	n, err := unix.Readlinkat(dir, "..data", buf)
	if err != nil || n > unix.NAME_MAX {
		return "", false
	}
	old := string(buf[:n])
	if !strings.HasPrefix(old, "..data_") || fileName(old) != nil {
		return "", false
	}
	return old, true
}

// writeNewFile writes f as the new file rel (with its parents, all owned
// by uid) under the data set dir.
func writeNewFile(dir int, rel string, f fileData, uid int) error {
	parent, err := mkdirAllIn(dir, path.Dir(rel), noLinks, 0o755, uid, uid)
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	mode := uint32(f.mode.Perm())
	out, err := openOwnFile(parent, path.Base(rel), noLinks, unix.O_CREAT|unix.O_EXCL, mode)
	if err != nil {
		return err
	}
	defer out.Close()
	if _, err := out.Write(f.data); err != nil {
		return err
	}
	if err := out.Chmod(os.FileMode(mode)); err != nil { // not subject to the umask
		return err
	}
	if err := out.Chown(uid, uid); err != nil {
		return err
	}
	return out.Close()
}

// sameFiles says whether the data set name of the volume's directory dir
// holds exactly files.
func sameFiles(dir int, name string, files map[string]fileData) bool {
	n := 0
	var walk func(rel string) bool
	walk = func(rel string) bool {
		entries, err := readDirIn(dir, path.Join(name, rel), noLinks)
		if err != nil {
			return false
		}
		for _, e := range entries {
			p := path.Join(rel, e.Name())
			switch {
			case e.IsDir():
				if !walk(p) {
					return false
				}
			case e.Type().IsRegular():
				want, ok := files[p]
				if !ok {
					return false
				}
				f, err := openReadIn(dir, path.Join(name, p), noLinks)
				if err != nil {
					return false
				}
				fi, serr := f.Stat()
				b, rerr := io.ReadAll(io.LimitReader(f, int64(len(want.data))+1))
				f.Close()
				if serr != nil || rerr != nil || !bytes.Equal(b, want.data) || fi.Mode().Perm() != want.mode.Perm() {
					return false
				}
				n++
			default:
				return false // not what the agent writes
			}
		}
		return true
	}
	return walk(".") && n == len(files)
}

func (v volumeSource) configMapData(ctx context.Context, ns, name string, opt bool) (map[string][]byte, error) {
	var cm *corev1.ConfigMap
	var err error
	if v.cms != nil {
		cm, err = v.cms.ConfigMaps(ns).Get(name)
	}
	if v.cms == nil || err != nil { // a cache miss may be a ConfigMap just made
		cm, err = v.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		if opt && apierrors.IsNotFound(err) {
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

func (v volumeSource) secretData(ctx context.Context, ns, name string, opt bool) (map[string][]byte, error) {
	var s *corev1.Secret
	var err error
	if v.secrets != nil {
		s, err = v.secrets.Secrets(ns).Get(name)
	}
	if v.secrets == nil || err != nil {
		s, err = v.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		if opt && apierrors.IsNotFound(err) {
			return map[string][]byte{}, nil
		}
		return nil, fmt.Errorf("secret %q: %w", name, err)
	}
	return s.Data, nil
}

// tokenCache keeps a pod's service account tokens, renewed (as the
// kubelet does) once 80% of their lifetime has passed.
type tokenCache struct {
	mu     sync.Mutex
	tokens map[string]cachedToken
}

type cachedToken struct {
	token   string
	renewAt time.Time
}

func (v volumeSource) projected(ctx context.Context, pod *corev1.Pod, volName string, p *corev1.ProjectedVolumeSource, files map[string]fileData, tokens *tokenCache, budget *volumeBudget) error {
	m := mode(p.DefaultMode)
	for _, src := range p.Sources {
		switch {
		case src.ServiceAccountToken != nil:
			tok, err := v.token(ctx, pod, volName, src.ServiceAccountToken, tokens)
			if err != nil {
				return err
			}
			if err := budget.add(len(tok)); err != nil {
				return err
			}
			files[path.Clean(src.ServiceAccountToken.Path)] = fileData{[]byte(tok), m}
		case src.ConfigMap != nil:
			data, err := v.configMapData(ctx, pod.Namespace, src.ConfigMap.Name, optional(src.ConfigMap.Optional))
			if err != nil {
				return err
			}
			if err := project(files, data, src.ConfigMap.Items, m, budget); err != nil {
				return err
			}
		case src.Secret != nil:
			data, err := v.secretData(ctx, pod.Namespace, src.Secret.Name, optional(src.Secret.Optional))
			if err != nil {
				return err
			}
			if err := project(files, data, src.Secret.Items, m, budget); err != nil {
				return err
			}
		case src.DownwardAPI != nil:
			if err := downward(files, pod, src.DownwardAPI.Items, m, budget); err != nil {
				return err
			}
		}
	}
	return nil
}

func (v volumeSource) token(ctx context.Context, pod *corev1.Pod, volName string, t *corev1.ServiceAccountTokenProjection, tokens *tokenCache) (string, error) {
	key := volName + "/" + t.Path
	tokens.mu.Lock()
	defer tokens.mu.Unlock()
	if c, ok := tokens.tokens[key]; ok && time.Now().Before(c.renewAt) {
		return c.token, nil
	}
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
		return "", fmt.Errorf("requesting a service account token: %w", err)
	}
	if tokens.tokens == nil {
		tokens.tokens = map[string]cachedToken{}
	}
	tokens.tokens[key] = cachedToken{tr.Status.Token, time.Now().Add(time.Duration(exp) * time.Second * 8 / 10)}
	return tr.Status.Token, nil
}

// downward adds the downward API items to files.
func downward(files map[string]fileData, pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, m os.FileMode, budget *volumeBudget) error {
	for _, it := range items {
		if it.FieldRef == nil {
			continue
		}
		val, err := fieldValue(pod, it.FieldRef.FieldPath)
		if err != nil {
			return err
		}
		fm := m
		if it.Mode != nil {
			fm = os.FileMode(*it.Mode)
		}
		if err := budget.add(len(val)); err != nil {
			return err
		}
		files[path.Clean(it.Path)] = fileData{[]byte(val), fm}
	}
	return nil
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
