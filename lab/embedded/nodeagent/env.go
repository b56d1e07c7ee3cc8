//go:build linux

package nodeagent

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// envSource reads what a container's environment refers to.
type envSource interface {
	configMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error)
	secret(ctx context.Context, ns, name string) (*corev1.Secret, error)
	services(ctx context.Context, ns string) ([]corev1.Service, error)
}

// clientEnvSource reads ConfigMaps and Secrets from the API server and
// Services from the agent's cache, as the kubelet does (every container
// start lists them).
type clientEnvSource struct {
	client kubernetes.Interface
	svcs   corelisters.ServiceLister
}

func (s clientEnvSource) configMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return s.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

func (s clientEnvSource) secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	return s.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

func (s clientEnvSource) services(ctx context.Context, ns string) ([]corev1.Service, error) {
	l, err := s.svcs.Services(ns).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]corev1.Service, 0, len(l))
	for _, svc := range l {
		out = append(out, *svc)
	}
	return out, nil
}

// onceEnvSource reads each ConfigMap and Secret from its source once.
type onceEnvSource struct {
	envSource
	cms     map[string]onceResult[*corev1.ConfigMap]
	secrets map[string]onceResult[*corev1.Secret]
}

type onceResult[T any] struct {
	v   T
	err error
}

func (s *onceEnvSource) configMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	r, ok := s.cms[ns+"/"+name]
	if !ok {
		r.v, r.err = s.envSource.configMap(ctx, ns, name)
		s.cms[ns+"/"+name] = r
	}
	return r.v, r.err
}

func (s *onceEnvSource) secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	r, ok := s.secrets[ns+"/"+name]
	if !ok {
		r.v, r.err = s.envSource.secret(ctx, ns, name)
		s.secrets[ns+"/"+name] = r
	}
	return r.v, r.err
}

// envWarning is something about the environment the kubelet reports as an
// event without failing the container (invalid keys in envFrom).
type envWarning struct{ reason, message string }

// containerEnv resolves a container's environment as the kubelet does when
// it starts the container: service variables, then envFrom in order, then
// env in order, each value's $(VAR) references expanded against what is
// defined before it. pod must carry its status (status.podIP is known by
// then). A missing ConfigMap, Secret or key that is not optional is an
// error: the container waits in CreateContainerConfigError.
func containerEnv(ctx context.Context, src envSource, pod *corev1.Pod, c *corev1.Container) (map[string]string, []envWarning, error) {
	// Each ConfigMap and Secret is read once however often the
	// environment names it.
	src = &onceEnvSource{envSource: src, cms: map[string]onceResult[*corev1.ConfigMap]{}, secrets: map[string]onceResult[*corev1.Secret]{}}
	svcEnv, err := serviceEnv(ctx, src, pod)
	if err != nil {
		return nil, nil, fmt.Errorf("listing services for the container's environment: %w", err)
	}
	env := map[string]string{}
	// size is what env holds as Linux counts it ("KEY=VALUE" and its NUL):
	// the environment stops growing once no program could be started
	// with it.
	size := 0
	set := func(k, v string) error {
		if old, ok := env[k]; ok {
			size -= len(k) + len(old) + 2
		}
		env[k] = v
		if size += len(k) + len(v) + 2; size > maxArgTotal {
			return errArgsTooLarge
		}
		return nil
	}
	var warns []envWarning
	for _, ef := range c.EnvFrom {
		var data map[string]string
		var kind, name string
		var opt bool
		switch {
		case ef.ConfigMapRef != nil:
			kind, name, opt = "configmap", ef.ConfigMapRef.Name, optional(ef.ConfigMapRef.Optional)
			cm, err := src.configMap(ctx, pod.Namespace, name)
			if err != nil {
				if opt && apierrors.IsNotFound(err) {
					continue
				}
				return nil, warns, fmt.Errorf("%s %q not found", kind, name)
			}
			data = cm.Data
		case ef.SecretRef != nil:
			kind, name, opt = "secret", ef.SecretRef.Name, optional(ef.SecretRef.Optional)
			s, err := src.secret(ctx, pod.Namespace, name)
			if err != nil {
				if opt && apierrors.IsNotFound(err) {
					continue
				}
				return nil, warns, fmt.Errorf("%s %q not found", kind, name)
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		default:
			continue
		}
		var invalid []string
		for k, v := range data {
			key := ef.Prefix + k
			if len(validation.IsRelaxedEnvVarName(key)) != 0 {
				invalid = append(invalid, key)
				continue
			}
			if err := set(key, v); err != nil {
				return nil, warns, err
			}
		}
		if len(invalid) > 0 {
			sort.Strings(invalid)
			// The event names a few: a ConfigMap may hold thousands.
			const named = 20
			if len(invalid) > named {
				invalid = append(invalid[:named], fmt.Sprintf("and %d more", len(invalid)-named))
			}
			warns = append(warns, envWarning{"InvalidEnvironmentVariableNames",
				fmt.Sprintf("Keys [%s] from the EnvFrom %s %s/%s were skipped since they are considered invalid environment variable names.",
					strings.Join(invalid, ", "), kind, pod.Namespace, name)})
		}
	}
	lookup := func(name string) (string, bool) {
		if v, ok := env[name]; ok {
			return v, true
		}
		v, ok := svcEnv[name]
		return v, ok
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			if err := set(e.Name, expandVars(e.Value, lookup)); err != nil {
				return nil, warns, err
			}
			continue
		}
		v, ok, err := envValueFrom(ctx, src, pod, c, e)
		if err != nil {
			return nil, warns, err
		}
		if ok {
			if err := set(e.Name, v); err != nil {
				return nil, warns, err
			}
		}
	}
	for k, v := range svcEnv {
		if _, ok := env[k]; !ok {
			if err := set(k, v); err != nil {
				return nil, warns, err
			}
		}
	}
	return env, warns, nil
}

