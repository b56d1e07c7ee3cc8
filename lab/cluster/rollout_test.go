package cluster

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

func TestDaemonSetRolledOut(t *testing.T) {
	for _, tc := range []struct {
		name string
		gen  int64
		st   appsv1.DaemonSetStatus
		want bool
	}{
		{"done", 2, appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberReady: 3}, true},
		{"change not seen", 3, appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberReady: 3}, false},
		{"one Pod on the old template", 2, appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 2, NumberReady: 3}, false},
		{"one Pod not ready", 2, appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberReady: 2}, false},
		{"one Pod unavailable", 2, appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberReady: 3, NumberUnavailable: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := &appsv1.DaemonSet{Status: tc.st}
			ds.Generation = tc.gen
			if got, state := DaemonSetRolledOut(ds); got != tc.want {
				t.Errorf("DaemonSetRolledOut = %v (%s), want %v", got, state, tc.want)
			}
		})
	}
}
