package grade

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svclab/svclab/lab/proxier/config"
	"github.com/svclab/svclab/lab/scenario"
)

// kubeProxyConfigRef is where kube-proxy's configuration lives, as
// kubeadm (and svclab's clusters) put it: config.conf of this ConfigMap.
var kubeProxyConfigRef = scenario.ObjectRef{Kind: "ConfigMap", Namespace: "kube-system", Name: "kube-proxy"}

// kubeProxyConfig evaluates a kubeProxyConfig check: the field as
// kube-proxy reads config.conf (its strict loader, its defaults), so that
// any spelling kube-proxy accepts passes and a text that merely looks
// right (a field indented into the wrong section) does not.
func (g *Grader) kubeProxyConfig(ctx context.Context, k *scenario.KubeProxyConfigCheck) (string, error) {
	objs, err := g.Objects.Get(ctx, kubeProxyConfigRef)
	if err != nil {
		return "", err
	}
	if len(objs) == 0 {
		return "", failf("there is no ConfigMap kube-system/kube-proxy: kube-proxy has no configuration to read")
	}
	text, _, _ := unstructured.NestedString(objs[0].Object, "data", "config.conf")
	if text == "" {
		return "", failf("the kube-proxy ConfigMap has no config.conf: kube-proxy has no configuration to read")
	}
	cfg, err := config.Load([]byte(text))
	if err != nil {
		return "", failf("kube-proxy cannot read config.conf of the kube-proxy ConfigMap (it would not start with it): %v", err)
	}
	config.SetDefaults(cfg)
	v, found, err := config.Field(cfg, k.Field)
	if err != nil {
		return "", err
	}
	ok, shown, err := k.Judge(v, found)
	if err != nil {
		return "", err
	}
	got := fmt.Sprintf("%s is %s in config.conf of the kube-proxy ConfigMap, as kube-proxy reads it", k.Field, quote(shown))
	if !found || shown == "" {
		got = fmt.Sprintf("%s is not set in config.conf of the kube-proxy ConfigMap", k.Field)
	}
	if !ok {
		return "", failExpected(got, configExpectation(k))
	}
	return got, nil
}

func configExpectation(k *scenario.KubeProxyConfigCheck) string {
	switch k.Op {
	case scenario.OpEquals:
		return "expected " + quote(string(k.Value))
	case scenario.OpNotEquals:
		return "expected anything but " + quote(string(k.Value))
	case scenario.OpAtMost:
		return "expected at most " + string(k.Value)
	case scenario.OpAtLeast:
		return "expected at least " + string(k.Value)
	}
	return ""
}
