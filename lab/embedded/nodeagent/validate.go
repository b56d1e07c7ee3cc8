//go:build linux

package nodeagent

import (
	"fmt"
	"path"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The agent runs as root in the host's namespaces and makes paths, files,
// mounts, processes and network namespaces out of the Pods the API server
// hands it. It does not take the API server's word that they are sound:
// whoever writes the cluster's etcd directly (or holds the API server) can
// hand it any object. So every Pod passes validatePod, on the agent's side,
// before any of it reaches the host: the checks the API server applies to
// the fields the agent acts on (names that become file names, paths that
// become mounts, addresses that go into files and rules), plus bounds on
// how much of the host one Pod may ask for. A Pod that fails is never run:
// it is reported Failed with the reason, as the kubelet reports a Pod it
// rejects. The checks accept whatever the API server accepts (leniently
// where upstream has a relaxed form, and without requiring fields the API
// server defaults), so no Pod a learner can create is refused.
//
// What the agent then makes of a valid Pod on disk is confined a second
// time where it lands (podfs.go): were a name to slip through, it would
// still not reach outside the node's state directory.

// Bounds on what one Pod may ask of the host. maxPodBytes is what could
// come through the API server at all: it takes no request above 3 MiB, and
// etcd stores no value above its request limit (1.5 MiB unless raised).
// The counts bound the directories, mounts, processes and API requests
// the agent makes for one Pod (every container is a root filesystem
// mount, a bundle and a process, every volume mount a mount on the host,
// every ConfigMap or Secret an environment refers to a request when the
// container starts); they lie far above any Pod a lab or a real cluster
// runs.
const (
	maxPodBytes         = 3 << 20
	maxPodContainers    = 128
	maxPodVolumes       = 256
	maxContainerMounts  = 256
	maxContainerPorts   = 1024
	maxContainerEnv     = 4096
	maxContainerEnvFrom = 256
	minTokenExpiration  = 10 * 60
	maxTokenExpiration  = 1 << 32
	maxDNSNameservers   = 3
	maxDNSSearchPaths   = 32
	maxDNSSearchListLen = 2048
)

// rejectReason is the reason a Pod that fails validatePod is reported
// Failed with, in its status and in an event.
const rejectReason = "InvalidPod"

// validatePod checks pod as the API server validates a Pod it stores, for
// every field the agent turns into something on the host. It returns the
// problems found, none for a Pod the API server accepts.
func validatePod(pod *corev1.Pod) field.ErrorList {
	if pod == nil {
		return field.ErrorList{field.Required(field.NewPath("pod"), "")}
	}
	if n := pod.Size(); n > maxPodBytes {
		// Nothing of a Pod this large is looked at further: no API
		// server stores one.
		return field.ErrorList{field.TooLong(field.NewPath("pod"), n, maxPodBytes)}
	}
	meta := field.NewPath("metadata")
	errs := apimachineryvalidation.ValidateObjectMeta(&pod.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, meta)
	if err := validUID(pod.UID); err != nil {
		errs = append(errs, field.Invalid(meta.Child("uid"), string(pod.UID), err.Error()))
	}
	return append(errs, validatePodSpec(&pod.Spec, field.NewPath("spec"))...)
}

// validUID checks that uid is what the API server gives every object: a
// UUID in its canonical form (36 characters, lower-case hexadecimal
// digits in groups of 8, 4, 4, 4 and 12 joined by dashes). The agent names
// the Pod's directory after it.
func validUID(uid types.UID) error {
	s := string(uid)
	if len(s) != 36 {
		return fmt.Errorf("must be a UUID as the API server assigns it (36 characters), not %d characters", len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return fmt.Errorf("must be a UUID as the API server assigns it (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)")
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return fmt.Errorf("must be a UUID as the API server assigns it (lower-case hexadecimal digits and dashes)")
			}
		}
	}
	return nil
}

