package scenario

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestImages(t *testing.T) {
	pod := func(images ...string) corev1.PodSpec {
		var spec corev1.PodSpec
		for _, i := range images {
			spec.Containers = append(spec.Containers, corev1.Container{Image: i})
		}
		return spec
	}
	template := func(images ...string) corev1.PodTemplateSpec { return corev1.PodTemplateSpec{Spec: pod(images...)} }
	withInit := pod("web:1")
	withInit.InitContainers = []corev1.Container{{Image: "init:1"}}
	rcTemplate := template("rc:1")
	for _, tc := range []struct {
		name string
		obj  runtime.Object
		want []string
	}{
		{"pod, init containers first", &corev1.Pod{Spec: withInit}, []string{"init:1", "web:1"}},
		{"deployment", &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: template("a:1", "b:2")}}, []string{"a:1", "b:2"}},
		{"daemonset", &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: template("ds:1")}}, []string{"ds:1"}},
		{"statefulset", &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Template: template("db:1")}}, []string{"db:1"}},
		{"replicaset", &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Template: template("rs:1")}}, []string{"rs:1"}},
		{"replication controller", &corev1.ReplicationController{Spec: corev1.ReplicationControllerSpec{Template: &rcTemplate}}, []string{"rc:1"}},
		{"replication controller without a template", &corev1.ReplicationController{}, nil},
		{"job", &batchv1.Job{Spec: batchv1.JobSpec{Template: template("job:1")}}, []string{"job:1"}},
		{"cronjob", &batchv1.CronJob{Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: template("cron:1")}}}}, []string{"cron:1"}},
		{"service", &corev1.Service{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (Object{Typed: tc.obj}).Images(); !slices.Equal(got, tc.want) {
				t.Errorf("images %q, want %q", got, tc.want)
			}
		})
	}
	// A catalog's images are its scenarios', once each, sorted.
	cat := &Catalog{Scenarios: []*Scenario{
		{Manifests: []Manifest{{Objects: []Object{{Typed: &corev1.Pod{Spec: pod("z:1", "a:1")}}, {Typed: &corev1.Service{}}}}}},
		{Manifests: []Manifest{{Objects: []Object{{Typed: &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: template("a:1", "m:1", "")}}}}}}},
	}}
	if got, want := cat.Images(), []string{"a:1", "m:1", "z:1"}; !slices.Equal(got, want) {
		t.Errorf("catalog images %q, want %q", got, want)
	}
}
