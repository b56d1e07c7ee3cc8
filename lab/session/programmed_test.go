package session

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svclab/svclab/lab/views/viewstest"
)

func TestSliceLag(t *testing.T) {
	pod := func(name string, ready, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID(name + "-uid"), Labels: map[string]string{"app": "web"}},
			Status: corev1.PodStatus{PodIP: "10.244.1.7", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}}
		if ready {
			p.Status.Conditions[0].Status = corev1.ConditionTrue
		}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		return p
	}
	svc := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}}}
	slice := func(pods ...string) discovery.EndpointSlice {
		s := discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-x", Labels: map[string]string{discovery.LabelServiceName: "web"}}}
		for _, p := range pods {
			s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{"10.244.1.7"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: p, UID: types.UID(p + "-uid")}})
		}
		return s
	}
	for _, tc := range []struct {
		name   string
		pods   []corev1.Pod
		slices []discovery.EndpointSlice
		want   string
	}{
		{"caught up", []corev1.Pod{pod("a", true, false), pod("b", false, false)}, []discovery.EndpointSlice{slice("a", "b")}, ""},
		{"a Pod gone", []corev1.Pod{pod("a", true, false)}, []discovery.EndpointSlice{slice("a", "old")},
			"EndpointSlice shop/web-x still lists Pod old, which is gone"},
		{"a ready Pod not listed yet", []corev1.Pod{pod("a", true, false), pod("new", true, false)}, []discovery.EndpointSlice{slice("a")},
			"the EndpointSlices of Service shop/web do not list its ready Pod new yet"},
		{"an unready or terminating Pod not listed", []corev1.Pod{pod("a", true, false), pod("starting", false, false), pod("leaving", true, true)},
			[]discovery.EndpointSlice{slice("a")}, ""},
		{"no slice yet", []corev1.Pod{pod("a", true, false)}, nil,
			"the EndpointSlices of Service shop/web do not list its ready Pod a yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sliceLag(tc.pods, []corev1.Service{svc}, tc.slices); got != tc.want {
				t.Errorf("sliceLag = %q, want %q", got, tc.want)
			}
		})
	}
}

// waitProgrammed returns once every proxier has programmed the API's
// newest Service or EndpointSlice change, or is held back by a fault; it
// keeps waiting while one lags; a proxier that cannot say gets a pause.
func TestWaitProgrammed(t *testing.T) {
	for _, tc := range []struct {
		name, answer, faults string
		wantErr              error
		minWait              time.Duration
	}{
		{"caught up", `{"resourceVersion":"42"}`, "", nil, 0},
		{"ahead", `{"resourceVersion":"50"}`, "", nil, 0},
		{"behind", `{"resourceVersion":"41"}`, "", context.DeadlineExceeded, 0},
		{"behind, held by a fault it names", `{"resourceVersion":"41","held":"stop-syncing"}`, "", nil, 0},
		{"behind, held by a covert fault", `{"resourceVersion":"41"}`, `{"stopSyncing":true}`, nil, 0},
		{"behind, slowed by a covert fault", `{"resourceVersion":"41"}`, `{"syncEverySeconds":600}`, nil, 0},
		{"cannot say", "", "", nil, 2 * time.Second},
		{"says nonsense", `{"resourceVersion":"x"}`, "", nil, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := viewstest.New("lab", "")
			cs := c.Clientset()
			svc, err := cs.CoreV1().Services("shop").Get(context.Background(), "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			svc.ResourceVersion = "42"
			if err := cs.Tracker().Update(corev1.SchemeGroupVersion.WithResource("services"), svc, "shop"); err != nil {
				t.Fatal(err)
			}
			c.SetProgrammed(tc.answer)
			c.SetFaultState(tc.faults)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			err = waitProgrammed(ctx, c, cs, []string{"lab-control-plane", "lab-worker"})
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("waitProgrammed = %v, want %v", err, tc.wantErr)
			}
			if took := time.Since(start); took < tc.minWait {
				t.Errorf("returned after %s, before the %s pause", took, tc.minWait)
			}
		})
	}
}