// validatePodSpec is validatePod's part for the Pod's spec.
func validatePodSpec(spec *corev1.PodSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	vols, vErrs := validateVolumes(spec.Volumes, fld.Child("volumes"))
	errs = append(errs, vErrs...)

	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(fld.Child("containers"), ""))
	}
	if n := len(spec.Containers) + len(spec.InitContainers) + len(spec.EphemeralContainers); n > maxPodContainers {
		errs = append(errs, field.TooMany(fld.Child("containers"), n, maxPodContainers))
	}
	// Container names are unique across every kind of container: they
	// name the containers' logs and bundles on the node.
	names := sets.New[string]()
	checkContainers := func(cs []corev1.Container, fld *field.Path, ephemeral bool) {
		for i := range cs {
			idx := fld.Index(i)
			errs = append(errs, validateContainer(&cs[i], vols, idx, ephemeral)...)
			if names.Has(cs[i].Name) {
				errs = append(errs, field.Duplicate(idx.Child("name"), cs[i].Name))
			}
			names.Insert(cs[i].Name)
		}
	}
	checkContainers(spec.Containers, fld.Child("containers"), false)
	checkContainers(spec.InitContainers, fld.Child("initContainers"), false)
	ephemeral := make([]corev1.Container, len(spec.EphemeralContainers))
	for i := range spec.EphemeralContainers {
		ephemeral[i] = corev1.Container(spec.EphemeralContainers[i].EphemeralContainerCommon)
	}
	checkContainers(ephemeral, fld.Child("ephemeralContainers"), true)

	if spec.RestartPolicy != "" {
		errs = append(errs, oneOf(fld.Child("restartPolicy"), string(spec.RestartPolicy),
			string(corev1.RestartPolicyAlways), string(corev1.RestartPolicyOnFailure), string(corev1.RestartPolicyNever))...)
	}
	if spec.DNSPolicy != "" {
		errs = append(errs, oneOf(fld.Child("dnsPolicy"), string(spec.DNSPolicy), string(corev1.DNSClusterFirstWithHostNet),
			string(corev1.DNSClusterFirst), string(corev1.DNSDefault), string(corev1.DNSNone))...)
	}
	errs = append(errs, validateDNSConfig(spec.DNSConfig, spec.DNSPolicy, fld.Child("dnsConfig"))...)
	for i, ha := range spec.HostAliases {
		idx := fld.Child("hostAliases").Index(i)
		errs = append(errs, validation.IsValidIPForLegacyField(idx.Child("ip"), ha.IP, false, nil)...)
		for j, h := range ha.Hostnames {
			errs = append(errs, dnsSubdomain(idx.Child("hostnames").Index(j), h)...)
		}
	}
	if spec.Hostname != "" {
		errs = append(errs, dnsLabel(fld.Child("hostname"), spec.Hostname)...)
	}
	if spec.Subdomain != "" {
		errs = append(errs, dnsLabel(fld.Child("subdomain"), spec.Subdomain)...)
	}
	if spec.ServiceAccountName != "" {
		errs = append(errs, dnsSubdomain(fld.Child("serviceAccountName"), spec.ServiceAccountName)...)
	}
	if spec.NodeName != "" {
		errs = append(errs, dnsSubdomain(fld.Child("nodeName"), spec.NodeName)...)
	}
	if sc := spec.SecurityContext; sc != nil {
		scFld := fld.Child("securityContext")
		errs = append(errs, validateIDs(scFld, sc.RunAsUser, sc.RunAsGroup)...)
		if sc.FSGroup != nil {
			errs = append(errs, idErrs(scFld.Child("fsGroup"), *sc.FSGroup, validation.IsValidGroupID)...)
		}
		for i, g := range sc.SupplementalGroups {
			errs = append(errs, idErrs(scFld.Child("supplementalGroups").Index(i), g, validation.IsValidGroupID)...)
		}
	}
	if ownUsers(&corev1.Pod{Spec: *spec}) {
		// As upstream: a Pod of its own user namespace shares none of
		// the node's.
		for name, on := range map[string]bool{"hostNetwork": spec.HostNetwork, "hostPID": spec.HostPID, "hostIPC": spec.HostIPC} {
			if on {
				errs = append(errs, field.Forbidden(fld.Child(name), "when `hostUsers` is false"))
			}
		}
	}
	if spec.ServiceAccountName == "" {
		for i, v := range spec.Volumes {
			if v.Projected == nil {
				continue
			}
			for j, src := range v.Projected.Sources {
				if src.ServiceAccountToken != nil {
					errs = append(errs, field.Forbidden(fld.Child("volumes").Index(i).Child("projected", "sources").Index(j).Child("serviceAccountToken"),
						"must not be specified when serviceAccountName is not set"))
				}
			}
		}
	}
	return errs
}