func envValueFrom(ctx context.Context, src envSource, pod *corev1.Pod, c *corev1.Container, e corev1.EnvVar) (string, bool, error) {
	vf := e.ValueFrom
	switch {
	case vf.FieldRef != nil:
		v, err := fieldValue(pod, vf.FieldRef.FieldPath)
		return v, err == nil, err
	case vf.ResourceFieldRef != nil:
		v, err := resourceValue(c, vf.ResourceFieldRef)
		return v, err == nil, err
	case vf.ConfigMapKeyRef != nil:
		ref := vf.ConfigMapKeyRef
		cm, err := src.configMap(ctx, pod.Namespace, ref.Name)
		if err != nil {
			if optional(ref.Optional) && apierrors.IsNotFound(err) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("configmap %q not found", ref.Name)
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
		}
		return v, true, nil
	case vf.SecretKeyRef != nil:
		ref := vf.SecretKeyRef
		s, err := src.secret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			if optional(ref.Optional) && apierrors.IsNotFound(err) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("secret %q not found", ref.Name)
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			if optional(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
		}
		return string(v), true, nil
	}
	return "", false, nil
}

// resourceValue is a resourceFieldRef: the container's limit (or, with
// no limit, the node's capacity, which lab nodes do not meter: 0 is
// reported for cpu and memory then) or request, divided by the divisor.
func resourceValue(c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	var q resource.Quantity
	switch ref.Resource {
	case "limits.cpu":
		q = c.Resources.Limits[corev1.ResourceCPU]
	case "limits.memory":
		q = c.Resources.Limits[corev1.ResourceMemory]
	case "limits.ephemeral-storage":
		q = c.Resources.Limits[corev1.ResourceEphemeralStorage]
	case "requests.cpu":
		q = c.Resources.Requests[corev1.ResourceCPU]
	case "requests.memory":
		q = c.Resources.Requests[corev1.ResourceMemory]
	case "requests.ephemeral-storage":
		q = c.Resources.Requests[corev1.ResourceEphemeralStorage]
	default:
		return "", fmt.Errorf("resource %q is not supported in resourceFieldRef", ref.Resource)
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if strings.HasSuffix(ref.Resource, "cpu") {
		// As the kubelet: cpu is rounded up to whole divisor units.
		v := (q.MilliValue() + divisor.MilliValue() - 1) / divisor.MilliValue()
		return strconv.FormatInt(v, 10), nil
	}
	v := (q.Value() + divisor.Value() - 1) / divisor.Value()
	return strconv.FormatInt(v, 10), nil
}

// serviceEnv is the Docker-links-style variables of the Services a
// container sees: the kubernetes Service always, and the pod's
// namespace's Services unless enableServiceLinks is false.
func serviceEnv(ctx context.Context, src envSource, pod *corev1.Pod) (map[string]string, error) {
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	var svcs []corev1.Service
	if links {
		l, err := src.services(ctx, pod.Namespace)
		if err != nil {
			return nil, err
		}
		svcs = append(svcs, l...)
	}
	if pod.Namespace != metav1.NamespaceDefault || !links {
		l, err := src.services(ctx, metav1.NamespaceDefault)
		if err != nil {
			return nil, err
		}
		for _, s := range l {
			if s.Name == "kubernetes" {
				svcs = append(svcs, s)
			}
		}
	}
	out := map[string]string{}
	for _, s := range svcs {
		if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == corev1.ClusterIPNone {
			continue
		}
		name := strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
		out[name+"_SERVICE_HOST"] = s.Spec.ClusterIP
		if len(s.Spec.Ports) == 0 {
			continue
		}
		out[name+"_SERVICE_PORT"] = strconv.Itoa(int(s.Spec.Ports[0].Port))
		for i, p := range s.Spec.Ports {
			if p.Name != "" {
				out[name+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_"))] = strconv.Itoa(int(p.Port))
			}
			proto := strings.ToLower(string(p.Protocol))
			if proto == "" {
				proto = "tcp"
			}
			url := fmt.Sprintf("%s://%s:%d", proto, s.Spec.ClusterIP, p.Port)
			if i == 0 {
				out[name+"_PORT"] = url
			}
			prefix := fmt.Sprintf("%s_PORT_%d_%s", name, p.Port, strings.ToUpper(proto))
			out[prefix] = url
			out[prefix+"_PROTO"] = proto
			out[prefix+"_PORT"] = strconv.Itoa(int(p.Port))
			out[prefix+"_ADDR"] = s.Spec.ClusterIP
		}
	}
	return out, nil
}

// Linux starts no program with an argument or environment string longer
// than MAX_ARG_STRLEN (32 pages) or with more than a quarter of its stack
// limit of them (2 MiB under the usual 8 MiB): a container whose command
// or environment is larger could never start. The agent neither builds
// nor writes into a bundle anything larger (one Pod value referenced a
// million times through $(VAR) would otherwise take that many copies of
// the host's memory).
const (
	maxArgString = 32 * 4096
	maxArgTotal  = 2 << 20
)

// errArgsTooLarge is what a container whose command or environment Linux
// would refuse waits with.
var errArgsTooLarge = fmt.Errorf("the container's command and environment are larger than Linux starts a program with (each string at most %d KiB, together at most %d MiB)",
	maxArgString>>10, maxArgTotal>>20)

// checkArgSizes checks a container's command and environment against
// what Linux starts a program with.
func checkArgSizes(args, env []string) error {
	total := 0
	for _, list := range [][]string{args, env} {
		for _, s := range list {
			if len(s) >= maxArgString {
				return errArgsTooLarge
			}
			total += len(s) + 1
		}
	}
	if total > maxArgTotal {
		return errArgsTooLarge
	}
	return nil
}

// expandVars substitutes $(VAR) references as the kubelet does: a
// reference to a defined variable is replaced, an undefined one is left as
// it is, and $$ escapes a $ (so $$(VAR) gives the literal $(VAR)). The
// result stops growing past maxArgString (no program could be given it):
// checkArgSizes then refuses it.
func expandVars(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() <= maxArgString; i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '(':
			if end := strings.IndexByte(s[i+2:], ')'); end >= 0 {
				name := s[i+2 : i+2+end]
				if v, ok := lookup(name); ok {
					b.WriteString(v[:min(len(v), maxArgString+1-b.Len())])
				} else {
					b.WriteString("$(" + name + ")")
				}
				i += end + 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// envList renders env as KEY=VALUE, sorted.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
