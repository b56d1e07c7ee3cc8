package grade

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/util/jsonpath"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/scenario"
)

// Objects reads the objects a check refers to.
type Objects interface {
	// Get returns the object named by ref (none when it does not exist),
	// or every object matching its label selector.
	Get(ctx context.Context, ref scenario.ObjectRef) ([]*unstructured.Unstructured, error)
}

// DynamicObjects reads objects with a dynamic client, mapping kinds to
// resources with a RESTMapper.
type DynamicObjects struct {
	Client dynamic.Interface
	Mapper meta.RESTMapper
}

// NewObjects returns DynamicObjects for c, with a discovery-backed mapper.
func NewObjects(c cluster.Cluster) (*DynamicObjects, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", c.Name(), err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &DynamicObjects{Client: dyn, Mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

// Get implements Objects.
func (o *DynamicObjects) Get(ctx context.Context, ref scenario.ObjectRef) ([]*unstructured.Unstructured, error) {
	gvk, err := ref.GVK()
	if err != nil {
		return nil, err
	}
	m, err := o.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("the cluster serves no %s: %w", ref.Kind, err)
	}
	var ri dynamic.ResourceInterface = o.Client.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = o.Client.Resource(m.Resource).Namespace(refNamespace(ref))
	}
	if ref.Name != "" {
		obj, err := ri.Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", describeRef(ref), err)
		}
		return []*unstructured.Unstructured{obj}, nil
	}
	list, err := ri.List(ctx, metav1.ListOptions{LabelSelector: ref.LabelSelector})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", describeRef(ref), err)
	}
	out := make([]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func refNamespace(ref scenario.ObjectRef) string {
	if ref.Namespace == "" {
		return "default"
	}
	return ref.Namespace
}

// describeRef names the objects of ref for the learner: "Service shop/web"
// or "EndpointSlices in shop with kubernetes.io/service-name=web".
func describeRef(ref scenario.ObjectRef) string {
	scoped := scenario.ClusterScoped(ref.Kind)
	switch {
	case ref.Name != "" && scoped:
		return fmt.Sprintf("%s %s", ref.Kind, ref.Name)
	case ref.Name != "":
		return fmt.Sprintf("%s %s/%s", ref.Kind, refNamespace(ref), ref.Name)
	case scoped:
		return fmt.Sprintf("%ss with %s", ref.Kind, ref.LabelSelector)
	}
	return fmt.Sprintf("%ss in %s with %s", ref.Kind, refNamespace(ref), ref.LabelSelector)
}

// jsonPathValues evaluates a kubectl JSONPath on obj and returns the
// values it yields, formatted as kubectl prints them (strings as they are,
// maps and lists as JSON). Literal text between {...} is not a value.
func jsonPathValues(obj map[string]any, expr string) ([]string, error) {
	j := jsonpath.New("check").AllowMissingKeys(true)
	if err := j.Parse(expr); err != nil {
		return nil, fmt.Errorf("JSONPath %s: %w", expr, err)
	}
	// A null field (an EndpointSlice without endpoints has endpoints:
	// null) reads as a missing one, so that filters on it yield nothing.
	results, err := j.FindResults(dropNulls(obj))
	if err != nil {
		return nil, fmt.Errorf("JSONPath %s: %w", expr, err)
	}
	p, err := jsonpath.Parse("check", expr)
	if err != nil {
		return nil, err
	}
	nodes := p.Root.Nodes
	var out []string
	for i, vs := range results {
		if len(results) == len(nodes) && nodes[i].Type() == jsonpath.NodeText {
			continue
		}
		for _, v := range vs {
			s, err := formatValue(v)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// dropNulls returns v without null map entries, recursively.
func dropNulls[T any](v T) T {
	var walk func(any) any
	walk = func(x any) any {
		switch t := x.(type) {
		case map[string]any:
			out := make(map[string]any, len(t))
			for k, e := range t {
				if e != nil {
					out[k] = walk(e)
				}
			}
			return out
		case []any:
			out := make([]any, len(t))
			for i, e := range t {
				out[i] = walk(e)
			}
			return out
		}
		return x
	}
	return walk(v).(T)
}

func formatValue(v reflect.Value) (string, error) {
	for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "", nil
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.String:
		return v.String(), nil
	case reflect.Map, reflect.Slice, reflect.Struct:
		b, err := json.Marshal(v.Interface())
		return string(b), err
	}
	return fmt.Sprint(v.Interface()), nil
}

// joinValues joins the values of every object with spaces.
func joinValues(objs []*unstructured.Unstructured, expr string) (string, []string, error) {
	var all []string
	for _, o := range objs {
		vs, err := jsonPathValues(o.Object, expr)
		if err != nil {
			return "", nil, err
		}
		all = append(all, vs...)
	}
	return strings.TrimSpace(strings.Join(all, " ")), all, nil
}

// quote shortens a value for a message.
func quote(s string) string {
	const max = 200
	if len(s) > max {
		s = s[:max] + "…"
	}
	return fmt.Sprintf("%q", s)
}