// validateVolumes checks the Pod's volumes and returns them by name.
func validateVolumes(volumes []corev1.Volume, fld *field.Path) (map[string]*corev1.Volume, field.ErrorList) {
	var errs field.ErrorList
	if len(volumes) > maxPodVolumes {
		errs = append(errs, field.TooMany(fld, len(volumes), maxPodVolumes))
	}
	byName := map[string]*corev1.Volume{}
	for i := range volumes {
		v := &volumes[i]
		idx := fld.Index(i)
		var el field.ErrorList
		if v.Name == "" {
			el = append(el, field.Required(idx.Child("name"), ""))
		} else {
			el = append(el, dnsLabel(idx.Child("name"), v.Name)...)
		}
		if _, ok := byName[v.Name]; ok {
			el = append(el, field.Duplicate(idx.Child("name"), v.Name))
		}
		el = append(el, validateVolumeSource(&v.VolumeSource, idx)...)
		if len(el) == 0 {
			byName[v.Name] = v
		}
		errs = append(errs, el...)
	}
	return byName, errs
}

// validateVolumeSource checks one volume's source: exactly one type, and
// the paths, keys and modes of the types the agent writes or mounts.
func validateVolumeSource(src *corev1.VolumeSource, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	// Every field of a VolumeSource is a pointer to one type of volume.
	n := 0
	rv := reflect.ValueOf(*src)
	for i := 0; i < rv.NumField(); i++ {
		if f := rv.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			n++
		}
	}
	switch {
	case n == 0:
		errs = append(errs, field.Required(fld, "must specify a volume type"))
	case n > 1:
		errs = append(errs, field.Forbidden(fld, "may not specify more than 1 volume type"))
	}
	switch {
	case src.EmptyDir != nil:
		if l := src.EmptyDir.SizeLimit; l != nil && l.Cmp(resource.Quantity{}) < 0 {
			errs = append(errs, field.Forbidden(fld.Child("emptyDir", "sizeLimit"), "SizeLimit field must be a valid resource quantity"))
		}
	case src.HostPath != nil:
		hp := fld.Child("hostPath")
		if src.HostPath.Path == "" {
			errs = append(errs, field.Required(hp.Child("path"), ""))
		}
		errs = append(errs, noBacksteps(hp.Child("path"), src.HostPath.Path)...)
		if t := src.HostPath.Type; t != nil {
			errs = append(errs, oneOf(hp.Child("type"), string(*t), string(corev1.HostPathUnset), string(corev1.HostPathDirectoryOrCreate),
				string(corev1.HostPathDirectory), string(corev1.HostPathFileOrCreate), string(corev1.HostPathFile),
				string(corev1.HostPathSocket), string(corev1.HostPathCharDev), string(corev1.HostPathBlockDev))...)
		}
	case src.ConfigMap != nil:
		cm := fld.Child("configMap")
		if src.ConfigMap.Name == "" {
			errs = append(errs, field.Required(cm.Child("name"), ""))
		}
		errs = append(errs, validateMode(cm.Child("defaultMode"), src.ConfigMap.DefaultMode)...)
		for i := range src.ConfigMap.Items {
			errs = append(errs, validateKeyToPath(&src.ConfigMap.Items[i], cm.Child("items").Index(i))...)
		}
	case src.Secret != nil:
		s := fld.Child("secret")
		if src.Secret.SecretName == "" {
			errs = append(errs, field.Required(s.Child("secretName"), ""))
		}
		errs = append(errs, validateMode(s.Child("defaultMode"), src.Secret.DefaultMode)...)
		for i := range src.Secret.Items {
			errs = append(errs, validateKeyToPath(&src.Secret.Items[i], s.Child("items").Index(i))...)
		}
	case src.DownwardAPI != nil:
		d := fld.Child("downwardAPI")
		errs = append(errs, validateMode(d.Child("defaultMode"), src.DownwardAPI.DefaultMode)...)
		for i := range src.DownwardAPI.Items {
			errs = append(errs, validateDownwardAPIFile(&src.DownwardAPI.Items[i], d.Child("items").Index(i))...)
		}
	case src.Projected != nil:
		errs = append(errs, validateProjected(src.Projected, fld.Child("projected"))...)
	}
	return errs
}

