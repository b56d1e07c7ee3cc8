package scenario

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// Images are the container images the object's Pods run, in the order of
// its containers (init containers first); none for an object without Pods.
func (o Object) Images() []string {
	var spec *corev1.PodSpec
	switch t := o.Typed.(type) {
	case *corev1.Pod:
		spec = &t.Spec
	case *corev1.ReplicationController:
		if t.Spec.Template != nil {
			spec = &t.Spec.Template.Spec
		}
	case *appsv1.Deployment:
		spec = &t.Spec.Template.Spec
	case *appsv1.ReplicaSet:
		spec = &t.Spec.Template.Spec
	case *appsv1.StatefulSet:
		spec = &t.Spec.Template.Spec
	case *appsv1.DaemonSet:
		spec = &t.Spec.Template.Spec
	case *batchv1.Job:
		spec = &t.Spec.Template.Spec
	case *batchv1.CronJob:
		spec = &t.Spec.JobTemplate.Spec.Template.Spec
	}
	if spec == nil {
		return nil
	}
	var out []string
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		out = append(out, c.Image)
	}
	for _, c := range spec.EphemeralContainers {
		out = append(out, c.Image)
	}
	return out
}

// Images are the container images the scenario's setup runs, sorted.
func (s *Scenario) Images() []string {
	var out []string
	for _, m := range s.Manifests {
		for _, o := range m.Objects {
			out = append(out, o.Images()...)
		}
	}
	return sortedSet(out)
}

// Images are the container images the catalog's scenarios run, sorted.
func (c *Catalog) Images() []string {
	var out []string
	for _, s := range c.Scenarios {
		out = append(out, s.Images()...)
	}
	return sortedSet(out)
}

// sortedSet sorts refs and drops the empty and repeated ones.
func sortedSet(refs []string) []string {
	refs = slices.DeleteFunc(refs, func(r string) bool { return r == "" })
	slices.Sort(refs)
	return slices.Compact(refs)
}
