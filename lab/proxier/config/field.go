package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
)

// CheckField tells whether path names a field of KubeProxyConfiguration:
// its JSON names joined by dots, as nftables.minSyncPeriod.
func CheckField(path string) error {
	t := reflect.TypeFor[kubeproxyconfig.KubeProxyConfiguration]()
	parts := strings.Split(path, ".")
	for i, part := range parts {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return fmt.Errorf("%s is not an object of KubeProxyConfiguration, so it has no field %s", strings.Join(parts[:i], "."), part)
		}
		f, ok := jsonField(t, part)
		if !ok {
			return fmt.Errorf("KubeProxyConfiguration has no field %s", strings.Join(parts[:i+1], "."))
		}
		t = f.Type
	}
	return nil
}

// jsonField finds t's field whose JSON name is name, in embedded structs
// too (TypeMeta's apiVersion and kind).
func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for _, f := range reflect.VisibleFields(t) {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name && !f.Anonymous {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// Field returns the value at path (see CheckField) of cfg as kube-proxy's
// JSON form writes it: durations as text (1s), numbers as float64, and
// found false when the field is unset.
func Field(cfg *kubeproxyconfig.KubeProxyConfiguration, path string) (v any, found bool, err error) {
	if err := CheckField(path); err != nil {
		return nil, false, err
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, false, err
	}
	var cur any
	if err := json.Unmarshal(b, &cur); err != nil {
		return nil, false, err
	}
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		if cur, ok = m[part]; !ok || cur == nil {
			return nil, false, nil
		}
	}
	return cur, true, nil
}