// validateProjected checks a projected volume: its sources, and that no
// two of them write the same path.
func validateProjected(p *corev1.ProjectedVolumeSource, fld *field.Path) field.ErrorList {
	errs := validateMode(fld.Child("defaultMode"), p.DefaultMode)
	paths := sets.New[string]()
	claim := func(f *field.Path, p string) {
		if p == "" {
			return
		}
		if paths.Has(p) {
			errs = append(errs, field.Invalid(f, p, "conflicting duplicate paths"))
		}
		paths.Insert(p)
	}
	for i, src := range p.Sources {
		sf := fld.Child("sources").Index(i)
		n := 0
		if src.Secret != nil {
			n++
			if src.Secret.Name == "" {
				errs = append(errs, field.Required(sf.Child("secret", "name"), ""))
			}
			for j := range src.Secret.Items {
				it := sf.Child("secret", "items").Index(j)
				errs = append(errs, validateKeyToPath(&src.Secret.Items[j], it)...)
				claim(it.Child("path"), src.Secret.Items[j].Path)
			}
		}
		if src.ConfigMap != nil {
			n++
			if src.ConfigMap.Name == "" {
				errs = append(errs, field.Required(sf.Child("configMap", "name"), ""))
			}
			for j := range src.ConfigMap.Items {
				it := sf.Child("configMap", "items").Index(j)
				errs = append(errs, validateKeyToPath(&src.ConfigMap.Items[j], it)...)
				claim(it.Child("path"), src.ConfigMap.Items[j].Path)
			}
		}
		if src.DownwardAPI != nil {
			n++
			for j := range src.DownwardAPI.Items {
				it := sf.Child("downwardAPI", "items").Index(j)
				errs = append(errs, validateDownwardAPIFile(&src.DownwardAPI.Items[j], it)...)
				claim(it.Child("path"), src.DownwardAPI.Items[j].Path)
			}
		}
		if t := src.ServiceAccountToken; t != nil {
			n++
			tf := sf.Child("serviceAccountToken")
			// The API server defaults a missing expiration to an hour.
			if e := t.ExpirationSeconds; e != nil && (*e < minTokenExpiration || *e > maxTokenExpiration) {
				errs = append(errs, field.Invalid(tf.Child("expirationSeconds"), *e, "must be between 10 minutes and 2^32 seconds"))
			}
			if t.Path == "" {
				errs = append(errs, field.Required(tf.Child("path"), ""))
			}
			errs = append(errs, localNonReservedPath(tf.Child("path"), t.Path)...)
			claim(tf.Child("path"), t.Path)
		}
		if b := src.ClusterTrustBundle; b != nil {
			n++
			bf := sf.Child("clusterTrustBundle")
			if b.Path == "" {
				errs = append(errs, field.Required(bf.Child("path"), ""))
			}
			errs = append(errs, localNonReservedPath(bf.Child("path"), b.Path)...)
			claim(bf.Child("path"), b.Path)
		}
		if src.PodCertificate != nil {
			n++
		}
		if n > 1 {
			errs = append(errs, field.Forbidden(sf, "may not specify more than 1 volume type per source"))
		}
	}
	return errs
}

// validateKeyToPath checks an item of a ConfigMap or Secret volume.
func validateKeyToPath(kp *corev1.KeyToPath, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if kp.Key == "" {
		errs = append(errs, field.Required(fld.Child("key"), ""))
	}
	if kp.Path == "" {
		errs = append(errs, field.Required(fld.Child("path"), ""))
	}
	errs = append(errs, localNonReservedPath(fld.Child("path"), kp.Path)...)
	return append(errs, validateMode(fld.Child("mode"), kp.Mode)...)
}

// volumeFieldPaths are the fields a downward API volume may show, as
// upstream's (labels and annotations also by key).
var volumeFieldPaths = sets.New("metadata.name", "metadata.namespace", "metadata.labels", "metadata.annotations", "metadata.uid")

// validateDownwardAPIFile checks an item of a downward API volume.
func validateDownwardAPIFile(f *corev1.DownwardAPIVolumeFile, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if f.Path == "" {
		errs = append(errs, field.Required(fld.Child("path"), ""))
	}
	errs = append(errs, localNonReservedPath(fld.Child("path"), f.Path)...)
	switch {
	case f.FieldRef != nil && f.ResourceFieldRef != nil:
		errs = append(errs, field.Invalid(fld, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
	case f.FieldRef != nil:
		errs = append(errs, validateFieldRef(f.FieldRef, volumeFieldPaths, fld.Child("fieldRef"))...)
	case f.ResourceFieldRef == nil:
		errs = append(errs, field.Required(fld, "one of fieldRef and resourceFieldRef is required"))
	}
	return append(errs, validateMode(fld.Child("mode"), f.Mode)...)
}

// validateFieldRef checks a downward API field reference against the
// fields allowed where it is used (labels and annotations by key too).
func validateFieldRef(ref *corev1.ObjectFieldSelector, allowed sets.Set[string], fld *field.Path) field.ErrorList {
	if ref.FieldPath == "" {
		return field.ErrorList{field.Required(fld.Child("fieldPath"), "")}
	}
	if p, key, ok := subscript(ref.FieldPath); ok {
		switch p {
		case "metadata.labels":
			return qualifiedName(fld, key)
		case "metadata.annotations":
			return qualifiedName(fld, strings.ToLower(key))
		}
		return field.ErrorList{field.Invalid(fld, p, "does not support subscript")}
	}
	if !allowed.Has(ref.FieldPath) {
		return field.ErrorList{field.NotSupported(fld.Child("fieldPath"), ref.FieldPath, sets.List(allowed))}
	}
	return nil
}

// envFieldPaths are the fields a container's environment may take from
// its Pod, as upstream's.
var envFieldPaths = sets.New("metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName",
	"status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs")

// validateContainer checks one container (an ephemeral one with
// upstream's further limits); vols are the Pod's volumes by name.
func validateContainer(c *corev1.Container, vols map[string]*corev1.Volume, fld *field.Path, ephemeral bool) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(fld.Child("name"), ""))
	} else {
		errs = append(errs, dnsLabel(fld.Child("name"), c.Name)...)
	}
	if c.Image == "" {
		errs = append(errs, field.Required(fld.Child("image"), ""))
	} else if c.Image != strings.TrimSpace(c.Image) {
		errs = append(errs, field.Invalid(fld.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	if len(c.Ports) > maxContainerPorts {
		errs = append(errs, field.TooMany(fld.Child("ports"), len(c.Ports), maxContainerPorts))
	}
	portNames := sets.New[string]()
	for i, p := range c.Ports {
		idx := fld.Child("ports").Index(i)
		if p.Name != "" {
			for _, msg := range validation.IsValidPortName(p.Name) {
				errs = append(errs, field.Invalid(idx.Child("name"), p.Name, msg))
			}
			if portNames.Has(p.Name) {
				errs = append(errs, field.Duplicate(idx.Child("name"), p.Name))
			}
			portNames.Insert(p.Name)
		}
		for _, msg := range validation.IsValidPortNum(int(p.ContainerPort)) {
			errs = append(errs, field.Invalid(idx.Child("containerPort"), p.ContainerPort, msg))
		}
		if p.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(p.HostPort)) {
				errs = append(errs, field.Invalid(idx.Child("hostPort"), p.HostPort, msg))
			}
		}
		// The API server defaults an empty protocol to TCP, and so does
		// the agent.
		if p.Protocol != "" {
			errs = append(errs, oneOf(idx.Child("protocol"), string(p.Protocol), string(corev1.ProtocolTCP), string(corev1.ProtocolUDP), string(corev1.ProtocolSCTP))...)
		}
	}
	if len(c.Env) > maxContainerEnv {
		errs = append(errs, field.TooMany(fld.Child("env"), len(c.Env), maxContainerEnv))
	}
	if len(c.EnvFrom) > maxContainerEnvFrom {
		errs = append(errs, field.TooMany(fld.Child("envFrom"), len(c.EnvFrom), maxContainerEnvFrom))
	}
	for i, e := range c.Env {
		idx := fld.Child("env").Index(i)
		errs = append(errs, envName(idx.Child("name"), e.Name)...)
		errs = append(errs, validateEnvValueFrom(e, idx.Child("valueFrom"))...)
	}
	for i, ef := range c.EnvFrom {
		idx := fld.Child("envFrom").Index(i)
		if ef.Prefix != "" {
			errs = append(errs, envName(idx.Child("prefix"), ef.Prefix)...)
		}
		switch {
		case ef.ConfigMapRef != nil && ef.SecretRef != nil:
			errs = append(errs, field.Invalid(idx, "", "may not have more than one field specified at a time"))
		case ef.ConfigMapRef != nil:
			errs = append(errs, objectName(idx.Child("configMapRef", "name"), ef.ConfigMapRef.Name)...)
		case ef.SecretRef != nil:
			errs = append(errs, objectName(idx.Child("secretRef", "name"), ef.SecretRef.Name)...)
		default:
			errs = append(errs, field.Invalid(idx, "", "must specify one of: `configMapRef` or `secretRef`"))
		}
	}
	if len(c.VolumeMounts) > maxContainerMounts {
		errs = append(errs, field.TooMany(fld.Child("volumeMounts"), len(c.VolumeMounts), maxContainerMounts))
	}
	mountPaths := sets.New[string]()
	for i, vm := range c.VolumeMounts {
		idx := fld.Child("volumeMounts").Index(i)
		if vm.Name == "" {
			errs = append(errs, field.Required(idx.Child("name"), ""))
		} else if _, ok := vols[vm.Name]; !ok {
			errs = append(errs, field.NotFound(idx.Child("name"), vm.Name))
		}
		if vm.MountPath == "" {
			errs = append(errs, field.Required(idx.Child("mountPath"), ""))
		}
		if mountPaths.Has(vm.MountPath) {
			errs = append(errs, field.Invalid(idx.Child("mountPath"), vm.MountPath, "must be unique"))
		}
		mountPaths.Insert(vm.MountPath)
		if vm.SubPath != "" {
			errs = append(errs, localDescendingPath(idx.Child("subPath"), vm.SubPath)...)
		}
		if vm.SubPathExpr != "" {
			if vm.SubPath != "" {
				errs = append(errs, field.Invalid(idx.Child("subPathExpr"), vm.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
			}
			errs = append(errs, localDescendingPath(idx.Child("subPathExpr"), vm.SubPathExpr)...)
		}
		if ephemeral && (vm.SubPath != "" || vm.SubPathExpr != "") {
			errs = append(errs, field.Forbidden(idx.Child("subPath"), "cannot be set for an Ephemeral Container"))
		}
	}
	if sc := c.SecurityContext; sc != nil {
		errs = append(errs, validateIDs(fld.Child("securityContext"), sc.RunAsUser, sc.RunAsGroup)...)
	}
	return errs
}

// validateEnvValueFrom checks where an environment variable takes its
// value from: one source, and names the API can look up.
func validateEnvValueFrom(e corev1.EnvVar, fld *field.Path) field.ErrorList {
	vf := e.ValueFrom
	if vf == nil {
		return nil
	}
	var errs field.ErrorList
	n := 0
	if vf.FieldRef != nil {
		n++
		errs = append(errs, validateFieldRef(vf.FieldRef, envFieldPaths, fld.Child("fieldRef"))...)
	}
	if vf.ResourceFieldRef != nil {
		n++
	}
	if r := vf.ConfigMapKeyRef; r != nil {
		n++
		errs = append(errs, objectName(fld.Child("configMapKeyRef", "name"), r.Name)...)
		errs = append(errs, configKey(fld.Child("configMapKeyRef", "key"), r.Key)...)
	}
	if r := vf.SecretKeyRef; r != nil {
		n++
		errs = append(errs, objectName(fld.Child("secretKeyRef", "name"), r.Name)...)
		errs = append(errs, configKey(fld.Child("secretKeyRef", "key"), r.Key)...)
	}
	if vf.FileKeyRef != nil {
		n++
	}
	switch {
	case n == 0:
		errs = append(errs, field.Invalid(fld, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
	case e.Value != "":
		errs = append(errs, field.Invalid(fld, "", "may not be specified when `value` is not empty"))
	case n > 1:
		errs = append(errs, field.Invalid(fld, "", "may not have more than one field specified at a time"))
	}
	return errs
}

// validateDNSConfig checks what goes into the Pod's resolv.conf, with
// upstream's limits (those of the C library's resolver) and its relaxed
// search domains.
func validateDNSConfig(dc *corev1.PodDNSConfig, policy corev1.DNSPolicy, fld *field.Path) field.ErrorList {
	if policy == corev1.DNSNone && (dc == nil || len(dc.Nameservers) == 0) {
		return field.ErrorList{field.Required(fld.Child("nameservers"), "must provide at least one DNS nameserver when `dnsPolicy` is None")}
	}
	if dc == nil {
		return nil
	}
	var errs field.ErrorList
	if len(dc.Nameservers) > maxDNSNameservers {
		errs = append(errs, field.TooMany(fld.Child("nameservers"), len(dc.Nameservers), maxDNSNameservers))
	}
	for i, ns := range dc.Nameservers {
		errs = append(errs, validation.IsValidIPForLegacyField(fld.Child("nameservers").Index(i), ns, false, nil)...)
	}
	if len(dc.Searches) > maxDNSSearchPaths {
		errs = append(errs, field.TooMany(fld.Child("searches"), len(dc.Searches), maxDNSSearchPaths))
	}
	if n := len(strings.Join(dc.Searches, " ")); n > maxDNSSearchListLen {
		errs = append(errs, field.TooLong(fld.Child("searches"), n, maxDNSSearchListLen))
	}
	for i, s := range dc.Searches {
		if s == "." {
			continue
		}
		s = strings.TrimSuffix(s, ".")
		for _, msg := range validation.IsDNS1123SubdomainWithUnderscore(s) {
			errs = append(errs, field.Invalid(fld.Child("searches").Index(i), s, msg))
		}
	}
	for i, o := range dc.Options {
		if o.Name == "" {
			errs = append(errs, field.Required(fld.Child("options").Index(i), "must not be empty"))
		}
	}
	return errs
}

// validateIDs checks the user and group a container runs as.
func validateIDs(fld *field.Path, user, group *int64) field.ErrorList {
	var errs field.ErrorList
	if user != nil {
		errs = append(errs, idErrs(fld.Child("runAsUser"), *user, validation.IsValidUserID)...)
	}
	if group != nil {
		errs = append(errs, idErrs(fld.Child("runAsGroup"), *group, validation.IsValidGroupID)...)
	}
	return errs
}

func idErrs(fld *field.Path, id int64, check func(int64) []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range check(id) {
		errs = append(errs, field.Invalid(fld, id, msg))
	}
	return errs
}

// validateMode checks a file mode of a volume: 0 to 0777.
func validateMode(fld *field.Path, m *int32) field.ErrorList {
	if m != nil && (*m < 0 || *m > 0o777) {
		return field.ErrorList{field.Invalid(fld, *m, "must be a number between 0 and 0777 (octal), both inclusive")}
	}
	return nil
}

// localDescendingPath is upstream's validateLocalDescendingPath: a
// relative path with no ".." element (a subPath).
func localDescendingPath(fld *field.Path, p string) field.ErrorList {
	var errs field.ErrorList
	if path.IsAbs(p) {
		errs = append(errs, field.Invalid(fld, p, "must be a relative path"))
	}
	return append(errs, noBacksteps(fld, p)...)
}

// localNonReservedPath is upstream's ValidateLocalNonReservedPath: a
// local descending path that does not start with ".." either (the
// atomic writer's own names start so).
func localNonReservedPath(fld *field.Path, p string) field.ErrorList {
	errs := localDescendingPath(fld, p)
	if strings.HasPrefix(p, "..") && !strings.HasPrefix(p, "../") {
		errs = append(errs, field.Invalid(fld, p, "must not start with '..'"))
	}
	return errs
}

// noBacksteps refuses a path with a ".." element.
func noBacksteps(fld *field.Path, p string) field.ErrorList {
	for _, item := range strings.Split(p, "/") {
		if item == ".." {
			return field.ErrorList{field.Invalid(fld, p, "must not contain '..'")}
		}
	}
	return nil
}

func oneOf(fld *field.Path, v string, allowed ...string) field.ErrorList {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(fld, v, allowed)}
}

func dnsLabel(fld *field.Path, v string) field.ErrorList {
	return msgErrs(fld, v, validation.IsDNS1123Label(v))
}

func dnsSubdomain(fld *field.Path, v string) field.ErrorList {
	return msgErrs(fld, v, validation.IsDNS1123Subdomain(v))
}

// objectName is a ConfigMap's or Secret's name, as the API takes them.
func objectName(fld *field.Path, v string) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(fld, "")}
	}
	return dnsSubdomain(fld, v)
}

func configKey(fld *field.Path, v string) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(fld, "")}
	}
	return msgErrs(fld, v, validation.IsConfigMapKey(v))
}

func envName(fld *field.Path, v string) field.ErrorList {
	return msgErrs(fld, v, validation.IsRelaxedEnvVarName(v))
}

func qualifiedName(fld *field.Path, v string) field.ErrorList {
	return msgErrs(fld, v, validation.IsQualifiedName(v))
}

func msgErrs(fld *field.Path, v string, msgs []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(fld, v, msg))
	}
	return errs
}

// validRequestNames checks the namespace, Pod and container names of a
// request to the kubelet API (logs, exec, attach, port-forward), which
// come from its URL, before any of them is looked up: only names the API
// server could have stored name anything on the node.
func validRequestNames(namespace, pod, container string) error {
	var errs field.ErrorList
	errs = append(errs, dnsLabel(field.NewPath("namespace"), namespace)...)
	errs = append(errs, dnsSubdomain(field.NewPath("pod"), pod)...)
	if container != "" {
		errs = append(errs, dnsLabel(field.NewPath("container"), container)...)
	}
	return errs.ToAggregate()
}
